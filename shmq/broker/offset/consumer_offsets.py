"""Consumer offsets (RocketMQ's ``ConsumerOffsetManager``), kept in consumerOffset.json.

Committed offsets are what a consumer group resumes from after a restart or a rebalance, so
they live on the broker, keyed ``topic@group`` → ``{queueId: next offset to consume}``, and
are written in RocketMQ's file shape ``{"offsetTable":{"T@G":{0:12,1:7}}}`` (bare integer
queue ids), so a RocketMQ broker's file loads here and the other way round.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from shmq import json_file
from shmq.errors import ConfigError

SEPARATOR = "@"
FILE_NAME = "consumerOffset.json"


class ConsumerOffsetManager(json_file.PersistedTable):
    """Committed offsets per group, topic and queue; thread-safe."""

    def __init__(self, config_dir: str) -> None:
        self.path = os.path.join(config_dir, FILE_NAME)
        super().__init__()
        self._table: dict[str, dict[int, int]] = json_file.load(self.path, parse) or {}

    @staticmethod
    def _key(group: str, topic: str) -> str:
        for kind, name in (("group", group), ("topic", topic)):
            if not name:
                raise ConfigError(f"{kind} must not be empty")
            if SEPARATOR in name:
                raise ConfigError(f"{kind} {name!r} must not contain {SEPARATOR!r}")
        return f"{topic}{SEPARATOR}{group}"

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Record ``offset`` as the next message ``group`` consumes from the queue."""
        key = self._key(group, topic)
        with self._lock:
            self._table.setdefault(key, {})[queue_id] = offset
            self._dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed next offset, or -1 when the group has none for this queue
        (QUERY_CONSUMER_OFFSET then answers as RocketMQ 4.9 does: 0 for a queue starting at
        0 in memory, QUERY_NOT_FOUND otherwise; see ``ConsumerManageProcessor.query_offset``)."""
        key = self._key(group, topic)
        with self._lock:
            return self._table.get(key, {}).get(queue_id, -1)

    def offsets(self, group: str, topic: str) -> dict[int, int]:
        """``{queue id: committed next offset}`` of the group on the topic."""
        key = self._key(group, topic)
        with self._lock:
            return dict(self._table.get(key, {}))

    def clone(self, src_group: str, dest_group: str, topic: str) -> bool:
        """Give ``dest_group`` on ``topic`` a copy of ``src_group``'s offsets in place of its
        own (RocketMQ's ``cloneOffset``); ``False`` when the source has none there."""
        src, dest = self._key(src_group, topic), self._key(dest_group, topic)
        with self._lock:
            offsets = self._table.get(src)
            if not offsets:
                return False
            self._table[dest] = dict(offsets)
            self._dirty = True
            return True

    def groups_of_topic(self, topic: str) -> list[str]:
        """The groups with an offset on ``topic``, sorted."""
        with self._lock:
            return sorted(g for t, g in map(_split, self._table) if t == topic)

    def groups(self) -> set[str]:
        """Every group with an offset."""
        with self._lock:
            return {g for _, g in map(_split, self._table)}

    def topics_of_group(self, group: str) -> list[str]:
        """The topics ``group`` has offsets on, sorted."""
        with self._lock:
            return sorted(t for t, g in map(_split, self._table) if g == group)

    def remove_group(self, group: str) -> bool:
        """Forget every offset of ``group``; ``False`` when it had none."""
        return self._remove(lambda _topic, g: g == group)

    def remove_topic(self, topic: str) -> bool:
        """Forget every group's offsets on ``topic`` (a deleted topic, as RocketMQ 5's
        ``cleanOffsetByTopic``); ``False`` when there were none."""
        return self._remove(lambda t, _group: t == topic)

    def _remove(self, which: Callable[[str, str], bool]) -> bool:
        with self._lock:
            keys = [k for k in self._table if which(*_split(k))]
            for key in keys:
                del self._table[key]
            if keys:
                self._dirty = True
            return bool(keys)

    def put_all(self, table: dict[str, dict[int, int]]) -> None:
        """Take every ``topic@group`` entry of ``table`` in place of this table's (a slave
        copying its master's, RocketMQ's ``offsetTable.putAll``); other entries stay."""
        with self._lock:
            self._table.update({key: dict(queues) for key, queues in table.items()})
            self._dirty = True

    def _snapshot(self) -> Any:
        return {"offsetTable": self._table}


def _split(key: str) -> tuple[str, str]:
    topic, _, group = key.partition(SEPARATOR)
    return topic, group


def parse(text: str) -> dict[str, dict[int, int]]:
    """consumerOffset.json → offset table; ``ValueError`` if malformed. Unknown top-level
    fields (5.x ``dataVersion``, ``groupTopicMap``) are ignored."""
    data: Any = json_file.loads_fastjson(text, int_keys=True)
    table = data.get("offsetTable", {}) if isinstance(data, dict) else None
    if not isinstance(table, dict):
        raise ConfigError("consumerOffset.json has no offsetTable object")
    out: dict[str, dict[int, int]] = {}
    for key, queues in table.items():
        if not isinstance(key, str) or SEPARATOR not in key or not isinstance(queues, dict):
            raise ConfigError(f"offsetTable entry {key!r} is not 'topic@group': {{queue: offset}}")
        if not all(_is_int(q) and _is_int(o) for q, o in queues.items()):
            raise ConfigError(f"offsetTable entry {key!r} holds non-integer queues or offsets")
        out[key] = dict(queues)
    return out


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
