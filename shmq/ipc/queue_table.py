"""Descriptor of the queue table: one slot per (topic, queue id) and its max offset.

The writer owns the directory on a master (it meets every new queue first, when it assigns
queue offsets); on a slave, whose writer takes no puts, reput adds the queues the master's
CommitLog brings. Reput owns the max offsets (the next queue offset a consumer can read,
published after the consume-queue units are written). The supervisor fills both with the
recovered queues before any agent starts. So each part has one writer at any time;
consumers and the status command read both::

    line 0                  COUNT (directory slots in use; writer)  CAPACITY
    directory slot i (192 B, writer): QUEUE_ID  NAME_LEN, the topic name from byte 16
    max offsets (reput): CAPACITY int64 words, after the directory

A slot is published by storing COUNT after its fields are written.
"""

from __future__ import annotations

import numpy as np

from shmq.errors import ShmqError
from shmq.ipc.segment import CACHE_LINE

COUNT, CAPACITY = 0, 1
HEADER = CACHE_LINE
SLOT = 192
QUEUE_ID, NAME_LEN = 0, 1
NAME_AT = 16
NAME_MAX = 127

assert NAME_AT + NAME_MAX < SLOT


def segment_size(capacity: int) -> int:
    return HEADER + capacity * SLOT + capacity * 8


def init(words: np.ndarray, capacity: int) -> None:
    words[: segment_size(capacity) // 8] = 0
    words[CAPACITY] = capacity


def max_offsets(buf: np.ndarray) -> np.ndarray:
    """The reput-owned int64 array of max offsets, indexed by slot."""
    capacity = int(buf[8:16].view(np.int64)[0])
    start = HEADER + capacity * SLOT
    return buf[start : start + capacity * 8].view(np.int64)


def add_queue(buf: np.ndarray, words: np.ndarray, topic: bytes, queue_id: int) -> int:
    """The directory's owner (see the module docstring): a new slot; returns its index."""
    n, capacity = int(words[COUNT]), int(words[CAPACITY])
    if n >= capacity:
        raise ShmqError(f"queue table full: {capacity} queues (maxQueueSlots)")
    base = HEADER + n * SLOT
    words[base // 8 + QUEUE_ID] = queue_id
    words[base // 8 + NAME_LEN] = len(topic)
    buf[base + NAME_AT : base + NAME_AT + len(topic)] = np.frombuffer(topic, np.uint8)
    words[COUNT] = n + 1
    return n


def read_directory(
    buf: np.ndarray, words: np.ndarray, start: int = 0
) -> list[tuple[int, bytes, int]]:
    """``[(slot, topic, queue_id)]`` for published slots from ``start``."""
    out = []
    for i in range(start, int(words[COUNT])):
        base = HEADER + i * SLOT
        n = min(int(words[base // 8 + NAME_LEN]), NAME_MAX)
        topic = buf[base + NAME_AT : base + NAME_AT + n].tobytes()
        out.append((i, topic, int(words[base // 8 + QUEUE_ID])))
    return out


class QueueDirectory:
    """A reader's cached view of the directory: ``slot(topic, qid)`` → index or -1."""

    def __init__(self, buf: np.ndarray, words: np.ndarray) -> None:
        self.buf, self.words = buf, words
        self.slots: dict[tuple[bytes, int], int] = {}
        self._seen = 0

    def refresh(self) -> None:
        for i, topic, qid in read_directory(self.buf, self.words, self._seen):
            self.slots[(topic, qid)] = i
            self._seen = i + 1

    def slot(self, topic: bytes, queue_id: int) -> int:
        found = self.slots.get((topic, queue_id))
        if found is None:
            if int(self.words[COUNT]) == self._seen:
                return -1  # nothing published since the last look
            self.refresh()
            found = self.slots.get((topic, queue_id), -1)
        return found

    def topic_totals(self, maxima: np.ndarray) -> dict[bytes, int]:
        """Per topic, the sum of its queues' max offsets in ``maxima`` (``max_offsets``)."""
        self.refresh()
        totals: dict[bytes, int] = {}
        for (topic, _), slot in self.slots.items():
            totals[topic] = totals.get(topic, 0) + int(maxima[slot])
        return totals

    def queues_of(self, topic: bytes) -> dict[int, int]:
        """``{queue id: slot}`` of one topic."""
        self.refresh()
        return {q: s for (t, q), s in self.slots.items() if t == topic}
