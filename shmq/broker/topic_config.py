"""Topic configs (RocketMQ's ``TopicConfig`` / ``TopicConfigManager``), kept in topics.json."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

from shmq.broker import json_file
from shmq.errors import ConfigError
from shmq.message import validate_topic

PERM_PRIORITY, PERM_READ, PERM_WRITE, PERM_INHERIT = 8, 4, 2, 1
MAX_QUEUE_NUMS = 1024
AUTO_CREATE_TOPIC_KEY = "TBW102"
SYSTEM_SINGLE_QUEUE_TOPICS = ("SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT")
_JSON_NAMES = {
    "topic_name": "topicName",
    "read_queue_nums": "readQueueNums",
    "write_queue_nums": "writeQueueNums",
    "perm": "perm",
    "topic_filter_type": "topicFilterType",
    "topic_sys_flag": "topicSysFlag",
    "order": "order",
}


@dataclass(frozen=True)
class TopicConfig:
    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False

    def __post_init__(self) -> None:
        validate_topic(self.topic_name)
        for name in ("read_queue_nums", "write_queue_nums"):
            value = getattr(self, name)
            if not 1 <= value <= MAX_QUEUE_NUMS:
                raise ConfigError(
                    f"{_JSON_NAMES[name]} {value} of topic {self.topic_name} is not in "
                    f"1..{MAX_QUEUE_NUMS}"
                )
        if not 0 <= self.perm <= 15:
            raise ConfigError(f"perm {self.perm} of topic {self.topic_name} is not in 0..15")

    @property
    def is_readable(self) -> bool:
        return bool(self.perm & PERM_READ)

    @property
    def is_writable(self) -> bool:
        return bool(self.perm & PERM_WRITE)

    def to_json(self) -> dict[str, Any]:
        return {_JSON_NAMES[k]: v for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TopicConfig:
        back = {v: k for k, v in _JSON_NAMES.items()}
        return cls(**{back[k]: v for k, v in data.items() if k in back})


class TopicConfigManager:
    """The broker's topics, persisted to ``{config_dir}/topics.json`` in RocketMQ's shape."""

    def __init__(
        self,
        config_dir: str,
        *,
        default_queue_nums: int = 8,
        auto_create: bool = True,
        cluster_name: str = "DefaultCluster",
        broker_name: str = "broker-a",
    ) -> None:
        self.path = os.path.join(config_dir, "topics.json")
        self.default_queue_nums = default_queue_nums
        self.auto_create = auto_create
        self._lock = threading.Lock()
        self._topics: dict[str, TopicConfig] = {}
        self._version = {"counter": 0, "timestamp": int(time.time() * 1000)}
        self.dirty = False
        data = json_file.load(self.path)
        if data:
            for name, cfg in data.get("topicConfigTable", {}).items():
                self._topics[name] = TopicConfig.from_json(cfg)
            self._version = dict(data.get("dataVersion", self._version))
        system = [TopicConfig(t, 1, 1) for t in SYSTEM_SINGLE_QUEUE_TOPICS]
        system += [TopicConfig(n, 1, 1, PERM_READ | PERM_WRITE | PERM_INHERIT)
                   for n in (cluster_name, broker_name)]  # fmt: skip
        if auto_create:
            system.append(
                TopicConfig(
                    AUTO_CREATE_TOPIC_KEY,
                    default_queue_nums,
                    default_queue_nums,
                    PERM_READ | PERM_WRITE | PERM_INHERIT,
                )
            )
        for cfg in system:
            if cfg.topic_name not in self._topics:
                self._topics[cfg.topic_name] = cfg
                self.dirty = True

    def get(self, topic: str) -> TopicConfig | None:
        with self._lock:
            return self._topics.get(topic)

    def all(self) -> dict[str, TopicConfig]:
        with self._lock:
            return dict(self._topics)

    def update(self, cfg: TopicConfig) -> None:
        with self._lock:
            self._topics[cfg.topic_name] = cfg
            self._bump()

    def create_auto(self, topic: str) -> TopicConfig:
        """The config an auto-created topic gets (not yet stored; pass it to ``update``)."""
        if not self.auto_create:
            raise ConfigError(f"topic {topic} does not exist and autoCreateTopicEnable is false")
        n = self.default_queue_nums
        return TopicConfig(topic, n, n, PERM_READ | PERM_WRITE)

    def delete(self, topic: str) -> bool:
        with self._lock:
            if self._topics.pop(topic, None) is None:
                return False
            self._bump()
            return True

    def _bump(self) -> None:
        self._version = {
            "counter": int(self._version.get("counter", 0)) + 1,
            "timestamp": int(time.time() * 1000),
        }
        self.dirty = True

    @property
    def data_version(self) -> dict[str, int]:
        with self._lock:
            return dict(self._version)

    def to_wrapper_json(self) -> dict[str, Any]:
        """RocketMQ's ``TopicConfigSerializeWrapper`` (also the REGISTER_BROKER body)."""
        with self._lock:
            return {
                "dataVersion": dict(self._version),
                "topicConfigTable": {n: c.to_json() for n, c in sorted(self._topics.items())},
            }

    def persist(self) -> None:
        text = json_file.dumps_fastjson(self.to_wrapper_json())
        json_file.persist(self.path, text)
        self.dirty = False

    def persist_if_dirty(self) -> None:
        if self.dirty:
            self.persist()
