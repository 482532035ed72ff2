"""Messages and record bytes stored per topic, and their size histogram, read from the
consume queues.

RocketMQ 5 counts ``rocketmq_messages_in_total``, ``rocketmq_throughput_in_total`` and
``rocketmq_message_size`` in its send processor, message by message. shmq's local producers
write rings no processor sees, and counting in the writer would add work per message to the
hot path. The consume-queue units reput writes already hold each message's queue and record
size, so the metrics process reads the units published since its last look (20 bytes a
message, one numpy pass per file, never past the max offset reput published) and folds them
in: exact counts, as current as reput, at no cost to the agents.

Counts start with the metrics process: what the queues held before it started is not
traffic, as RocketMQ's counters start with its broker; a queue that appears later counts
from its first message.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from shmq.ipc import queue_table as qt
from shmq.store.reader import StoreReader

# RocketMQ 5's rocketmq_message_size buckets (bytes); the last bucket is +Inf
SIZE_BUCKETS = (1024, 4096, 512 * 1024, 1 << 20, 2 << 20, 4 << 20)


@dataclass
class TopicCounts:
    """One topic's messages, bytes and size histogram (non-cumulative bucket counts, the
    last one past every bound)."""

    messages: int = 0
    bytes: int = 0
    buckets: np.ndarray = field(default_factory=lambda: np.zeros(len(SIZE_BUCKETS) + 1, np.int64))


class TopicTraffic:
    """Tails every queue of the queue table through ``reader``; ``update`` before a read
    of ``topics`` (one thread at a time)."""

    def __init__(self, reader: StoreReader, queue_buf: np.ndarray, queue_words: np.ndarray) -> None:
        self.reader = reader
        self.directory = qt.QueueDirectory(queue_buf, queue_words)
        self.maxima = qt.max_offsets(queue_buf)
        self.topics: dict[str, TopicCounts] = {}
        self._read: dict[int, int] = {}  # queue-table slot -> the offset counted up to
        self._started = False

    def update(self) -> None:
        self.directory.refresh()
        for (topic, queue_id), slot in self.directory.slots.items():
            end = int(self.maxima[slot])
            start = self._read.get(slot)
            if start is None:
                start = 0 if self._started else end
            self._read[slot] = end
            if end > start:
                self._fold(topic.decode(), queue_id, start, end)
        self._started = True

    def _fold(self, topic: str, queue_id: int, start: int, end: int) -> None:
        counts = self.topics.get(topic)
        if counts is None:
            counts = self.topics[topic] = TopicCounts()
        counts.messages += end - start
        while start < end:  # a file at a time; a file cleaned away meanwhile counts no bytes
            units, _ = self.reader.units(topic, queue_id, start, end)
            if not units.size:
                break
            sizes = units["size"].astype(np.int64)
            counts.bytes += int(sizes.sum())
            where = np.searchsorted(SIZE_BUCKETS, sizes, side="left")
            counts.buckets += np.bincount(where, minlength=len(SIZE_BUCKETS) + 1)
            start += units.size
