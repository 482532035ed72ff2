"""Descriptor of the topic table: which topics exist, their queue counts and permissions.

Written only by the supervisor (its control server owns topic config); read by the writer to
validate records and by clients. A seqlock guards readers: VERSION is odd while the
supervisor changes the table, and a reader retries when it saw an odd or changed version::

    line 0          VERSION  COUNT (slots ever used)  CAPACITY
    slot i (256 B)  STATE  READ_QUEUE_NUMS  WRITE_QUEUE_NUMS  PERM  NAME_LEN, then the name at
                    byte 64 of the slot (at most 127 bytes)
"""

from __future__ import annotations

import time

import numpy as np

from shmq.errors import ShmqError
from shmq.ipc.segment import CACHE_LINE

VERSION, COUNT, CAPACITY = 0, 1, 2
HEADER = CACHE_LINE
SLOT = 256
STATE, READ_Q, WRITE_Q, PERM, NAME_LEN = range(5)
NAME_AT = 64
NAME_MAX = 127
LIVE = 1

assert NAME_AT + NAME_MAX < SLOT


READ_TIMEOUT_S = 1.0


def segment_size(capacity: int) -> int:
    return HEADER + capacity * SLOT


def init(words: np.ndarray, capacity: int) -> None:
    words[: segment_size(capacity) // 8] = 0
    words[CAPACITY] = capacity


def _slot_word(i: int, field: int) -> int:
    return (HEADER + i * SLOT) // 8 + field


def publish_topics(
    buf: np.ndarray, words: np.ndarray, topics: dict[str, tuple[int, int, int]]
) -> None:
    """Supervisor: make the table hold exactly ``topics`` (name → (read, write, perm))."""
    capacity = int(words[CAPACITY])
    if len(topics) > capacity:
        raise ShmqError(f"{len(topics)} topics exceed the topic table's {capacity} slots")
    words[VERSION] += 1  # odd: changing
    for i, (name, (read_q, write_q, perm)) in enumerate(sorted(topics.items())):
        raw = name.encode()
        base = _slot_word(i, 0)
        words[base + READ_Q] = read_q
        words[base + WRITE_Q] = write_q
        words[base + PERM] = perm
        words[base + NAME_LEN] = len(raw)
        at = HEADER + i * SLOT + NAME_AT
        buf[at : at + len(raw)] = np.frombuffer(raw, np.uint8)
        words[base + STATE] = LIVE
    for i in range(len(topics), int(words[COUNT])):
        words[_slot_word(i, STATE)] = 0
    words[COUNT] = len(topics)
    words[VERSION] += 1  # even: stable


def load_version(words: np.ndarray) -> int:
    return int(words[VERSION])


def read_topics(
    buf: np.ndarray, words: np.ndarray, timeout: float = READ_TIMEOUT_S
) -> tuple[int, dict[bytes, tuple[int, int, int]]]:
    """Reader: ``(version, {name bytes: (read, write, perm)})``, a consistent snapshot.
    A publish takes microseconds; a table still changing after ``timeout`` seconds means
    its writer died mid-publish: ``ShmqError`` rather than spinning forever."""
    deadline = time.monotonic() + timeout
    while True:
        if time.monotonic() > deadline:
            raise ShmqError(
                f"the topic table stayed mid-update for {timeout:g} s (version "
                f"{int(words[VERSION])}): did the broker's supervisor die while publishing?"
            )
        before = int(words[VERSION])
        if before & 1:
            continue
        out = {}
        for i in range(min(int(words[COUNT]), int(words[CAPACITY]))):
            base = _slot_word(i, 0)
            if int(words[base + STATE]) != LIVE:
                continue
            n = min(int(words[base + NAME_LEN]), NAME_MAX)
            at = HEADER + i * SLOT + NAME_AT
            out[buf[at : at + n].tobytes()] = (
                int(words[base + READ_Q]),
                int(words[base + WRITE_Q]),
                int(words[base + PERM]),
            )
        if int(words[VERSION]) == before:
            return before, out
