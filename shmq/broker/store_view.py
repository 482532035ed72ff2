"""The store as the supervisor process reads it: ONE ``StoreReader`` for every processor and
service of the process (the TCP pull, admin and query lookups, the transaction service),
and the queue table reput publishes.

A ``StoreReader`` keeps mutable state (its mapped files, least recently used first out, and
per-queue file tables), so every use holds ``reading()``'s lock; what a call returns stays
valid after the lock is released (a view keeps its mapping alive, ``MappedFile.close``).
One reader rather than one per user: the process maps each CommitLog file once, and its
mappings are bounded once (``COMMITLOG_FILES_MAPPED``).

The lookups processors share (RocketMQ's ``MessageStore`` queries: max and min offset of
a queue, store time, offset by time, the message at a CommitLog offset) are methods here,
so every request answers them from the same code.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from shmq.config import MessageStoreConfig
from shmq.ipc import counters as cn
from shmq.ipc import queue_table as qt
from shmq.ipc.segment import Segment
from shmq.message import MessageExt
from shmq.store.reader import StoreReader


class StoreView:
    """The supervisor process's reads of the store at ``config.store_path_root_dir``, with
    the queue maxima of ``queues`` (the queue-table segment) and the CommitLog offsets of
    ``counters``."""

    def __init__(self, config: MessageStoreConfig, queues: Segment, counters: np.ndarray) -> None:
        self._reader = StoreReader(
            config.store_path_root_dir,
            config.mapped_file_size_commit_log,
            config.consume_queue_file_size,
        )
        self._lock = threading.Lock()
        self.words = counters
        self.directory = qt.QueueDirectory(queues.buf, queues.words)
        self.maxima = qt.max_offsets(queues.buf)
        # (topic, queue id) -> (first offset, when listed, MIN_PHYSICAL_OFFSET then)
        self._min_offsets: dict[tuple[str, int], tuple[int, float, int]] = {}

    @contextmanager
    def reading(self) -> Iterator[StoreReader]:
        """The reader, its lock held until the block ends."""
        with self._lock:
            yield self._reader

    def close(self) -> None:
        with self._lock:
            self._reader.close()

    # -- the queue table ------------------------------------------------------------------------

    def slot(self, topic: str, queue_id: int) -> int:
        """The queue's slot in the queue table (-1: not published yet)."""
        return self.directory.slot(topic.encode(), queue_id)

    def max_offset(self, topic: str, queue_id: int) -> int:
        """The queue's max offset as reput last published it (0: no such queue yet)."""
        slot = self.directory.slot(topic.encode(), queue_id)
        return int(self.maxima[slot]) if slot >= 0 else 0

    def min_offset(self, topic: str, queue_id: int, fresh_within: float = 0.0) -> int:
        """The queue's first offset still stored (``StoreReader.min_offset``).

        ``fresh_within``: seconds an earlier answer may be reused, unless the CommitLog's
        first offset moved since (cleanup, after which reput deletes consume-queue files).
        The pull path uses it: a directory listing per pull cost more than the rest of an
        empty pull, and an answer at most that old only sends a pull below the first file
        to the next file, as a pull racing cleanup would be. Only such answers are kept, and
        a deleted topic's are dropped: an admin request may name any topic and queue id, a
        pull only one that exists."""
        key = (topic, queue_id)
        now = time.monotonic()
        cleaned = int(self.words[cn.MIN_PHYSICAL_OFFSET])
        known = self._min_offsets.get(key)
        if known is not None and now - known[1] < fresh_within and known[2] == cleaned:
            return known[0]
        high = self.max_offset(topic, queue_id)
        with self._lock:
            first = self._reader.min_offset(topic, queue_id, high, cleaned)
        if fresh_within > 0:
            self._min_offsets[key] = (first, now, cleaned)
        return first

    def forget_min_offsets(self, topic: str) -> None:
        """Drop the min offsets kept of a deleted topic's queues (``min_offset``)."""
        for key in [k for k in self._min_offsets if k[0] == topic]:
            del self._min_offsets[key]

    # -- lookups --------------------------------------------------------------------------------

    def unit_at(self, topic: str, queue_id: int, offset: int) -> tuple[int, int] | None:
        """``(CommitLog offset, size)`` of the queue's unit at ``offset``; None where the
        queue holds none."""
        with self._lock:
            units, _ = self._reader.units(topic, queue_id, offset, offset + 1)
            return (int(units["offset"][0]), int(units["size"][0])) if units.size else None

    def store_timestamp(self, topic: str, queue_id: int, offset: int) -> int | None:
        """The store time of the queue's message at ``offset``; None when there is none."""
        with self._lock:
            return self._reader.store_timestamp(topic, queue_id, offset)

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first queue offset stored at or after ``timestamp_ms`` (the max offset when
        none), searched from offset 0 (SEARCH_OFFSET_BY_TIMESTAMP)."""
        high = self.max_offset(topic, queue_id)
        with self._lock:
            return self._reader.offset_by_time(topic, queue_id, timestamp_ms, 0, high)

    def view(self, offset: int) -> MessageExt | None:
        """The message at CommitLog ``offset`` (CRC-checked), or None (also for an offset
        not yet written)."""
        if not 0 <= offset < cn.load(self.words, cn.WRITE_OFFSET):
            return None
        with self._lock:
            return self._reader.view(offset)

    def record_bytes(self, offset: int) -> bytes | None:
        """The whole record at CommitLog ``offset`` (CRC-checked), or None."""
        if not 0 <= offset < cn.load(self.words, cn.WRITE_OFFSET):
            return None
        with self._lock:
            batch = self._reader.record_at(offset)
            if batch is None:
                return None
            pos, size = int(batch.rows["pos"][0]), int(batch.rows["size"][0])
            return batch.buf[pos : pos + size].tobytes()

    def read(self, topic: str, queue_id: int, offset: int, end: int) -> list[MessageExt]:
        """The messages at queue offsets ``[offset, end)`` (end below the max offset)."""
        out: list[MessageExt] = []
        with self._lock:
            while offset < end:
                msgs, next_offset = self._reader.read_queue(topic, queue_id, offset, end,
                                                            end - offset)  # fmt: skip
                out += msgs
                if next_offset <= offset:
                    break
                offset = next_offset
        return out
