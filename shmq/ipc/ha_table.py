"""Descriptor of the HA table: the master's slave connections, as the HA agent sees them.

The HA agent is its only writer; the control server reads it for ``ha-status``. One cache
line per row::

    line 0       ROWS (rows in use, a prefix of the table)
    line 1 + i   ADDR (the slave's ip << 16 | port, see ``counters.pack_address``)
                 ACK_OFFSET (its last report)  CAUGHT_UP_MS (when its ack last reached the
                 master's write offset)  CONNECTED_MS

Rows are rewritten whole on every change; a reader may see a row mid-update, which only
matters for a status display.
"""

from __future__ import annotations

import numpy as np

from shmq.ipc.segment import CACHE_LINE

W = CACHE_LINE // 8
MAX_SLAVES = 16
ROWS = 0
ADDR, ACK_OFFSET, CAUGHT_UP_MS, CONNECTED_MS = range(4)
SIZE = (1 + MAX_SLAVES) * CACHE_LINE


def publish_rows(words: np.ndarray, rows: list[tuple[int, int, int, int]]) -> None:
    """Rewrite the table with ``rows`` (at most ``MAX_SLAVES``; more are not shown)."""
    rows = rows[:MAX_SLAVES]
    for i, row in enumerate(rows):
        base = (1 + i) * W
        words[base : base + 4] = row
    words[ROWS] = len(rows)


def read_rows(words: np.ndarray) -> list[tuple[int, int, int, int]]:
    n = min(int(words[ROWS]), MAX_SLAVES)
    return [tuple(int(v) for v in words[(1 + i) * W : (1 + i) * W + 4]) for i in range(n)]
