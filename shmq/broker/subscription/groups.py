"""Subscription groups (RocketMQ's ``SubscriptionGroupConfig`` / ``SubscriptionGroupManager``),
kept in subscriptionGroup.json.

A subscription group is a consumer group's broker-side settings: whether it may consume,
whether it may start from the minimum offset or consume in broadcast mode, how many retry
queues it has and how many times a message is retried before it goes to the DLQ. Admins
create, change and delete them (``shmq admin update-sub-group``); the table is written in
RocketMQ 4.9's file shape::

    {"dataVersion":{"counter":1,"timestamp":ms},
     "subscriptionGroupTable":{"G":{"brokerId":0,"consumeBroadcastEnable":true,
        "consumeEnable":true,"consumeFromMinEnable":true,"groupName":"G",
        "notifyConsumerIdsChangedEnable":true,"retryMaxTimes":16,"retryQueueNums":1,
        "whichBrokerWhenConsumeSlowly":1}}}

so a RocketMQ broker's file loads here and the other way round (5.x fields such as
``groupRetryPolicy`` or ``attributes`` are ignored on load).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from shmq import json_file
from shmq.errors import ConfigError, ResponseError
from shmq.remoting.codes import ResponseCode

FILE_NAME = "subscriptionGroup.json"
MAX_GROUP_LENGTH = 255  # RocketMQ's Validators.CHARACTER_MAX_LENGTH
MAX_RETRY_QUEUE_NUMS = 1024
MAX_RETRY_TIMES = 1024
_GROUP_RE = re.compile(r"[%|a-zA-Z0-9_-]+")

# The groups RocketMQ 4.9's SubscriptionGroupManager.init() adds (the Aliyun ONS ones left
# out): the admin tools', the filter server's, the self-test and the transaction checker's.
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
SYSTEM_GROUPS = (
    TOOLS_CONSUMER_GROUP,
    "FILTERSRV_CONSUMER",
    "SELF_TEST_C_GROUP",
    "CID_RMQ_SYS_TRANS",
)

# field name → RocketMQ JSON key, and the JSON type each accepts.
_JSON_KEYS: dict[str, tuple[str, type]] = {
    "group_name": ("groupName", str),
    "consume_enable": ("consumeEnable", bool),
    "consume_from_min_enable": ("consumeFromMinEnable", bool),
    "consume_broadcast_enable": ("consumeBroadcastEnable", bool),
    "retry_queue_nums": ("retryQueueNums", int),
    "retry_max_times": ("retryMaxTimes", int),
    "broker_id": ("brokerId", int),
    "which_broker_when_consume_slowly": ("whichBrokerWhenConsumeSlowly", int),
    "notify_consumer_ids_changed_enable": ("notifyConsumerIdsChangedEnable", bool),
    "consume_message_orderly": ("consumeMessageOrderly", bool),  # RocketMQ 5's
}
_KIND_NAMES = {int: "an integer", str: "a string", bool: "a boolean"}
# integer field → (lowest, highest) accepted value
_RANGES = {
    "retry_queue_nums": (0, MAX_RETRY_QUEUE_NUMS),
    "retry_max_times": (-1, MAX_RETRY_TIMES),
    "broker_id": (0, 1 << 20),
    "which_broker_when_consume_slowly": (0, 1 << 20),
}


def validate_group(group: Any) -> str:
    """``group`` if it is a valid group name (RocketMQ's ``Validators.checkGroup``)."""
    if not isinstance(group, str) or not group.strip():
        raise ConfigError(f"the consumer group {group!r} is blank")
    if len(group) > MAX_GROUP_LENGTH:
        raise ConfigError(
            f"the consumer group {group[:40]!r}... is {len(group)} characters long,"
            f" above the limit of {MAX_GROUP_LENGTH}"
        )
    if not _GROUP_RE.fullmatch(group):
        raise ConfigError(
            f"the consumer group {group!r} contains illegal characters:"
            " it must match ^[%|a-zA-Z0-9_-]+$"
        )
    return group


@dataclass(frozen=True)
class SubscriptionGroupConfig:
    """One consumer group's broker-side settings (RocketMQ 4.9's defaults)."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    # RocketMQ 5: the group consumes in order (the gRPC proxy's FIFO receives and orderly
    # assignments, and what it tells clients in their settings)
    consume_message_orderly: bool = False

    def __post_init__(self) -> None:
        validate_group(self.group_name)
        for f in fields(self):
            key, kind = _JSON_KEYS[f.name]
            value = getattr(self, f.name)
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise ConfigError(
                    f"{key} = {value!r} of group {self.group_name} is not {_KIND_NAMES[kind]}"
                )
            low_high = _RANGES.get(f.name)
            if low_high is not None and not low_high[0] <= value <= low_high[1]:
                raise ConfigError(
                    f"{key} {value} of group {self.group_name} is not in"
                    f" {low_high[0]}..{low_high[1]}"
                )

    def to_json(self) -> dict[str, Any]:
        """RocketMQ's JSON form: ``{"brokerId":0,"consumeBroadcastEnable":true,...}``."""
        return {key: getattr(self, name) for name, (key, _) in _JSON_KEYS.items()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SubscriptionGroupConfig:
        """Parse RocketMQ's JSON form; unknown keys (5.x ``groupRetryPolicy``, ...) are
        ignored, missing ones take the defaults. ``ConfigError`` for a bad value."""
        if not isinstance(data, Mapping):
            raise ConfigError(
                f"a subscription group config is a {type(data).__name__}, not a JSON object"
            )
        values = {name: data[key] for name, (key, _) in _JSON_KEYS.items() if key in data}
        if "group_name" not in values:
            raise ConfigError(f"subscription group config {dict(data)!r} has no groupName")
        return cls(**values)

    def updated(self, changes: Mapping[str, Any]) -> SubscriptionGroupConfig:
        """A copy with ``changes`` (RocketMQ JSON keys) applied; ``ConfigError`` for an
        unknown key or a bad value."""
        names = {key: name for name, (key, _) in _JSON_KEYS.items()}
        unknown = sorted(set(changes) - set(names))
        if unknown:
            raise ConfigError(
                f"unknown subscription group setting(s) {', '.join(unknown)};"
                f" known: {', '.join(sorted(names))}"
            )
        return replace(self, **{names[k]: v for k, v in changes.items()})


class SubscriptionGroupManager(json_file.VersionedTable[SubscriptionGroupConfig]):
    """The broker's subscription groups, persisted to ``{config_dir}/subscriptionGroup.json``;
    thread-safe. RocketMQ's system groups are added when absent."""

    def __init__(self, config_dir: str) -> None:
        self.path = os.path.join(config_dir, FILE_NAME)
        super().__init__("subscriptionGroupTable", "group", _group_name)
        self._load(SubscriptionGroupConfig.from_json)
        self._add_missing([SubscriptionGroupConfig(name) for name in SYSTEM_GROUPS])

    def find(self, group: str, auto_create: bool) -> SubscriptionGroupConfig:
        """The group's settings (RocketMQ's ``findSubscriptionGroupConfig``), created with
        the defaults when absent and ``auto_create`` (``autoCreateSubscriptionGroup``);
        ``ResponseError`` SUBSCRIPTION_GROUP_NOT_EXIST, the answer every request naming such
        a group gets, when absent otherwise."""
        cfg = self.get(group)
        if cfg is None:
            if not auto_create:
                raise ResponseError(
                    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                    f"subscription group {group} does not exist and "
                    "autoCreateSubscriptionGroup is false",
                )
            cfg = SubscriptionGroupConfig(group)
            self.update(cfg)
        return cfg


def _group_name(cfg: SubscriptionGroupConfig) -> str:
    return cfg.group_name
