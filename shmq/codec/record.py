"""CommitLog record codec (RocketMQ message format V1/V2), numba kernels over uint8 arrays.

Layout of a V1 record with IPv4 hosts (big-endian; ``spec/store-format.md``)::

    0 TOTALSIZE 4 | 4 MAGICCODE 4 | 8 BODYCRC 4 | 12 QUEUEID 4 | 16 FLAG 4
    20 QUEUEOFFSET 8 | 28 PHYSICALOFFSET 8 | 36 SYSFLAG 4 | 40 BORNTIMESTAMP 8
    48 BORNHOST 8 | 56 STORETIMESTAMP 8 | 64 STOREHOST 8 | 72 RECONSUMETIMES 4
    76 PREPARED_TRANSACTION_OFFSET 8 | 84 BODYLENGTH 4 | 88 BODY n
    TOPICLENGTH 1 (V2: 2) | TOPIC t | PROPERTIESLENGTH 2 | PROPERTIES p

Total = 91 + n + t + p for V1 with IPv4 hosts. Each host is 20 bytes instead of 8 when its
SYSFLAG bit (0x10 born, 0x20 store) says IPv6. A record that does not fit in the rest of a
file is preceded by a BLANK record (TOTALSIZE = bytes left, magic ``0xCBD43194``).

The kernels are pure functions: ``encode_batch`` writes a whole batch in one call,
``parse_records`` walks and validates records (recovery, reput, the writer's check of client
records) and ``parse_at`` decodes records at known positions (reads). Both fill a table
of ``RECORD_ROW`` rows, one per record.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from shmq.codec.crc32 import crc32_range
from shmq.codec.jhash import java_hash_range

MAGIC_V1 = 0xDAA320A7
MAGIC_V2 = 0xDAA320AB
MAGIC_BLANK = 0xCBD43194
MIN_BLANK = 8
RECORD_OVERHEAD = 91  # V1, IPv4 born and store hosts, empty body/topic/properties
HEADER_BODY_START = 88  # where the body starts with IPv4 hosts

SYSFLAG_COMPRESSED = 0x1
SYSFLAG_MULTI_TAGS = 0x2
SYSFLAG_TRANSACTION_MASK = 0xC
SYSFLAG_TRANSACTION_PREPARED = 0x4
SYSFLAG_TRANSACTION_COMMIT = 0x8
SYSFLAG_TRANSACTION_ROLLBACK = 0xC
SYSFLAG_BORNHOST_V6 = 0x10
SYSFLAG_STOREHOST_V6 = 0x20

# An encode-input row: the header fields of one record of a batch that the caller chooses
# (``encode_batch`` computes the rest: sizes, offsets, magic). Tables of these rows are
# ``np.zeros(n, dtype=ENCODE_ROW)``; kernels read ``fields[i].queue_id``, Python writes
# ``fields["queue_id"] = ...``.
ENCODE_ROW = np.dtype(
    [
        ("queue_id", np.int64),
        ("flag", np.int64),
        ("queue_offset", np.int64),
        ("sysflag", np.int64),
        ("born_ts", np.int64),
        ("born_host", np.int64),  # the 8 host bytes (ipv4 4 + port 4) as a signed big-endian int64
        ("store_ts", np.int64),
        ("store_host", np.int64),  # the same for the store host
        ("reconsume_times", np.int64),
        ("prepared_offset", np.int64),  # PREPARED_TRANSACTION_OFFSET
        ("body_crc", np.int64),  # -1: compute it here
    ],
    align=True,
)

# A decoded row: what ``parse_one`` reads from one record, as values or as positions in the
# buffer that was parsed. Tables of these rows are ``np.zeros(n, dtype=RECORD_ROW)``;
# kernels read and write ``rows[i].size``, Python reads a field of all rows as
# ``rows["size"][:n]`` (a strided view: ``np.ascontiguousarray`` it for a kernel or a
# buffer that needs contiguous data). Every field is an int64, so a row is 23 consecutive
# words and ``rows[i].size`` compiles to the one load a column index of a 2-D table would.
RECORD_ROW = np.dtype(
    [
        ("pos", np.int64),  # position of the record in the buffer that was parsed
        ("size", np.int64),  # TOTALSIZE
        ("magic", np.int64),
        ("body_crc", np.int64),
        ("queue_id", np.int64),
        ("flag", np.int64),
        ("queue_offset", np.int64),
        ("phys_offset", np.int64),  # PHYSICALOFFSET as stored
        ("sysflag", np.int64),
        ("born_ts", np.int64),
        ("born_host", np.int64),  # position of the born host bytes (8, or 20 for IPv6)
        ("store_ts", np.int64),
        ("store_host", np.int64),  # position of the store host bytes (8, or 20 for IPv6)
        ("reconsume_times", np.int64),
        ("prepared_offset", np.int64),  # PREPARED_TRANSACTION_OFFSET
        ("body_start", np.int64),  # position of the body
        ("body_len", np.int64),
        ("topic_start", np.int64),  # position of the topic name
        ("topic_len", np.int64),
        ("props_start", np.int64),  # position of the properties string
        ("props_len", np.int64),
        ("tags_code", np.int64),  # Java hash of the TAGS property, 0 without tags
        ("index_flags", np.int64),  # INDEX_HAS_KEYS | INDEX_HAS_UNIQ_KEY
    ],
    align=True,
)

INDEX_HAS_KEYS = 1
INDEX_HAS_UNIQ_KEY = 2

# Outcome of parsing one record.
PARSE_OK = 0
PARSE_END = 1  # zeros or no room for a header: the end of written data
PARSE_BLANK = 2  # the end-of-file blank record: continue in the next file
PARSE_CORRUPT = 3  # bad magic, size, length formula, position or CRC
PARSE_FULL = 4  # the output table is full; call again from the returned position

PARSE_REASONS = ("ok", "end of data", "end-of-file blank", "corrupt record", "table full")

# Bytes a topic name may hold (RocketMQ's ``^[%|a-zA-Z0-9_-]+$``).
_TOPIC_BYTES = np.zeros(256, dtype=np.bool_)
for _c in b"%|_-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ":
    _TOPIC_BYTES[_c] = True


def record_size(body_len: int, topic_len: int, props_len: int) -> int:
    """TOTALSIZE of a record with IPv4 hosts (V2 when the topic is longer than 127 bytes)."""
    return RECORD_OVERHEAD + body_len + topic_len + props_len + (1 if topic_len > 127 else 0)


# Reads index with unsigned positions (every caller's is >= 0): a signed index makes numba
# wrap a negative one around at each byte, a branch per byte that also keeps LLVM from
# merging the four or eight loads into one (a record parse cost 67 ns with it).


@njit(cache=True, nogil=True, inline="always")
def get_u32(buf, p):
    u = np.uint64(p)
    return (
        (np.int64(buf[u]) << 24)
        | (np.int64(buf[u + np.uint64(1)]) << 16)
        | (np.int64(buf[u + np.uint64(2)]) << 8)
        | np.int64(buf[u + np.uint64(3)])
    )


@njit(cache=True, nogil=True, inline="always")
def get_i32(buf, p):
    v = get_u32(buf, p)
    return v - 0x100000000 if v >= 0x80000000 else v


@njit(cache=True, nogil=True, inline="always")
def get_i64(buf, p):
    return (get_u32(buf, p) << 32) | get_u32(buf, np.uint64(p) + np.uint64(4))


@njit(cache=True, nogil=True, inline="always")
def put_i32(buf, p, v):
    p = np.uint64(p)
    buf[p] = (v >> 24) & 0xFF
    buf[p + np.uint64(1)] = (v >> 16) & 0xFF
    buf[p + np.uint64(2)] = (v >> 8) & 0xFF
    buf[p + np.uint64(3)] = v & 0xFF


@njit(cache=True, nogil=True, inline="always")
def put_i64(buf, p, v):
    put_i32(buf, p, (v >> 32) & 0xFFFFFFFF)
    put_i32(buf, np.uint64(p) + np.uint64(4), v & 0xFFFFFFFF)


@njit(cache=True, nogil=True, inline="always")
def property_pair(buf, s, end):
    """The end of the property pair starting at ``s`` (its 0x02, or ``end``) and the
    position of its 0x01 separator (``stop`` when there is none): pairs are split at 0x02
    first, as ``properties.decode_properties`` (and RocketMQ's decoder) split them."""
    stop = np.uint64(s)
    limit = np.uint64(end)
    while stop < limit and buf[stop] != 2:
        stop += np.uint64(1)
    sep = np.uint64(s)
    while sep < stop and buf[sep] != 1:
        sep += np.uint64(1)
    return np.int64(stop), np.int64(sep)


@njit(cache=True, nogil=True, inline="always")
def bytes_equal(buf, s, e, name):
    """Whether ``buf[s:e]`` is ``name`` (a uint8 array)."""
    if e - s != name.shape[0]:
        return False
    at = np.uint64(s)
    for k in range(name.shape[0]):  # noqa: SIM110 (an explicit loop compiles to tight code)
        if buf[at + np.uint64(k)] != name[k]:
            return False
    return True


PROP_TAGS = np.frombuffer(b"TAGS", dtype=np.uint8)
PROP_KEYS = np.frombuffer(b"KEYS", dtype=np.uint8)
PROP_UNIQ_KEY = np.frombuffer(b"UNIQ_KEY", dtype=np.uint8)


@njit(cache=True, nogil=True, inline="always")
def _scan_properties(buf, start, end, out, row):
    """Fill the tag code and index flags of ``row`` from properties ``buf[start:end]``
    (a pair counts with a name and a value; a later TAGS pair wins)."""
    tags_code = np.int64(0)
    flags = np.int64(0)
    s = start
    while s < end:
        stop, sep = property_pair(buf, s, end)
        if s < sep < stop - 1:
            if bytes_equal(buf, s, sep, PROP_TAGS):
                tags_code = java_hash_range(buf, sep + 1, stop)
            elif bytes_equal(buf, s, sep, PROP_KEYS):
                flags |= INDEX_HAS_KEYS
            elif bytes_equal(buf, s, sep, PROP_UNIQ_KEY):
                flags |= INDEX_HAS_UNIQ_KEY
        s = stop + 1
    decoded = out[row]
    decoded.tags_code = tags_code
    decoded.index_flags = flags


@njit(cache=True, nogil=True)
def parse_one(buf, p, limit, base, check_crc, out, row):
    """Validate and decode the record at ``buf[p:limit]`` into ``out[row]``; a PARSE_* code.

    ``base`` is the physical offset of ``buf[0]``: a record whose PHYSICALOFFSET field does
    not equal its position is corrupt (stale bytes from an earlier life of the file).

    Jitted callers pass ``np.bool_(False)`` and ``np.int64(0)``, never the literals: numba
    compiles a callee once more for each literal argument it is called with (seconds each,
    at a host's first start), and so for every kernel that calls this one.
    """
    if limit - p < 8:
        return PARSE_END
    total = get_i32(buf, p)
    magic = get_u32(buf, p + 4)
    if magic == MAGIC_BLANK:
        if total >= MIN_BLANK and p + total <= limit:
            blank = out[row]
            blank.pos = p
            blank.size = total
            blank.magic = magic
            return PARSE_BLANK
        return PARSE_CORRUPT
    if total == 0 and magic == 0:
        return PARSE_END
    if magic != MAGIC_V1 and magic != MAGIC_V2:
        return PARSE_CORRUPT
    if total < RECORD_OVERHEAD or total > limit - p:
        return PARSE_CORRUPT
    sysflag = get_i32(buf, p + 36)
    born_len = 20 if sysflag & SYSFLAG_BORNHOST_V6 else 8
    store_len = 20 if sysflag & SYSFLAG_STOREHOST_V6 else 8
    q = p + 48 + born_len
    store_ts_pos = q
    store_host_pos = q + 8
    q = store_host_pos + store_len
    reconsume_pos = q
    body_len_pos = q + 12
    end = p + total
    if body_len_pos + 4 > end:
        return PARSE_CORRUPT
    body_len = get_i32(buf, body_len_pos)
    body_start = body_len_pos + 4
    if body_len < 0 or body_start + body_len > end:
        return PARSE_CORRUPT
    q = body_start + body_len
    if magic == MAGIC_V1:
        if q + 1 > end:
            return PARSE_CORRUPT
        topic_len = np.int64(buf[q])
        if topic_len >= 128:  # a signed Java byte
            return PARSE_CORRUPT
        topic_start = q + 1
    else:
        if q + 2 > end:
            return PARSE_CORRUPT
        topic_len = (np.int64(buf[q]) << 8) | np.int64(buf[q + 1])
        if topic_len >= 32768:
            return PARSE_CORRUPT
        topic_start = q + 2
    if topic_len == 0 or topic_start + topic_len + 2 > end:
        return PARSE_CORRUPT
    q = topic_start + topic_len
    props_len = (np.int64(buf[q]) << 8) | np.int64(buf[q + 1])
    if props_len >= 32768:
        return PARSE_CORRUPT
    props_start = q + 2
    if props_start + props_len != end:  # RocketMQ's length-formula check
        return PARSE_CORRUPT
    # Beyond RocketMQ's checks, which leave topic and properties unchecked: every property
    # pair ends with 0x02 and topic bytes come from the topic alphabet, so a torn tail that
    # zeroed their last bytes is caught too.
    if props_len > 0 and buf[end - 1] != 2:
        return PARSE_CORRUPT
    for k in range(np.uint64(topic_start), np.uint64(topic_start + topic_len)):
        if not _TOPIC_BYTES[buf[k]]:
            return PARSE_CORRUPT
    phys = get_i64(buf, p + 28)
    if phys != base + p:
        return PARSE_CORRUPT
    body_crc = get_i32(buf, p + 8)
    if check_crc and (crc32_range(buf, body_start, body_start + body_len) & 0x7FFFFFFF) != body_crc:
        return PARSE_CORRUPT
    decoded = out[row]
    decoded.pos = p
    decoded.size = total
    decoded.magic = magic
    decoded.body_crc = body_crc
    decoded.queue_id = get_i32(buf, p + 12)
    decoded.flag = get_i32(buf, p + 16)
    decoded.queue_offset = get_i64(buf, p + 20)
    decoded.phys_offset = phys
    decoded.sysflag = sysflag
    decoded.born_ts = get_i64(buf, p + 40)
    decoded.born_host = p + 48
    decoded.store_ts = get_i64(buf, store_ts_pos)
    decoded.store_host = store_host_pos
    decoded.reconsume_times = get_i32(buf, reconsume_pos)
    decoded.prepared_offset = get_i64(buf, reconsume_pos + 4)
    decoded.body_start = body_start
    decoded.body_len = body_len
    decoded.topic_start = topic_start
    decoded.topic_len = topic_len
    decoded.props_start = props_start
    decoded.props_len = props_len
    _scan_properties(buf, props_start, end, out, row)
    return PARSE_OK


@njit(cache=True, nogil=True)
def parse_records(buf, start, limit, base, check_crc, out):
    """Walk records from ``start`` while they are valid and before ``limit``.

    Returns ``(count, position, code)``: rows filled in ``out``, the position after the last
    good record (or of the blank record), and why the walk stopped (a PARSE_* code).
    """
    p = start
    n = np.int64(0)
    while True:
        if n >= out.shape[0]:
            return n, p, PARSE_FULL
        code = parse_one(buf, p, limit, base, check_crc, out, n)
        if code != PARSE_OK:
            return n, p, code
        p += out[n].size
        n += 1


@njit(cache=True, nogil=True)
def units_match(buf, rows, sizes, queue_offsets, topic, queue_id, ok):
    """The one rule by which a consume-queue unit owns the record it points at (used by the
    store, the consumers' reader and the Spark scan): same size, queue id, queue offset
    and topic. ``rows`` are the parsed records at the units' offsets in ``buf``; fills
    ``ok`` and returns how many match. A damaged header or a stale unit must never hand a
    record out under another topic or queue."""
    count = 0
    for i in range(rows.shape[0]):
        good = unit_owns(buf, rows, i, sizes[i], queue_offsets[i], topic, queue_id)
        ok[i] = good
        count += good
    return count


@njit(cache=True, nogil=True, inline="always")
def unit_owns(buf, rows, i, size, queue_offset, topic, queue_id):
    """``units_match``'s rule for parsed row ``i``."""
    start = rows[i].topic_start
    return owns(size, queue_offset, topic, queue_id, rows[i].size, rows[i].queue_id,
                rows[i].queue_offset, buf, start, rows[i].topic_len)  # fmt: skip


@njit(cache=True, nogil=True, inline="always")
def owns(size, queue_offset, topic, queue_id, record_size, record_queue_id, record_queue_offset,
         buf, topic_start, topic_len):  # fmt: skip
    """The ownership rule itself, on a record's fields however they were read (a full parse,
    ``unit_owns``; or the header walk of a copy, ``record_copy``): a unit of ``size`` bytes
    at ``queue_offset`` of ``topic`` / ``queue_id`` owns the record whose size, queue id,
    queue offset and topic (``buf[topic_start:topic_start + topic_len]``) are the same."""
    return (
        record_size == size
        and record_queue_id == queue_id
        and record_queue_offset == queue_offset
        and bytes_equal(buf, topic_start, topic_start + topic_len, topic)
    )


@njit(cache=True, nogil=True)
def parse_at(buf, positions, limit, base, check_crc, out):
    """Decode the records at ``positions``; returns how many decoded before the first failure."""
    for i in range(positions.shape[0]):
        if parse_one(buf, positions[i], limit, base, check_crc, out, i) != PARSE_OK:
            return i
    return positions.shape[0]


@njit(cache=True, nogil=True, inline="always")
def copy_bytes(dst, d, src, s, n):
    """Copy ``n`` bytes from ``src[s:]`` to ``dst[d:]``; unsigned indices let LLVM drop
    wraparound checks and vectorise (a slice assignment runs several times slower)."""
    d, s = np.uint64(d), np.uint64(s)
    for k in range(np.uint64(n)):
        dst[d + k] = src[s + k]


@njit(cache=True, nogil=True, inline="always")
def _same_constant_fields(fields, i):
    """Whether record ``i`` shares all batch-constant header fields with record ``i - 1``."""
    a, b = fields[i], fields[i - 1]
    return (
        a.queue_id == b.queue_id
        and a.flag == b.flag
        and a.sysflag == b.sysflag
        and a.born_ts == b.born_ts
        and a.born_host == b.born_host
        and a.store_ts == b.store_ts
        and a.store_host == b.store_host
        and a.reconsume_times == b.reconsume_times
        and a.prepared_offset == b.prepared_offset
    )


@njit(cache=True, nogil=True)
def encode_batch(buf, pos, base, topic, bodies, body_offs, props, props_offs, fields):
    """Encode ``fields.shape[0]`` records of one topic at ``buf[pos:]``; returns the end.

    Record ``i`` has body ``bodies[body_offs[i]:body_offs[i+1]]`` and properties
    ``props[props_offs[i]:props_offs[i+1]]``, or ``props[props_offs[0]:props_offs[1]]`` for
    every record when ``props_offs`` has two entries (one property set for a whole batch).
    Its PHYSICALOFFSET is ``base`` + its position. The caller has checked that all fits.
    When a record's constant header fields equal the previous record's, the previous header
    is copied and only size, CRC, offsets and body length are patched.
    """
    topic_len = np.uint64(topic.shape[0])
    long_topic = topic_len > 127
    shared_props = props_offs.shape[0] == 2
    zero = np.uint64(0)
    p = np.uint64(pos)
    prev = p
    for i in range(fields.shape[0]):
        b0 = np.uint64(body_offs[i])
        body_len = np.uint64(body_offs[i + 1]) - b0
        j = 0 if shared_props else i
        s0 = np.uint64(props_offs[j])
        props_len = np.uint64(props_offs[j + 1]) - s0
        total = RECORD_OVERHEAD + body_len + topic_len + props_len + (1 if long_topic else 0)
        crc = fields[i].body_crc
        if crc < 0:
            crc = crc32_range(bodies, b0, b0 + body_len) & 0x7FFFFFFF
        if i > 0 and _same_constant_fields(fields, i):
            copy_bytes(buf, p, buf, prev, np.uint64(HEADER_BODY_START))
        else:
            put_i32(buf, p + np.uint64(4), MAGIC_V2 if long_topic else MAGIC_V1)
            put_i32(buf, p + np.uint64(12), fields[i].queue_id)
            put_i32(buf, p + np.uint64(16), fields[i].flag)
            sysflag = fields[i].sysflag & ~(SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6)
            put_i32(buf, p + np.uint64(36), sysflag)
            put_i64(buf, p + np.uint64(40), fields[i].born_ts)
            put_i64(buf, p + np.uint64(48), fields[i].born_host)
            put_i64(buf, p + np.uint64(56), fields[i].store_ts)
            put_i64(buf, p + np.uint64(64), fields[i].store_host)
            put_i32(buf, p + np.uint64(72), fields[i].reconsume_times)
            put_i64(buf, p + np.uint64(76), fields[i].prepared_offset)
        put_i32(buf, p, np.int64(total))
        put_i32(buf, p + np.uint64(8), crc)
        put_i64(buf, p + np.uint64(20), fields[i].queue_offset)
        put_i64(buf, p + np.uint64(28), np.int64(base) + np.int64(p))
        put_i32(buf, p + np.uint64(84), np.int64(body_len))
        q = p + np.uint64(HEADER_BODY_START)
        copy_bytes(buf, q, bodies, b0, body_len)
        q += body_len
        if long_topic:
            buf[q] = (topic_len >> np.uint64(8)) & np.uint64(0xFF)
            buf[q + np.uint64(1)] = topic_len & np.uint64(0xFF)
            q += np.uint64(2)
        else:
            buf[q] = topic_len
            q += np.uint64(1)
        copy_bytes(buf, q, topic, zero, topic_len)
        q += topic_len
        buf[q] = (props_len >> np.uint64(8)) & np.uint64(0xFF)
        buf[q + np.uint64(1)] = props_len & np.uint64(0xFF)
        q += np.uint64(2)
        copy_bytes(buf, q, props, s0, props_len)
        prev = p
        p = q + props_len
    return np.int64(p)


@njit(cache=True, nogil=True)
def write_blank(buf, pos, size):
    """Write the end-of-file blank record (TOTALSIZE = ``size``) at ``pos``."""
    put_i32(buf, pos, size)
    put_i32(buf, pos + 4, MAGIC_BLANK)


@njit(cache=True, nogil=True)
def place_batch(sizes, start, room, base, out):
    """Place records ``sizes[start:]`` one after another from physical offset ``base`` in
    ``room`` bytes, writing each one's offset to ``out``; returns ``(count, bytes used)``.

    Keeps RocketMQ's rule that a record needs ``size + 8`` bytes free, so a blank record can
    always close the file after it.
    """
    used = np.int64(0)
    i = start
    while i < sizes.shape[0]:
        if used + sizes[i] + MIN_BLANK > room:
            break
        out[i] = base + used
        used += sizes[i]
        i += 1
    return i - start, used


@njit(cache=True, nogil=True)
def dirty_end(buf, start, gap):
    """End of the non-zero bytes that follow ``start``: scanning stops at a run of ``gap``
    zero bytes (longer than any zero run inside written data) or at the buffer's end.

    Truncation zeros ``[start, dirty_end)`` so that stale records after a cut can never be
    read back, without touching the untouched (all-zero) rest of a large file.
    """
    end = start
    run = 0
    i = start
    n = buf.shape[0]
    while i < n and run < gap:
        if buf[i] != 0:
            end = i + 1
            run = 0
        else:
            run += 1
        i += 1
    return end


@njit(cache=True, nogil=True, inline="always")
def _same_topic(buf, rows, i, j):
    start, other = rows[i].topic_start, rows[j].topic_start
    length = rows[i].topic_len
    if rows[j].topic_len != length:
        return False
    for k in range(length):  # noqa: SIM110 (an explicit loop compiles to tight code in numba)
        if buf[start + k] != buf[other + k]:
            return False
    return True


@njit(cache=True, nogil=True)
def topic_ids(buf, rows, ids, first_rows):
    """Number the distinct topics of decoded ``rows`` by exact byte comparison.

    ``ids[i]`` gets the number of row ``i``'s topic and ``first_rows[t]`` the first row with
    topic ``t``; returns how many distinct topics there are. Reput uses it to group a batch
    by queue without decoding a topic string per record.
    """
    distinct = 0
    last = -1
    for i in range(rows.shape[0]):
        found = -1
        if last >= 0 and _same_topic(buf, rows, i, first_rows[last]):
            found = last  # consecutive records usually share a topic
        else:
            for t in range(distinct):
                if _same_topic(buf, rows, i, first_rows[t]):
                    found = t
                    break
        if found < 0:
            first_rows[distinct] = i
            found = distinct
            distinct += 1
        ids[i] = found
        last = found
    return distinct


@njit(cache=True, nogil=True)
def batch_sizes(body_offs, topic_len, props_offs, max_body, sizes):
    """Record sizes of a batch (see ``encode_batch`` for the offset arrays) into ``sizes``;
    returns the index of the first body outside ``1..max_body`` bytes, or -1."""
    shared_props = props_offs.shape[0] == 2
    extra = RECORD_OVERHEAD + topic_len + (1 if topic_len > 127 else 0)
    for i in range(sizes.shape[0]):
        body_len = body_offs[i + 1] - body_offs[i]
        if body_len <= 0 or body_len > max_body:
            return i
        j = 0 if shared_props else i
        sizes[i] = extra + body_len + props_offs[j + 1] - props_offs[j]
    return -1


@njit(cache=True, nogil=True)
def gather_bodies(buf, rows, picked, out, out_offs, k):
    """Copy the bodies of ``rows[picked]`` back to back into ``out`` from ``out_offs[k]``,
    filling ``out_offs[k + 1:]`` (the consume side of a bulk send); returns the new ``k``."""
    d = out_offs[k]
    for i in range(picked.shape[0]):
        r = picked[i]
        n = rows[r].body_len
        copy_bytes(out, d, buf, rows[r].body_start, n)
        d += n
        k += 1
        out_offs[k] = d
    return k


def warm_up_encode(data: np.ndarray) -> None:
    """Compile (or load from numba's cache) the encode kernels with the argument types a
    producer's send uses, encoding one record of topic ``WarmUp`` (body ``x``, tag ``a``) at
    the start of ``data``, a writable uint8 scratch buffer of at least 4 KiB. The producer
    runs it before its first send, the writer to get a record to warm its own path on."""
    topic = np.frombuffer(b"WarmUp", dtype=np.uint8)
    bodies = np.frombuffer(b"x", dtype=np.uint8)
    body_offs = np.array([0, 1], dtype=np.int64)
    props = np.frombuffer(b"TAGS\x01a\x02", dtype=np.uint8)
    props_offs = np.array([0, props.shape[0]], dtype=np.int64)
    fields = np.zeros(1, dtype=ENCODE_ROW)
    fields["body_crc"] = -1
    sizes = np.empty(1, dtype=np.int64)
    batch_sizes(body_offs, topic.shape[0], props_offs, 1 << 20, sizes)
    place_batch(sizes[:1], 0, data.shape[0], 0, np.empty(1, dtype=np.int64))
    encode_batch(data, 0, 0, topic, bodies, body_offs[0:2], props, props_offs, fields[0:1])
    write_blank(np.zeros(16, dtype=np.uint8), 0, 8)
