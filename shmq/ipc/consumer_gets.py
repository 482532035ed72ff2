"""Descriptor of the consumer gets segment: how many messages each local consumer read.

Consumers on the broker's host read the store's files without a request per read, so the
broker cannot count their gets as it counts a TCP pull's (RocketMQ's ``GROUP_GET_NUMS``).
Each one counts them here instead, per queue it read, and the supervisor folds what grew
into the group's counts (``broker.get_counts``)::

    line 0      supervisor: CONSUMERS  QUEUES (the queue table's capacity)
    row i       the client holding consumer slot i (``registry``), two parts of QUEUES
                int64 words, each starting on a line: GOT_MESSAGES, the messages it read
                from each queue-table slot, then GOT_BYTES, the bytes of their records
                (RocketMQ's ``rocketmq_throughput_out``)

A client adds a read's messages before its bytes, and the supervisor reads the bytes
before the messages, so bytes it sees always come with their messages seen.

A row is never reset: nobody writes it between two holders of the slot, and the supervisor
counts from what the last holder left. Every client maps the whole segment writable, so the
supervisor trusts no row: what it counts is clamped (``broker.get_counts``).
"""

from __future__ import annotations

import numpy as np

from shmq.ipc.segment import CACHE_LINE

CONSUMERS, QUEUES = 0, 1
HEADER = CACHE_LINE
GOT_MESSAGES, GOT_BYTES = 0, 1  # the parts of a row


def part_words(queues: int) -> int:
    """The int64 words of a row's part: one per queue-table slot, padded to whole lines."""
    return -(-queues * 8 // CACHE_LINE) * CACHE_LINE // 8


def row_words(queues: int) -> int:
    return 2 * part_words(queues)


def segment_size(consumers: int, queues: int) -> int:
    return HEADER + consumers * row_words(queues) * 8


def init(words: np.ndarray, consumers: int, queues: int) -> None:
    """Supervisor: the header of a new segment (its rows are zero already; writing them
    would make the system back every page of a segment that mostly stays untouched)."""
    words[CONSUMERS] = consumers
    words[QUEUES] = queues


def row(words: np.ndarray, consumer: int, queues: int) -> np.ndarray:
    """Consumer slot ``consumer``'s row: a (2, ``queues``) view, its parts indexed by
    queue-table slot. The supervisor passes its configured counts, never the header's:
    every client can write the segment."""
    part = part_words(queues)
    start = HEADER // 8 + consumer * 2 * part
    return words[start : start + 2 * part].reshape(2, part)[:, :queues]


def client_row(words: np.ndarray, consumer: int) -> np.ndarray:
    """A consumer's own row, sized by the header (the client knows no broker config)."""
    return row(words, consumer, int(words[QUEUES]))
