"""Descriptor of the client registry: producer and consumer slots, and who is parked.

The supervisor allocates slots when a client registers over the control plane (and frees
them when it unregisters or its process dies); each client writes only its own line, which
says how many of its threads are parked and on what (``shmq.ipc.parking``), so agents post
its semaphore only when needed, once per parked thread::

    line 0                      VERSION (bumped after any slot change)  PRODUCERS  CONSUMERS
    producer slot i (128 B)     line A, supervisor: STATE  PID  GEN  ACCOUNT (with ACL on:
                                                    the account's key, hashed; 0: any topic)
                                line B, producer:   PARKED  WAIT_FLUSH_OFFSET (the least
                                                    one a parked thread waits for)
                                                    DEFAULT_QUEUE_NUMS (its
                                                    defaultTopicQueueNums, for auto-create)
                                                    ANSWER_WAITERS (its sync sends waiting
                                                    for their answers: the writer lingers)
    consumer slot i (192 B)     line A, supervisor: STATE  PID  GEN
                                lines B-C, consumer: PARKED  N_WATCH (-1: any queue)
                                                     WATCH_SEQ (odd while the list
                                                     below is rewritten)
                                                     WATCH[0..12] (queue-table slots)

Semaphores are named ``{prefix}.p{i}.{gen}`` and ``{prefix}.c{i}.{gen}``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Container

import numpy as np

from shmq.ipc.segment import CACHE_LINE

W = CACHE_LINE // 8
VERSION, PRODUCERS, CONSUMERS = 0, 1, 2
HEADER = CACHE_LINE
PRODUCER_SLOT = 2 * CACHE_LINE
CONSUMER_SLOT = 3 * CACHE_LINE
STATE, PID, GEN, ACCOUNT = 0, 1, 2, 3  # line A
PARKED, WAIT_FLUSH_OFFSET, DEFAULT_QUEUE_NUMS, ANSWER_WAITERS = W, W + 1, W + 2, W + 3  # line B
N_WATCH = W + 1  # consumer line B
WATCH_SEQ = W + 2
WATCH = W + 3
MAX_WATCH = 2 * W - 3
_SEQ_MASK = (1 << 62) - 1
FREE, ACTIVE, CLOSING, FENCED = 0, 1, 2, 3  # FENCED: the writer no longer reads the ring

assert WATCH + MAX_WATCH == CONSUMER_SLOT // 8


def segment_size(producers: int, consumers: int) -> int:
    return HEADER + producers * PRODUCER_SLOT + consumers * CONSUMER_SLOT


def init(words: np.ndarray, producers: int, consumers: int) -> None:
    words[: segment_size(producers, consumers) // 8] = 0
    words[PRODUCERS] = producers
    words[CONSUMERS] = consumers


def producer_base(i: int) -> int:
    """Word index of producer slot ``i``."""
    return (HEADER + i * PRODUCER_SLOT) // 8


def consumer_base(producers: int, i: int) -> int:
    """Word index of consumer slot ``i`` after ``producers`` producer slots. Agents pass
    their configured count, never the PRODUCERS word: every client can write this segment."""
    return (HEADER + producers * PRODUCER_SLOT + i * CONSUMER_SLOT) // 8


def producer_sem_name(prefix: str, i: int, gen: int) -> str:
    return f"{prefix}.p{i}.{gen}"


def consumer_sem_name(prefix: str, i: int, gen: int) -> str:
    return f"{prefix}.c{i}.{gen}"


def ring_name(prefix: str, i: int, gen: int) -> str:
    return f"{prefix}.ring{i}.{gen}"


def set_slot(
    words: np.ndarray, base: int, state: int, pid: int, gen: int, account: int = 0
) -> None:
    """Supervisor: (re)define a slot, clearing the client's line, then bump VERSION."""
    words[base + W : base + 2 * W] = 0
    words[base + PID] = pid
    words[base + GEN] = gen
    words[base + ACCOUNT] = account
    words[base + STATE] = state
    words[VERSION] += 1


def active_producers(words: np.ndarray, producers: int) -> list[tuple[int, int, int]]:
    """``[(slot, gen, state)]`` of the first ``producers`` slots that are in use."""
    out = []
    for i in range(producers):
        base = producer_base(i)
        state = int(words[base + STATE])
        if state != FREE:
            out.append((i, int(words[base + GEN]), state))
    return out


def account_id(access_key: str) -> int:
    """The ACCOUNT word of a ring registered with ``access_key``: 63 bits of its BLAKE2b
    hash, never 0 (0 is a ring that may write any topic)."""
    digest = hashlib.blake2b(access_key.encode("utf-8"), digest_size=8).digest()
    return (int.from_bytes(digest, "big") >> 1) or 1


def set_watch(words: np.ndarray, base: int, slots: list[int] | None) -> None:
    """Consumer: which queue-table slots should wake it (None: any queue).

    The list is rewritten between two bumps of ``WATCH_SEQ`` (a seqlock; stores become
    visible in program order on x86): one thread's park rewrites it while others of the
    process stay parked on queues in both the old and the new list, and reput must not
    read a mix of the two that holds neither's slot for them."""
    seq = (int(words[base + WATCH_SEQ]) | 1) & _SEQ_MASK  # odd, and never overflows
    words[base + WATCH_SEQ] = seq
    if slots is None or len(slots) > MAX_WATCH:
        words[base + N_WATCH] = -1
    else:
        words[base + WATCH : base + WATCH + len(slots)] = slots
        words[base + N_WATCH] = len(slots)
    words[base + WATCH_SEQ] = seq + 1


def wants_wake(words: np.ndarray | memoryview, base: int, changed: Container[int]) -> int:
    """Reput: how many threads of a consumer to wake (its parked count when it watches any
    of the ``changed`` queue-table slots; else 0). The consumer writes these words: a count
    is never read beyond its line, a slot number is only looked up, and a list read while
    it was being rewritten (``WATCH_SEQ`` odd, or moved while read) wakes them all: a
    spurious wake-up costs a parked thread one look, a missed one its whole park timeout."""
    parked = int(words[base + PARKED])
    if parked <= 0:
        return 0
    seq = int(words[base + WATCH_SEQ])
    n = int(words[base + N_WATCH])
    if n < 0 or seq & 1:
        return parked
    watched = [int(slot) for slot in words[base + WATCH : base + WATCH + min(n, MAX_WATCH)]]
    if int(words[base + WATCH_SEQ]) != seq:
        return parked
    return parked if any(slot in changed for slot in watched) else 0
