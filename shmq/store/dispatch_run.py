"""Reput's fast path: a pass whose records all continue one consume queue, dispatched by
one kernel call.

At low and moderate rates a reput pass holds one or a few records, nearly always of the
queue the pass before wrote. The general dispatch (a scan, the plan, a call per queue and
one for the index, each with its Python around it) then costs ~13 µs per pass, more than
the records, and it lies on every pushed message's way to its consumer. ``dispatch_run``
parses the pass, checks that every record continues that queue, and writes their
consume-queue units and index keys in the same call (~5.5 µs for a pass of one). Anything
else (another queue, a prepared or rolled-back transaction's record, a re-dispatched one)
writes nothing here and takes the general path.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from shmq.codec import record as rec
from shmq.codec.consume_queue import put_unit_rows
from shmq.store.index.file import KEYS_DONE, put_record_keys

NOT_A_RUN = -1

_TX_MASK = rec.SYSFLAG_TRANSACTION_MASK
_TX_COMMIT = rec.SYSFLAG_TRANSACTION_COMMIT


@njit(cache=True, nogil=True)
def dispatch_run(
    src, start, limit, base, rows, cap, topic, queue_id, units, unit_at, next_unit,
    max_physic, index, slot_num, index_num, entry_limit, picks,
):  # fmt: skip
    """Dispatch the records of ``src`` (a CommitLog file whose byte 0 is physical offset
    ``base``) from ``start`` to ``limit`` if each continues queue ``queue_id`` of ``topic``
    (a uint8 array): its queue offset is the next one (``next_unit`` on), it ends past
    ``max_physic`` and it is not a prepared or rolled-back transaction's.

    At most ``cap`` records are parsed into ``rows`` (the room left in the consume-queue
    file ``units``, whose next unit is at index ``unit_at``). Their units are written, then
    their keys go into ``index`` (an empty array: no index) as ``put_record_keys`` puts them.
    ``picks`` (int64, ``cap`` long) is scratch; on return its first ``indexed`` entries are
    the rows with keys.

    Returns ``(records, position, parse code, indexed, keys next, keys skip, keys code)``:
    ``records`` is ``NOT_A_RUN`` when a record does not continue the queue (nothing was
    written); ``position`` and the parse code are ``parse_records``'; the keys fields are
    ``put_record_keys``' outcome, whose caller finishes what it left (a full or unreserved
    index file)."""
    n, pos, code = rec.parse_records(src, start, limit, base, np.bool_(False), rows[:cap])
    if n == 0:
        return 0, pos, code, 0, 0, 0, KEYS_DONE
    if base + rows[0, rec.R_POS] + rows[0, rec.R_SIZE] <= max_physic:
        return NOT_A_RUN, pos, code, 0, 0, 0, KEYS_DONE
    for i in range(n):
        tx = rows[i, rec.R_SYSFLAG] & _TX_MASK
        t = rows[i, rec.R_TOPIC_START]
        if (
            (tx != 0 and tx != _TX_COMMIT)
            or rows[i, rec.R_QUEUE_ID] != queue_id
            or rows[i, rec.R_QUEUE_OFFSET] != next_unit + i
            or not rec.bytes_equal(src, t, t + rows[i, rec.R_TOPIC_LEN], topic)
        ):
            return NOT_A_RUN, pos, code, 0, 0, 0, KEYS_DONE
        picks[i] = i
    put_unit_rows(units, unit_at, rows, picks, np.int64(0), n, base, next_unit, max_physic)
    indexed = 0
    for i in range(n):
        if rows[i, rec.R_INDEX_FLAGS] != 0:
            picks[indexed] = i
            indexed += 1
    if indexed == 0 or index.shape[0] == 0:
        return n, pos, code, 0, 0, 0, KEYS_DONE
    k, skip, keys_code = put_record_keys(
        index,
        slot_num,
        index_num,
        entry_limit,
        src,
        rows,
        picks[:indexed],
        np.int64(0),
        np.int64(0),
        base,
    )
    return n, pos, code, indexed, k, skip, keys_code
