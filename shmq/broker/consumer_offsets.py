"""Consumer offsets (RocketMQ's ``ConsumerOffsetManager``), kept in consumerOffset.json.

The table maps ``topic@group`` to ``{queueId: next offset to consume}``.
"""

from __future__ import annotations

import os
import threading

from shmq.broker import json_file
from shmq.errors import ConfigError

SEPARATOR = "@"


class ConsumerOffsetManager:
    def __init__(self, config_dir: str) -> None:
        self.path = os.path.join(config_dir, "consumerOffset.json")
        self._lock = threading.Lock()
        self._table: dict[str, dict[int, int]] = {}
        self.dirty = False
        data = json_file.load(self.path)
        if data:
            for key, queues in data.get("offsetTable", {}).items():
                self._table[key] = {int(q): int(o) for q, o in queues.items()}

    @staticmethod
    def _key(group: str, topic: str) -> str:
        for name, value in (("group", group), ("topic", topic)):
            if SEPARATOR in value:
                raise ConfigError(f"{name} {value!r} must not contain {SEPARATOR!r}")
        return f"{topic}{SEPARATOR}{group}"

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        key = self._key(group, topic)
        with self._lock:
            self._table.setdefault(key, {})[queue_id] = offset
            self.dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed next offset, or -1 when the group has none for this queue."""
        with self._lock:
            return self._table.get(self._key(group, topic), {}).get(queue_id, -1)

    def offsets(self, group: str, topic: str) -> dict[int, int]:
        with self._lock:
            return dict(self._table.get(self._key(group, topic), {}))

    def groups_of_topic(self, topic: str) -> list[str]:
        with self._lock:
            return sorted(
                k.split(SEPARATOR, 1)[1] for k in self._table if k.split(SEPARATOR)[0] == topic
            )

    def topics_of_group(self, group: str) -> list[str]:
        with self._lock:
            return sorted(
                k.split(SEPARATOR, 1)[0] for k in self._table if k.split(SEPARATOR, 1)[1] == group
            )

    def remove_group(self, group: str) -> None:
        with self._lock:
            for key in [k for k in self._table if k.split(SEPARATOR, 1)[1] == group]:
                del self._table[key]
            self.dirty = True

    def persist(self) -> None:
        with self._lock:
            table = {k: dict(v) for k, v in self._table.items()}
            self.dirty = False
        json_file.persist(self.path, json_file.dumps_fastjson({"offsetTable": table}))

    def persist_if_dirty(self) -> None:
        if self.dirty:
            self.persist()
