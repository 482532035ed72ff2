"""Reput's plan for a scan batch, in one kernel call: which records enter consume queues,
grouped by (topic, queue id) in log order, and which of them have keys to index.

A pass of one or a few records is the common case at low rates, and a dozen numpy calls on
arrays that small cost more than the work; this replaces them."""

from __future__ import annotations

import numpy as np
from numba import njit

from shmq.codec import record as rec

# Transaction types that enter consume queues and the index (NOT and COMMIT).
_TX_MASK = rec.SYSFLAG_TRANSACTION_MASK
_TX_COMMIT = rec.SYSFLAG_TRANSACTION_COMMIT


@njit(cache=True, nogil=True)
def plan_dispatch(buf, rows, max_queue_id, ids, first, picks, starts, keys, indexed):
    """Plan the dispatch of the parsed ``rows`` (records in ``buf``).

    Fills ``ids``/``first`` as ``record.topic_ids`` does; for each group ``g`` of records
    with one (topic, queue id), ``keys[g] = topic id * (max_queue_id + 1) + queue id`` and
    its records are ``picks[starts[g]:starts[g + 1]]`` in log order; ``indexed`` gets the
    grouped records that carry keys or a unique key. Records of prepared or rolled-back
    transactions enter no queue; a queue id outside ``0..max_queue_id`` is counted as bad.
    Returns ``(groups, topics, indexed count, bad count)``."""
    n = rows.shape[0]
    topics = rec.topic_ids(buf, rows, ids, first)
    group = np.empty(n, dtype=np.int64)
    counts = np.zeros(n + 1, dtype=np.int64)
    groups = 0
    bad = 0
    last_key = -1
    last_group = -1
    span = max_queue_id + 1
    for i in range(n):
        tx = rows[i].sysflag & _TX_MASK
        if tx != 0 and tx != _TX_COMMIT:
            group[i] = -1
            continue
        q = rows[i].queue_id
        if q < 0 or q > max_queue_id:
            group[i] = -1
            bad += 1
            continue
        key = ids[i] * span + q
        if key == last_key:
            g = last_group
        else:
            g = -1
            for j in range(groups):
                if keys[j] == key:
                    g = j
                    break
            if g < 0:
                g = groups
                keys[g] = key
                groups += 1
            last_key = key
            last_group = g
        group[i] = g
        counts[g + 1] += 1
    starts[0] = 0
    for g in range(groups):
        starts[g + 1] = starts[g] + counts[g + 1]
        counts[g + 1] = starts[g]  # the next free place of group g
    n_indexed = 0
    for i in range(n):
        g = group[i]
        if g < 0:
            continue
        picks[counts[g + 1]] = i
        counts[g + 1] += 1
        if rows[i].index_flags != 0:
            indexed[n_indexed] = i
            n_indexed += 1
    return groups, topics, n_indexed, bad
