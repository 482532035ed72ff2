"""Where a consumer group's progress lives (RocketMQ's ``OffsetStore``).

Clustering keeps offsets on the broker that holds the queue (``consumerOffset.json``);
broadcasting keeps them in a local file per consumer instance, because every consumer reads
every queue for itself. Both cache the offsets in memory; consume threads ``update`` the
cache and a timer ``persist``\\ s it every ``persistConsumerOffsetInterval`` (5 s) and at
shutdown, so a crash re-delivers at most that much.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

from shmq import files
from shmq.client.types import MessageQueue
from shmq.errors import ConfigError, ShmqError

if TYPE_CHECKING:
    from shmq.client.transport.queue_reader import QueueReader

log = logging.getLogger(__name__)


class OffsetStore:
    """The in-memory table shared by both kinds; subclasses load and save it."""

    def __init__(self) -> None:
        self._table: dict[MessageQueue, int] = {}
        self._dirty: set[MessageQueue] = set()
        self._lock = threading.Lock()

    def update(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None:
        with self._lock:
            old = self._table.get(mq, -1)
            if increase_only and offset <= old:
                return
            if offset != old:
                self._table[mq] = offset
                self._dirty.add(mq)

    def read(self, mq: MessageQueue, from_store: bool = False) -> int:
        """The offset of ``mq``, -1 when there is none; ``from_store`` skips the cache."""
        if not from_store:
            with self._lock:
                if mq in self._table:
                    return self._table[mq]
        offset = self._fetch(mq)
        if offset >= 0:
            with self._lock:
                self._table[mq] = offset
                self._dirty.discard(mq)
        return offset

    def remove(self, mq: MessageQueue) -> None:
        with self._lock:
            self._table.pop(mq, None)
            self._dirty.discard(mq)

    def snapshot(self) -> dict[MessageQueue, int]:
        with self._lock:
            return dict(self._table)

    def _take_dirty(self, mqs: Iterable[MessageQueue] | None) -> dict[MessageQueue, int]:
        with self._lock:
            wanted = self._dirty if mqs is None else self._dirty & set(mqs)
            out = {mq: self._table[mq] for mq in wanted if mq in self._table}
            self._dirty -= set(out)
            return out

    def _mark_dirty(self, mqs: Iterable[MessageQueue]) -> None:
        with self._lock:
            self._dirty |= {mq for mq in mqs if mq in self._table}

    def persist(self, mqs: Iterable[MessageQueue] | None = None) -> None:
        raise NotImplementedError

    def _fetch(self, mq: MessageQueue) -> int:
        raise NotImplementedError


class RemoteBrokerOffsetStore(OffsetStore):
    """Clustering: offsets committed to the broker of each queue."""

    def __init__(self, reader: QueueReader) -> None:
        super().__init__()
        self.reader = reader
        self._persisting = threading.Lock()

    def _fetch(self, mq: MessageQueue) -> int:
        return self.reader.committed(mq)

    def persist(self, mqs: Iterable[MessageQueue] | None = None) -> None:
        """Commit the changed offsets (of ``mqs``, or all); a failed commit (the broker
        or its master gone) stays pending and is committed by a later call.

        One persist at a time: when it returns, every offset it found committed is on the
        broker, including one an earlier persist (the timer's) had already taken and was
        still committing. A rebalance persists a queue it gives away and then lets it go
        (an orderly consumer unlocks it); without waiting for that earlier commit, the next
        owner could read the offset before it and consume the queue again from there."""
        with self._persisting:
            failed = []
            for mq, offset in self._take_dirty(mqs).items():
                try:
                    self.reader.commit(mq, offset)
                except ShmqError as exc:
                    log.warning("cannot commit offset %d of %s: %s", offset, mq, exc)
                    failed.append(mq)
            self._mark_dirty(failed)


class LocalFileOffsetStore(OffsetStore):
    """Broadcasting: offsets in ``{dir}/{instance}/{group}/offsets.json`` (RocketMQ:
    ``~/.rocketmq_offsets/{clientId}/{group}/offsets.json``); written to a temporary file
    and renamed, with the previous version kept as ``.bak``."""

    def __init__(self, directory: str, instance_name: str, group: str) -> None:
        super().__init__()
        self.path = os.path.join(
            os.path.expanduser(directory), instance_name, group, "offsets.json"
        )
        self._file_lock = threading.Lock()
        with self._lock:
            self._table.update(self._load())

    def _load(self) -> dict[MessageQueue, int]:
        for path in (self.path, self.path + ".bak"):
            try:
                with open(path) as f:
                    data = json.load(f)
                return {
                    MessageQueue(e["topic"], e["brokerName"], int(e["queueId"])): int(e["offset"])
                    for e in data["offsetTable"]
                }
            except FileNotFoundError:
                continue
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("offset file %s is unreadable (%s); trying its backup", path, exc)
        if os.path.exists(self.path):
            raise ConfigError(f"offset file {self.path} and its backup are unreadable")
        return {}

    def _fetch(self, mq: MessageQueue) -> int:
        return self._load().get(mq, -1)

    def persist(self, mqs: Iterable[MessageQueue] | None = None) -> None:
        if not self._take_dirty(mqs) and os.path.exists(self.path):
            return
        table = self.snapshot()
        body = {
            "offsetTable": [
                {"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id,
                 "offset": off}
                for mq, off in sorted(table.items())
            ]
        }  # fmt: skip
        with self._file_lock:
            files.makedirs(os.path.dirname(self.path))
            tmp = self.path + ".tmp"
            with os.fdopen(files.create(tmp, os.O_WRONLY | os.O_TRUNC), "w") as f:
                json.dump(body, f)
                f.flush()
                os.fsync(f.fileno())
            if os.path.exists(self.path):
                with contextlib.suppress(OSError):
                    os.replace(self.path, self.path + ".bak")
            os.replace(tmp, self.path)
