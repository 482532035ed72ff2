"""Consume-queue unit kernels: 20-byte units ``(commitlog offset 8, size 4, tags code 8)``."""

from __future__ import annotations

import numpy as np
from numba import njit

from shmq.codec.record import (
    PARSE_OK,
    R_POS,
    R_QUEUE_OFFSET,
    R_SIZE,
    R_TAGS_CODE,
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


@njit(cache=True, nogil=True)
def match_tags(units, start, count, codes, out):
    """Indices (relative to ``start``) of the units whose tags code is in ``codes``.

    Like RocketMQ's broker-side filter, the comparison is on ``(int) tagsCode``; hash
    collisions pass and the client compares the real tag strings. ``codes`` is sorted.
    """
    n = 0
    ncodes = codes.shape[0]
    for i in range(count):
        code = get_i64(units, (start + i) * CQ_UNIT_SIZE + 12) & 0xFFFFFFFF
        if code >= 0x80000000:
            code -= 0x100000000
        lo = 0
        hi = ncodes
        while lo < hi:
            mid = (lo + hi) >> 1
            if codes[mid] < code:
                lo = mid + 1
            else:
                hi = mid
        if lo < ncodes and codes[lo] == code:
            out[n] = i
            n += 1
    return n


@njit(cache=True, nogil=True)
def pick_units(units, start, picked, max_count, phys, sizes, qoffs, first_offset):
    """The units ``start + picked[i]`` that point at a record (not a blank unit: the
    padding before a queue's first message, ``fillPreBlank``), at most ``max_count``: their
    CommitLog offsets, sizes and queue offsets (``first_offset + picked[i]``) into
    ``phys``, ``sizes`` and ``qoffs``. Returns how many, and the index in ``picked`` after
    the last one taken."""
    n = 0
    for i in range(picked.shape[0]):
        if n == max_count:
            return n, i
        p = (start + picked[i]) * CQ_UNIT_SIZE
        offset = get_i64(units, p)
        size = get_i32(units, p + 8)
        if offset == 0 and size == BLANK_UNIT_SIZE:
            continue
        phys[n] = offset
        sizes[n] = size
        qoffs[n] = first_offset + picked[i]
        n += 1
    return n, picked.shape[0]


@njit(cache=True, nogil=True)
def read_units(units, start, count, buf, base, topic, queue_id, first_offset, rows, cols):
    """Parse the records that units ``start ..`` (queue offsets ``first_offset ..``) point
    at in the CommitLog file ``buf`` (its first byte at physical offset ``base``), at most
    ``count``, into ``rows`` (scratch, as ``parse_at`` fills it). Each record its unit owns
    (``units_match``'s rule; a record that does not parse owns nothing) gets a row of
    ``cols`` in order: ``MESSAGE_COLS`` (position, queue id, queue offset, physical
    offset, size). It stops at the first unit that points outside ``buf``.

    Returns ``(units read, records owned, span start, span end, owned bytes)``: the span
    is where the owned records lie in ``buf``. One call for what took a dozen array
    operations per pull (a consumer's read of a few messages)."""
    limit = buf.shape[0]
    k = 0
    lo = limit
    hi = 0
    total = 0
    for i in range(count):
        p = (start + i) * CQ_UNIT_SIZE
        local = get_i64(units, p) - base
        if local < 0 or local >= limit:
            return i, k, lo, hi, total
        if parse_one(buf, local, limit, base, np.bool_(False), rows, i) == PARSE_OK and unit_owns(
            buf, rows, i, get_i32(units, p + 8), first_offset + i, topic, queue_id
        ):
            size = rows[i, R_SIZE]
            cols[k, 0] = local
            cols[k, 1] = queue_id
            cols[k, 2] = first_offset + i
            cols[k, 3] = local + base
            cols[k, 4] = size
            lo = min(lo, local)
            hi = max(hi, local + size)
            total += size
            k += 1
    return count, k, lo, hi, total


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
        phys = base + rows[r, R_POS]
        size = rows[r, R_SIZE]
        if rows[r, R_QUEUE_OFFSET] != max_offset + n or phys + size <= max_physic:
            break
        p = (start + n) * CQ_UNIT_SIZE
        put_i64(units, p, phys)
        put_i32(units, p + 8, size)
        put_i64(units, p + 12, rows[r, R_TAGS_CODE])
        n += 1
    return n
