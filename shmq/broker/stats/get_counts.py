"""The messages each group got from each topic since the broker started: RocketMQ's
``GROUP_GET_NUMS`` counts, behind ``rates``, ``stats_items`` and the runtime info's out
numbers; and the bytes of their records (RocketMQ's ``rocketmq_throughput_out``: a TCP
pull's body, a consumer's reads the sizes of the consume queue units it took).

RocketMQ counts a pull's messages when it answers the pull. TCP pulls are counted so
(``pulled``); consumers on this host read the store's files themselves and count what they
read in their rows of the consumer gets segment (``ipc.consumer_gets``), which ``collect``
folds in (housekeeping, once a second; a runtime info request, so its number is current)
and ``release`` once more when a consumer slot is released, before another holder writes
the row. A commit counts nothing: a TCP consumer that commits what it pulled is counted
once, and a local one is counted while it reads, not when it commits.

A row is its holder's to write, so a client that keeps to its own row moves only its own
group's counts; but every client maps the segment writable, so no row is trusted: what
grew in a row is clamped to the queue's max offset per look (an honest consumer reads each
message of a queue at most once between two looks unless it seeks back; its bytes to that
many of the largest records), and a row that went down counts nothing (nor does a count
ever go down).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from shmq.ipc import consumer_gets as cg
from shmq.ipc import queue_table as qt
from shmq.ipc.segment import Segment

Key = tuple[str, str]  # (group, topic)
MAX_RECORD_BYTES = (1 << 31) - 1  # a record's TOTALSIZE is an int32


@dataclass
class _Holder:
    """A consumer slot's holder: its group and its row (both parts) as last counted."""

    group: str
    seen: np.ndarray


class GetCounts:
    """The counts of one broker; every method from any thread."""

    def __init__(self, gets: Segment, queues: Segment, consumers: int) -> None:
        capacity = int(queues.words[qt.CAPACITY])
        self._rows = [cg.row(gets.words, i, capacity) for i in range(consumers)]
        self._queue_buf, self._queue_words = queues.buf, queues.words
        self._maxima = qt.max_offsets(queues.buf)
        self._topics: list[str] = []  # the topic of each queue-table slot seen so far
        self._lock = threading.Lock()
        self._holders: dict[int, _Holder] = {}  # by consumer slot
        self._counts: dict[Key, int] = {}
        self._bytes: dict[Key, int] = {}

    def pulled(self, group: str, topic: str, count: int, size: int) -> None:
        """A TCP pull or POP answered with ``count`` messages, ``size`` bytes of records."""
        with self._lock:
            self._add((group, topic), count, size)

    def hold(self, consumer: int, group: str) -> None:
        """Consumer slot ``consumer`` was given to a client of ``group`` (before the client
        learns it): its reads count from what the row holds now."""
        with self._lock:
            self._holders[consumer] = _Holder(group, self._rows[consumer].copy())

    def release(self, consumer: int) -> None:
        """The slot's holder is gone (unregistered, or its process died): count what it read
        since the last look."""
        with self._lock:
            holder = self._holders.pop(consumer, None)
            if holder is not None:
                self._fold(consumer, holder, self._queue_topics())

    def collect(self) -> None:
        """Count what every local consumer read since the last look."""
        with self._lock:
            topics = self._queue_topics()
            for consumer, holder in self._holders.items():
                self._fold(consumer, holder, topics)

    def counts(self) -> dict[Key, int]:
        """Per (group, topic), the messages got so far (local reads as of the last
        ``collect``)."""
        with self._lock:
            return dict(self._counts)

    def sizes(self) -> dict[Key, int]:
        """Per (group, topic), the record bytes got so far (as ``counts``)."""
        with self._lock:
            return dict(self._bytes)

    def total(self) -> int:
        with self._lock:
            return sum(self._counts.values())

    def _queue_topics(self) -> list[str]:
        """The topic of each queue-table slot published so far (a client finds no other
        slot in the directory, so it reads no other)."""
        new = qt.read_directory(self._queue_buf, self._queue_words, len(self._topics))
        self._topics += [topic.decode() for _, topic, _ in new]
        return self._topics

    def _fold(self, consumer: int, holder: _Holder, topics: list[str]) -> None:
        n = len(topics)
        row = self._rows[consumer]
        now = np.empty((2, n), np.int64)  # one read of each word the client may write:
        now[cg.GOT_BYTES] = row[cg.GOT_BYTES, :n]  # the bytes first (``consumer_gets``)
        now[cg.GOT_MESSAGES] = row[cg.GOT_MESSAGES, :n]
        grown = np.maximum(now - holder.seen[:, :n], 0)
        holder.seen[:, :n] = now
        for slot in np.flatnonzero(grown.any(axis=0)):
            top = max(int(self._maxima[slot]), 0)
            count = min(int(grown[cg.GOT_MESSAGES, slot]), top)
            size = min(int(grown[cg.GOT_BYTES, slot]), top * MAX_RECORD_BYTES)
            self._add((holder.group, topics[slot]), count, size)

    def _add(self, key: Key, count: int, size: int) -> None:
        if count > 0:
            self._counts[key] = self._counts.get(key, 0) + count
        if size > 0:
            self._bytes[key] = self._bytes.get(key, 0) + size
