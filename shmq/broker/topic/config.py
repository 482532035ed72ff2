"""Topic configs (RocketMQ's ``TopicConfig`` / ``TopicConfigManager``), kept in topics.json.

The broker's topic table decides which topics accept sends and how many queues they have;
it is persisted as RocketMQ's ``TopicConfigSerializeWrapper`` so the same JSON serves as
``config/topics.json`` and as the body a broker registers with the name servers.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shmq import json_file
from shmq.errors import ConfigError
from shmq.message import validate_topic
from shmq.names import DELETED_TOPIC_LOG, SYSTEM_TOPICS, reply_topic

PERM_PRIORITY, PERM_READ, PERM_WRITE, PERM_INHERIT = 8, 4, 2, 1
PERM_READ_WRITE = PERM_READ | PERM_WRITE
MAX_QUEUE_NUMS = 1024
TOPIC_FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")
AUTO_CREATE_TOPIC_KEY = "TBW102"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
FILE_NAME = "topics.json"

# field name → RocketMQ JSON key, and the JSON types each accepts.
_JSON_KEYS: dict[str, tuple[str, type]] = {
    "topic_name": ("topicName", str),
    "read_queue_nums": ("readQueueNums", int),
    "write_queue_nums": ("writeQueueNums", int),
    "perm": ("perm", int),
    "topic_filter_type": ("topicFilterType", str),
    "topic_sys_flag": ("topicSysFlag", int),
    "order": ("order", bool),
}
_KIND_NAMES = {int: "an integer", str: "a string", bool: "a boolean"}


@dataclass(frozen=True)
class TopicConfig:
    """One topic's queues and permissions (RocketMQ's defaults: 16 queues, read + write)."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False

    def __post_init__(self) -> None:
        validate_topic(self.topic_name)
        if self.topic_name == DELETED_TOPIC_LOG:
            raise ConfigError(
                f"topic {DELETED_TOPIC_LOG} is reserved: only the broker writes it (a record "
                "per deleted topic)"
            )
        for name in ("read_queue_nums", "write_queue_nums"):
            value = getattr(self, name)
            if not 1 <= value <= MAX_QUEUE_NUMS:
                raise ConfigError(
                    f"{_JSON_KEYS[name][0]} {value} of topic {self.topic_name} is not in "
                    f"1..{MAX_QUEUE_NUMS}"
                )
        if not 0 <= self.perm <= 15:
            raise ConfigError(f"perm {self.perm} of topic {self.topic_name} is not in 0..15")
        if self.topic_filter_type not in TOPIC_FILTER_TYPES:
            raise ConfigError(
                f"topicFilterType {self.topic_filter_type!r} of topic {self.topic_name} is "
                f"not one of {', '.join(TOPIC_FILTER_TYPES)}"
            )
        if self.topic_sys_flag < 0:
            raise ConfigError(f"topicSysFlag {self.topic_sys_flag} of {self.topic_name} is < 0")

    @property
    def is_readable(self) -> bool:
        return bool(self.perm & PERM_READ)

    @property
    def is_writable(self) -> bool:
        return bool(self.perm & PERM_WRITE)

    def to_json(self) -> dict[str, Any]:
        """RocketMQ's JSON form: ``{"order":false,"perm":6,"readQueueNums":16,...}``."""
        return {key: getattr(self, name) for name, (key, _) in _JSON_KEYS.items()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TopicConfig:
        """Parse RocketMQ's JSON form; keys this version does not know (5.x ``attributes``)
        are ignored, missing ones take the defaults. ``ConfigError`` for a bad value."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"a topic config is a {type(data).__name__}, not a JSON object")
        values: dict[str, Any] = {}
        for name, (key, kind) in _JSON_KEYS.items():
            if key not in data:
                continue
            value = data[key]
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise ConfigError(f"topic config {key} = {value!r} is not {_KIND_NAMES[kind]}")
            values[name] = value
        if "topic_name" not in values:
            raise ConfigError(f"topic config {dict(data)!r} has no topicName")
        return cls(**values)


class TopicConfigManager(json_file.VersionedTable[TopicConfig]):
    """The broker's topics, persisted to ``{config_dir}/topics.json``; thread-safe.

    RocketMQ's system topics are added when absent: ``SELF_TEST_TOPIC``,
    ``OFFSET_MOVED_EVENT``, the cluster's reply topic (``<cluster>_REPLY_TOPIC``), ``TBW102``
    (the auto-create template) when ``auto_create``,
    and the cluster- and broker-name topics, readable and writable only when
    ``cluster_topic_enable`` / ``broker_topic_enable`` (else inherit-only, as RocketMQ), and
    the message trace topic with one queue when ``trace_topic`` is given (``traceTopicEnable``
    with ``msgTraceTopicName``).
    """

    def __init__(
        self,
        config_dir: str,
        *,
        default_queue_nums: int = 8,
        auto_create: bool = True,
        cluster_name: str = "DefaultCluster",
        broker_name: str = "broker-a",
        cluster_topic_enable: bool = True,
        broker_topic_enable: bool = True,
        trace_topic: str | None = None,
    ) -> None:
        self.path = os.path.join(config_dir, FILE_NAME)
        self.default_queue_nums = default_queue_nums
        self.auto_create = auto_create
        super().__init__("topicConfigTable", "topic", _topic_name)
        self._load(TopicConfig.from_json)
        rw = PERM_READ | PERM_WRITE
        system = [
            TopicConfig(SELF_TEST_TOPIC, 1, 1),
            TopicConfig(cluster_name, 1, 1, PERM_INHERIT | (rw if cluster_topic_enable else 0)),
            TopicConfig(broker_name, 1, 1, PERM_INHERIT | (rw if broker_topic_enable else 0)),
            TopicConfig(OFFSET_MOVED_EVENT, 1, 1),
            TopicConfig(reply_topic(cluster_name), 1, 1),
        ]
        if auto_create:
            n = default_queue_nums
            system.append(TopicConfig(AUTO_CREATE_TOPIC_KEY, n, n, rw | PERM_INHERIT))
        if trace_topic is not None:
            system.append(TopicConfig(trace_topic, 1, 1))
        self._add_missing(system)

    def create_auto(self, topic: str, queue_nums: int = 0) -> TopicConfig:
        """The topic's config, created when it does not exist with ``min(queue_nums,
        default_queue_nums)`` queues (the producer's ``defaultTopicQueueNums`` against
        TBW102's, as ``createTopicInSendMessageMethod``; 0 or less: the default) and perm read
        + write; ``ConfigError`` then if auto-creation is off."""
        with self._lock:
            existing = self._entries.get(topic)
            if existing is not None:
                return existing
            if not self.auto_create:
                raise ConfigError(
                    f"topic {topic} does not exist and autoCreateTopicEnable is false"
                )
            n = (
                min(queue_nums, self.default_queue_nums)
                if queue_nums > 0
                else self.default_queue_nums
            )
            cfg = TopicConfig(topic, n, n, PERM_READ | PERM_WRITE)
            self._entries[topic] = cfg
            self._bump()
            return cfg


def system_topics(cluster_name: str, broker_name: str) -> set[str]:
    """RocketMQ's system topic set, with a broker's cluster and broker names (topics no
    admin may delete, and GET_SYSTEM_TOPIC_LIST_FROM_BROKER's answer)."""
    return {*SYSTEM_TOPICS, cluster_name, broker_name}


def _topic_name(cfg: TopicConfig) -> str:
    return cfg.topic_name
