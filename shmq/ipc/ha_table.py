"""Descriptor of the HA table: the master's slave connections, as the HA agent sees them, and
the sync state set, the connections whose acks a SYNC_MASTER in controller mode waits for.

The HA agent writes lines 0 to ``MAX_SLAVES``; the supervisor writes the set (the last two
lines); the control server reads both for ``ha-status``. The supervisor also empties the
rows once after an HA agent died, before it starts the next (its slave connections died
with it: ``ha-status`` must not list them, a SYNC_MASTER must not wait on them); never
while an HA agent runs, so the rows still have one writer at a time. One cache line per
row::

    line 0       (HA agent) ROWS (rows in use, a prefix of the table)
                 SET_APPLIED (the set version the agent computes CONFIRMED_OFFSET with)
    line 1 + i   (HA agent) ADDR (the slave's ip << 16 | port, ``counters.pack_address``)
                 ACK_OFFSET (its last report)  CAUGHT_UP_MS (when its ack last reached the
                 master's write offset)  CONNECTED_MS  CONN_ID (the connection's id: a
                 reconnection from the same address is another connection)
    line 17      (supervisor) SET_MODE (``ANY_SLAVE``: the largest ack counts, RocketMQ 4.9;
                 ``ALL_MEMBERS``: the smallest ack of the members counts, none while a member
                 is not connected)  SET_VERSION  SET_SIZE
    line 18-19   (supervisor) SET_MEMBERS: ``SET_SIZE`` connection ids

Rows are rewritten whole on every change; a reader may see a row mid-update, which only
matters for a status display. The set is published members first, then its size, then its
version; a reader takes it again when the version moved while it read.
"""

from __future__ import annotations

import numpy as np

from shmq.ipc.segment import CACHE_LINE

W = CACHE_LINE // 8
MAX_SLAVES = 16
ROWS, SET_APPLIED = 0, 1
ADDR, ACK_OFFSET, CAUGHT_UP_MS, CONNECTED_MS, CONN_ID = range(5)
ROW_WORDS = 5
SET_LINE = 1 + MAX_SLAVES
SET_MODE, SET_VERSION, SET_SIZE = SET_LINE * W, SET_LINE * W + 1, SET_LINE * W + 2
SET_MEMBERS = (SET_LINE + 1) * W
ANY_SLAVE, ALL_MEMBERS = 0, 1
SIZE = (SET_LINE + 3) * CACHE_LINE

assert SET_MEMBERS + MAX_SLAVES <= SIZE // 8


def publish_rows(words: np.ndarray, rows: list[tuple[int, ...]]) -> None:
    """Rewrite the table with ``rows`` of ``ROW_WORDS`` (at most ``MAX_SLAVES``; more are not
    shown)."""
    rows = rows[:MAX_SLAVES]
    for i, row in enumerate(rows):
        base = (1 + i) * W
        words[base : base + ROW_WORDS] = row
    words[ROWS] = len(rows)


def read_rows(words: np.ndarray) -> list[tuple[int, ...]]:
    n = min(int(words[ROWS]), MAX_SLAVES)
    return [tuple(int(v) for v in words[(1 + i) * W : (1 + i) * W + ROW_WORDS]) for i in range(n)]


def publish_set(words: np.ndarray, mode: int, members: tuple[int, ...]) -> int:
    """Supervisor: the sync state set (at most ``MAX_SLAVES`` connection ids) and how acks
    count; returns the new version."""
    if len(members) > MAX_SLAVES:
        raise ValueError(f"a sync state set of {len(members)} > {MAX_SLAVES} connections")
    words[SET_MEMBERS : SET_MEMBERS + len(members)] = members
    words[SET_SIZE] = len(members)
    words[SET_MODE] = mode
    version = int(words[SET_VERSION]) + 1
    words[SET_VERSION] = version
    return version


def read_set(words: np.ndarray) -> tuple[int, int, frozenset[int]]:
    """``(version, mode, members)`` as published, read again when the version moved
    meanwhile (a set published while it was read); a size beyond ``MAX_SLAVES`` reads as an
    empty set."""
    while True:
        version = int(words[SET_VERSION])
        mode, size = int(words[SET_MODE]), int(words[SET_SIZE])
        size = size if 0 <= size <= MAX_SLAVES else 0
        members = frozenset(int(v) for v in words[SET_MEMBERS : SET_MEMBERS + size])
        if int(words[SET_VERSION]) == version:
            return version, mode, members
