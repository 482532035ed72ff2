"""Consume-queue unit kernels: 20-byte units ``(commitlog offset 8, size 4, tags code 8)``."""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from shmq.codec.record import (
    PARSE_OK,
    RECORD_ROW,
    get_i32,
    get_i64,
    parse_one,
    put_i32,
    put_i64,
    unit_owns,
)

CQ_UNIT_SIZE = 20
BLANK_UNIT_SIZE = 0x7FFFFFFF  # with offset 0: a unit that points at no record

# A numpy view of units, for vectorised reads: ``np.frombuffer(buf, dtype=CQ_UNIT_DTYPE)``.
CQ_UNIT_DTYPE = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8")])
assert CQ_UNIT_DTYPE.itemsize == CQ_UNIT_SIZE


# -- 4.9's getMessage loop over the units of one read -----------------------------------------

# What one read asks for, and what bounds it: one record, filled per read.
FETCH_DTYPE = np.dtype(
    [
        ("first_offset", "<i8"),  # the queue offset of the first unit looked at
        ("max_nums", "<i8"),  # the most messages to take (maxMsgNums)
        ("count_in_memory", "<i8"),  # maxTransferCountOnMessageInMemory
        ("bytes_in_memory", "<i8"),  # maxTransferBytesOnMessageInMemory
        ("count_in_disk", "<i8"),  # maxTransferCountOnMessageInDisk
        ("bytes_in_disk", "<i8"),  # maxTransferBytesOnMessageInDisk
        ("memory", "<i8"),  # CommitLog bytes behind its end still read from memory
        ("write_offset", "<i8"),  # the CommitLog's end (4.9's maxOffsetPy)
        ("min_phys", "<i8"),  # the CommitLog's first offset: units below point at nothing
        ("file_size", "<i8"),  # a CommitLog file's size (past a removed record: next file)
    ]
)
# 4.9 looks at 16,000 bytes of units per read, or maxMsgNums units if that is more
FILTER_SCAN_BYTES = 16_000
# GetMessageStatus values a scan of units can end with (``store.fetch`` names them)
SCAN_NO_MATCHED, SCAN_FOUND, SCAN_WAS_REMOVING = 0, 1, 2
NO_CODES = np.empty(0, dtype=np.int64)  # no tag filter

Selection = namedtuple("Selection", ["status", "scanned", "chosen", "last_phys"])
Selection.__doc__ = """What ``select_units`` chose: a ``SCAN_*`` status, how many units it
looked at (the next read begins after them), how many it took into ``picks``, and the
CommitLog offset of the last unit looked at (how far behind the CommitLog's end the read
is: 4.9's ``suggestPullingFromSlave``)."""


@njit(cache=True, nogil=True, inline="always")
def _tag_matches(tags_code, codes):
    """4.9's ``isMatchedByConsumeQueue``: ``(int) tagsCode`` in the subscription's sorted
    hash set (collisions pass; the client compares the tag strings)."""
    code = tags_code & 0xFFFFFFFF
    if code >= 0x80000000:
        code -= 0x100000000
    lo = 0
    hi = codes.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if codes[mid] < code:
            lo = mid + 1
        else:
            hi = mid
    return lo < codes.shape[0] and codes[lo] == code


@njit(cache=True, nogil=True, inline="always")
def _batch_full(size, total, taken, in_disk, r):
    """4.9's ``isTheBatchFull``: whether a unit of ``size`` bytes would overflow a read that
    holds ``taken`` messages of ``total`` bytes (the first message always goes)."""
    if total == 0 or taken == 0:
        return False
    if r["max_nums"] <= taken:
        return True
    if in_disk:
        return total + size > r["bytes_in_disk"] or taken > r["count_in_disk"] - 1
    return total + size > r["bytes_in_memory"] or taken > r["count_in_memory"] - 1


@njit(cache=True, nogil=True)
def select_units(units, start, count, codes, request, picks):
    """RocketMQ 4.9's ``getMessage`` loop: which of the ``count`` units from index ``start``
    of ``units`` (one consume-queue file) one read takes, as ``request[0]`` (``FETCH_DTYPE``)
    bounds it. It looks at most at 16,000 bytes of units (800) or ``max_nums`` units; stops
    where the next would overflow the transfer limits (the in-disk ones for a record further
    behind the CommitLog's end than ``memory``); skips units whose tags code is not in
    ``codes`` (``NO_CODES``: no filter) and blank units (the padding before a queue's first
    message); a unit below ``min_phys`` points at a removed record, and the units after it
    in the same CommitLog file are skipped too. The units taken go to ``picks`` (int64,
    rows: CommitLog offset, size, queue offset) in queue order. Returns a ``Selection``."""
    r = request[0]
    scan = min(count, max(FILTER_SCAN_BYTES // CQ_UNIT_SIZE, r["max_nums"]))
    filtering = codes.shape[0] > 0
    status = SCAN_NO_MATCHED
    total = 0
    taken = 0
    next_file = np.int64(-1)  # after a removed record: skip to this CommitLog offset
    last_phys = np.int64(0)
    i = 0
    while i < scan:
        p = (start + i) * CQ_UNIT_SIZE
        phys = get_i64(units, p)
        size = get_i32(units, p + 8)
        last_phys = phys
        if next_file >= 0 and phys < next_file:
            i += 1
            continue
        if _batch_full(size, total, taken, r["write_offset"] - phys > r["memory"], r):
            break
        if filtering and not _tag_matches(get_i64(units, p + 12), codes):
            if total == 0:
                status = SCAN_NO_MATCHED
            i += 1
            continue
        if phys == 0 and size == BLANK_UNIT_SIZE:
            i += 1
            continue
        if phys < r["min_phys"]:
            if total == 0:
                status = SCAN_WAS_REMOVING
            next_file = phys - phys % r["file_size"] + r["file_size"]
            i += 1
            continue
        picks[0, taken] = phys
        picks[1, taken] = size
        picks[2, taken] = r["first_offset"] + i
        taken += 1
        total += size
        status = SCAN_FOUND
        next_file = -1
        i += 1
    return Selection(np.int64(status), np.int64(i), np.int64(taken), last_phys)


@njit(cache=True, nogil=True)
def own_records(buf, positions, sizes, queue_offsets, topic, queue_id, base, rows, cols):
    """Parse the records at ``positions`` of ``buf`` (one CommitLog file whose first byte is
    physical offset ``base``) into ``rows`` (scratch, as ``parse_at`` fills it) and keep
    those their unit (``sizes``, ``queue_offsets``) owns (``record.unit_owns``; a record
    that does not parse owns nothing): each gets a row of ``cols``, ``MESSAGE_COLS``
    (position, queue id, queue offset, physical offset, size).

    Returns ``(records owned, span start, span end, owned bytes)``: the span is where the
    owned records lie in ``buf``. One call for what took a dozen array operations per pull
    (a consumer's read of a few messages)."""
    limit = buf.shape[0]
    k = 0
    lo = limit
    hi = 0
    total = 0
    for i in range(positions.shape[0]):
        local = positions[i]
        if parse_one(buf, local, limit, base, np.bool_(False), rows, i) == PARSE_OK and unit_owns(
            buf, rows, i, sizes[i], queue_offsets[i], topic, queue_id
        ):
            size = rows[i].size
            cols[k, 0] = local
            cols[k, 1] = queue_id
            cols[k, 2] = queue_offsets[i]
            cols[k, 3] = local + base
            cols[k, 4] = size
            lo = min(lo, local)
            hi = max(hi, local + size)
            total += size
            k += 1
    return k, lo, hi, total


UNLIMITED = 1 << 62  # a transfer limit that never binds (a read on the broker's host)


@njit(cache=True, nogil=True)
def select_own_records(units, start, count, codes, first_offset, max_nums, write_offset,
                       min_phys, file_size, picks, buf, base, topic, queue_id,
                       cols):  # fmt: skip
    """``select_units`` with no transfer limit but ``max_nums`` (a read on the broker's
    host; the other ``FETCH_DTYPE`` fields are arguments), then ``own_records`` on the units
    taken when they all point into ``buf`` (the CommitLog file whose first byte is physical
    offset ``base``): a consumer's read of the newest messages in one call instead of two,
    with no request record or scratch rows to fill in Python.

    Returns ``(status, scanned, taken, last_phys, owned, span start, span end, owned
    bytes)``: ``select_units``' four then ``own_records``' four; ``owned`` is -1 when a
    unit taken points outside ``buf`` (the caller reads those records file by file)."""
    request = np.empty(1, dtype=FETCH_DTYPE)
    r = request[0]
    r["first_offset"] = first_offset
    r["max_nums"] = max_nums
    r["count_in_memory"] = UNLIMITED
    r["bytes_in_memory"] = UNLIMITED
    r["count_in_disk"] = UNLIMITED
    r["bytes_in_disk"] = UNLIMITED
    r["memory"] = UNLIMITED
    r["write_offset"] = write_offset
    r["min_phys"] = min_phys
    r["file_size"] = file_size
    chosen = select_units(units, start, count, codes, request, picks)
    n = chosen.chosen
    end = base + buf.shape[0]
    inside = n > 0
    for i in range(n):
        inside = inside and base <= picks[0, i] < end
    k, lo, hi, total = -1, 0, 0, 0
    if inside:
        rows = np.empty(n, dtype=RECORD_ROW)
        k, lo, hi, total = own_records(buf, picks[0, :n] - base, picks[1, :n], picks[2, :n],
                                       topic, queue_id, base, rows, cols)  # fmt: skip
    return (chosen.status, chosen.scanned, np.int64(n), chosen.last_phys, np.int64(k),
            np.int64(lo), np.int64(hi), np.int64(total))  # fmt: skip


@njit(cache=True, nogil=True)
def put_units(units, start, offsets, sizes, tags_codes):
    """Write units for consecutive queue offsets from unit index ``start``."""
    for i in range(offsets.shape[0]):
        p = (start + i) * CQ_UNIT_SIZE
        put_i64(units, p, offsets[i])
        put_i32(units, p + 8, sizes[i])
        put_i64(units, p + 12, tags_codes[i])


@njit(cache=True, nogil=True)
def count_valid_units(units, start, limit):
    """Units from ``start`` with ``offset >= 0 and size > 0``, before ``limit`` units."""
    i = start
    while i < limit:
        p = i * CQ_UNIT_SIZE
        if get_i64(units, p) < 0 or get_i32(units, p + 8) <= 0:
            break
        i += 1
    return i - start


@njit(cache=True, nogil=True)
def put_unit_rows(units, start, rows, picks, a, b, base, max_offset, max_physic):
    """Write the units of records ``rows[picks[a:b]]`` (parsed CommitLog rows, positions
    relative to physical offset ``base``) from unit index ``start``, while they continue
    the queue: each record's queue offset must be the next one (``max_offset`` onwards) and
    it must end past ``max_physic``. Returns how many were written; the caller handles the
    record that stopped it (a re-dispatched or out-of-order one) the slow way."""
    n = 0
    for k in range(a, b):
        r = picks[k]
        phys = base + rows[r].pos
        size = rows[r].size
        if rows[r].queue_offset != max_offset + n or phys + size <= max_physic:
            break
        p = (start + n) * CQ_UNIT_SIZE
        put_i64(units, p, phys)
        put_i32(units, p + 8, size)
        put_i64(units, p + 12, rows[r].tags_code)
        n += 1
    return n
