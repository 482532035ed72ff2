"""Descriptor of the consumer gets segment: how many messages each local consumer read.

Consumers on the broker's host read the store's files without a request per read, so the
broker cannot count their gets as it counts a TCP pull's (RocketMQ's ``GROUP_GET_NUMS``).
Each one counts them here instead, per queue it read, and the supervisor folds what grew
into the group's counts (``broker.get_counts``)::

    line 0      supervisor: CONSUMERS  QUEUES (the queue table's capacity)
    row i       the client holding consumer slot i (``registry``): QUEUES int64 words, the
                messages it read from each queue-table slot; a row starts on a line

A row is never reset: nobody writes it between two holders of the slot, and the supervisor
counts from what the last holder left. Every client maps the whole segment writable, so the
supervisor trusts no row: what it counts is clamped (``broker.get_counts``).
"""

from __future__ import annotations

import numpy as np

from shmq.ipc.segment import CACHE_LINE

CONSUMERS, QUEUES = 0, 1
HEADER = CACHE_LINE


def row_words(queues: int) -> int:
    """The int64 words of a row: one per queue-table slot, padded to whole lines."""
    return -(-queues * 8 // CACHE_LINE) * CACHE_LINE // 8


def segment_size(consumers: int, queues: int) -> int:
    return HEADER + consumers * row_words(queues) * 8


def init(words: np.ndarray, consumers: int, queues: int) -> None:
    """Supervisor: the header of a new segment (its rows are zero already; writing them
    would make the system back every page of a segment that mostly stays untouched)."""
    words[CONSUMERS] = consumers
    words[QUEUES] = queues


def row(words: np.ndarray, consumer: int, queues: int) -> np.ndarray:
    """Consumer slot ``consumer``'s row, indexed by queue-table slot. The supervisor passes
    its configured counts, never the header's: every client can write the segment."""
    start = HEADER // 8 + consumer * row_words(queues)
    return words[start : start + queues]


def client_row(words: np.ndarray, consumer: int) -> np.ndarray:
    """A consumer's own row, sized by the header (the client knows no broker config)."""
    return row(words, consumer, int(words[QUEUES]))
