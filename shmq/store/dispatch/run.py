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
from shmq.store.index.file import KEYS_DONE, KEYS_FILE_FULL, put_record_keys

NOT_A_RUN = -1

_TX_MASK = rec.SYSFLAG_TRANSACTION_MASK
_TX_COMMIT = rec.SYSFLAG_TRANSACTION_COMMIT


# ``dispatch_run``'s scalar inputs: one record, a 1-element array its caller keeps
RUN_PARAMS = np.dtype(
    [
        ("start", np.int64),  # index in ``src`` of the first record
        ("limit", np.int64),  # end of the bytes to dispatch in ``src``
        ("base", np.int64),  # physical offset of ``src[0]`` (the CommitLog file's)
        ("cap", np.int64),  # most records to take: the units left in the consume-queue file
        ("queue_id", np.int64),  # the queue every record must continue
        ("unit_at", np.int64),  # index in ``units`` of the queue's next unit
        ("next_unit", np.int64),  # the queue offset the first record must have
        ("max_physic", np.int64),  # the queue's max physical offset: records end past it
        ("slot_num", np.int64),  # the index file's hash slots (``maxHashSlotNum``)
        ("index_num", np.int64),  # its entries (``maxIndexNum``)
        ("entry_limit", np.int64),  # the entries it may fill (reserved so far)
    ],
    align=True,
)

# ``dispatch_run``'s outcome, filled by the kernel: a 1-element array its caller keeps
RUN_RESULT = np.dtype(
    [
        ("records", np.int64),  # records dispatched, or ``NOT_A_RUN`` (nothing written)
        ("position", np.int64),  # index in ``src`` where parsing stopped
        ("parse_code", np.int64),  # why it stopped there (``PARSE_*``)
        ("indexed", np.int64),  # records with keys: the first ``indexed`` entries of picks
        ("keys_next", np.int64),  # ``put_record_keys``' outcome: the pick it stopped at,
        ("keys_skip", np.int64),  # the keys of that record already put,
        ("keys_code", np.int64),  # and why it stopped (``KEYS_*``)
    ],
    align=True,
)

# Python's named views of the same bytes (``RunParams.from_buffer(params)``): a field
# costs ~40 ns there, ~170 ns through numpy's field indexing, and reput sets eleven of them
# per pass
RunParams = np.ctypeslib.as_ctypes_type(RUN_PARAMS)
RunResult = np.ctypeslib.as_ctypes_type(RUN_RESULT)


@njit(cache=True, nogil=True, inline="always")
def _outcome(result, records, position, parse_code, indexed, keys_next, keys_skip, keys_code):
    out = result[0]
    out.records = records
    out.position = position
    out.parse_code = parse_code
    out.indexed = indexed
    out.keys_next = keys_next
    out.keys_skip = keys_skip
    out.keys_code = keys_code


@njit(cache=True, nogil=True)
def dispatch_run(src, rows, topic, units, index, picks, params, result):
    """Dispatch the records of ``src`` (a CommitLog file) from ``start`` to ``limit`` if
    each continues queue ``queue_id`` of ``topic`` (a uint8 array): its queue offset is the
    next one (``next_unit`` on), it ends past ``max_physic`` and it is not a prepared or
    rolled-back transaction's. ``params`` is one ``RUN_PARAMS`` record; ``result`` (one
    ``RUN_RESULT``) gets the outcome.

    At most ``cap`` records are parsed into ``rows`` (the room left in the consume-queue
    file ``units``, whose next unit is at index ``unit_at``). Their units are written, then
    their keys go into ``index`` as ``put_record_keys`` puts them; with an empty ``index``
    (no index file yet, or none at all) the rows with keys are left to the caller as if the
    file were full (``KEYS_FILE_FULL``, none of their keys put).
    ``picks`` (int64, ``cap`` long) is scratch; on return its first ``indexed`` entries are
    the rows with keys.

    ``records`` is ``NOT_A_RUN`` when a record does not continue the queue (nothing was
    written); ``position`` and ``parse_code`` are ``parse_records``'; the keys fields are
    ``put_record_keys``' outcome, whose caller finishes what it left (a full or unreserved
    index file)."""
    prm = params[0]
    base = prm.base
    queue_id = prm.queue_id
    next_unit = prm.next_unit
    max_physic = prm.max_physic
    n, pos, code = rec.parse_records(
        src, prm.start, prm.limit, base, np.bool_(False), rows[: prm.cap]
    )
    if n == 0:
        _outcome(result, 0, pos, code, 0, 0, 0, KEYS_DONE)
        return
    if base + rows[0].pos + rows[0].size <= max_physic:
        _outcome(result, NOT_A_RUN, pos, code, 0, 0, 0, KEYS_DONE)
        return
    for i in range(n):
        tx = rows[i].sysflag & _TX_MASK
        t = rows[i].topic_start
        if (
            (tx != 0 and tx != _TX_COMMIT)
            or rows[i].queue_id != queue_id
            or rows[i].queue_offset != next_unit + i
            or not rec.bytes_equal(src, t, t + rows[i].topic_len, topic)
        ):
            _outcome(result, NOT_A_RUN, pos, code, 0, 0, 0, KEYS_DONE)
            return
        picks[i] = i
    put_unit_rows(units, prm.unit_at, rows, picks, np.int64(0), n, base, next_unit, max_physic)
    indexed = 0
    for i in range(n):
        if rows[i].index_flags != 0:
            picks[indexed] = i
            indexed += 1
    if indexed == 0:
        _outcome(result, n, pos, code, 0, 0, 0, KEYS_DONE)
        return
    if index.shape[0] == 0:
        _outcome(result, n, pos, code, indexed, 0, 0, KEYS_FILE_FULL)
        return
    k, skip, keys_code = put_record_keys(
        index,
        prm.slot_num,
        prm.index_num,
        prm.entry_limit,
        src,
        rows,
        picks[:indexed],
        np.int64(0),
        np.int64(0),
        base,
    )
    _outcome(result, n, pos, code, indexed, k, skip, keys_code)
