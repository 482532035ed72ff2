"""What a pull copies out of the CommitLog, each record checked against the consume-queue
unit that points at it in the same pass: the records as stored, back to back (a TCP pull's
body), or only their bodies with their queue offsets and store timestamps (``pull_bulk``).

``parse_one`` and ``units_match`` decode every field of a record into a row, and scan its
properties, before a copy: about 200 ns a record, most of a pull's cost at 4,096 records a
pull, for fields neither pull reads. The ownership rule here is the same function,
``record.owns`` (the unit's size, queue id, queue offset and topic), over the header
checks that locate the topic (magic, a PHYSICALOFFSET equal to the record's place,
lengths that add up to the record, properties ending in their separator); the body CRC is
not checked, as on every read but recovery's. A unit whose record fails is skipped.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from shmq.codec.record import (
    MAGIC_V1,
    MAGIC_V2,
    RECORD_OVERHEAD,
    SYSFLAG_BORNHOST_V6,
    SYSFLAG_STOREHOST_V6,
    copy_bytes,
    get_i32,
    get_i64,
    get_u32,
    owns,
)


@njit(cache=True, nogil=True, inline="always")
def _owned(buf, p, limit, base, size, queue_offset, topic, queue_id):
    """Where the body length of the record at ``buf[p:]`` (``base``: the physical offset of
    ``buf[0]``) is, when the record is whole and its unit (``size`` bytes at
    ``queue_offset`` of ``topic`` / ``queue_id``) owns it (``record.owns``); -1 when not."""
    if size < RECORD_OVERHEAD or p < 0 or p + size > limit:
        return -1
    magic = get_u32(buf, p + 4)
    if magic != MAGIC_V1 and magic != MAGIC_V2:
        return -1
    if get_i64(buf, p + 28) != base + p:
        return -1
    record_size = get_i32(buf, p)
    sysflag = get_i32(buf, p + 36)
    hosts = (20 if sysflag & SYSFLAG_BORNHOST_V6 else 8) + (
        20 if sysflag & SYSFLAG_STOREHOST_V6 else 8
    )
    end = p + size
    body_len_pos = p + 68 + hosts  # born ts 40..48, hosts, store ts 8, reconsume 4, prep 8
    if body_len_pos + 4 > end:
        return -1
    body_len = get_i32(buf, body_len_pos)
    q = body_len_pos + 4 + body_len
    if body_len < 0 or q + 2 > end:
        return -1
    if magic == MAGIC_V1:
        topic_len = np.int64(buf[q])
        q += 1
    else:
        topic_len = (np.int64(buf[q]) << 8) | np.int64(buf[q + 1])
        q += 2
    if q + topic_len + 2 > end:
        return -1
    if not owns(size, queue_offset, topic, queue_id, record_size, get_i32(buf, p + 12),
                get_i64(buf, p + 20), buf, q, topic_len):  # fmt: skip
        return -1
    q += topic_len
    props_len = (np.int64(buf[q]) << 8) | np.int64(buf[q + 1])
    if props_len >= 32768:  # a Java short
        return -1
    if q + 2 + props_len != end or (props_len != 0 and buf[end - 1] != 2):
        return -1
    return body_len_pos


@njit(cache=True, nogil=True)
def copy_owned_records(buf, positions, sizes, queue_offsets, topic, queue_id, base, out, d):
    """Copy, to ``out[d:]``, each record at ``positions`` of ``buf`` (one CommitLog file;
    ``base`` its first physical offset) that its unit (``sizes``, ``queue_offsets``) owns,
    as stored; records next to each other are copied as one run. Returns the new end of
    ``out`` and how many records were copied."""
    limit = buf.shape[0]
    run_start = 0
    run_len = 0
    copied = 0
    for i in range(positions.shape[0]):
        p = positions[i]
        size = sizes[i]
        if _owned(buf, p, limit, base, size, queue_offsets[i], topic, queue_id) < 0:
            continue
        if p != run_start + run_len:
            copy_bytes(out, d, buf, run_start, run_len)
            d += run_len
            run_start, run_len = p, 0
        run_len += size
        copied += 1
    copy_bytes(out, d, buf, run_start, run_len)
    return d + run_len, copied


@njit(cache=True, nogil=True)
def owned_room(sizes, limit):
    """Bytes enough for the records (or bodies) that units of ``sizes`` may own: each
    size clipped to ``[0, limit]`` (a damaged unit's size must not size a buffer). One
    kernel call, where ``np.clip(...).sum()`` costs ~9 µs of numpy's Python on a pull of
    a few messages."""
    total = 0
    for i in range(sizes.shape[0]):
        total += min(max(sizes[i], 0), limit)
    return total


@njit(cache=True, nogil=True)
def gather_owned_bodies(
    buf, positions, sizes, queue_offsets, topic, queue_id, base, out, out_offs, k, qoffs, stamps,
    sysflags,
):  # fmt: skip
    """Copy the body of each record at ``positions`` of ``buf`` (as ``copy_owned_records``)
    that its unit owns to ``out`` from ``out_offs[k]``, back to back, filling
    ``out_offs[k + 1:]`` and the record's queue offset, store timestamp and sysFlag at
    ``qoffs[k:]``, ``stamps[k:]`` and ``sysflags[k:]`` (a compressed body is copied as
    stored); returns the new ``k``."""
    limit = buf.shape[0]
    d = out_offs[k]
    for i in range(positions.shape[0]):
        p = positions[i]
        body_len_pos = _owned(buf, p, limit, base, sizes[i], queue_offsets[i], topic, queue_id)
        if body_len_pos < 0:
            continue
        n = get_i32(buf, body_len_pos)
        copy_bytes(out, d, buf, body_len_pos + 4, n)
        d += n
        qoffs[k] = queue_offsets[i]
        sysflag = get_i32(buf, p + 36)
        sysflags[k] = sysflag
        born_host = 20 if sysflag & SYSFLAG_BORNHOST_V6 else 8
        stamps[k] = get_i64(buf, p + 48 + born_host)
        k += 1
        out_offs[k] = d
    return k
