"""A new ring record from a stored one: what the broker's own senders write.

Delivering a delayed message, sending a failed one back for retry and committing a half
message all re-send a stored record under another topic, queue and properties, keeping its
body, flag, sysflag, born time and host (RocketMQ builds a ``MessageExtBrokerInner`` from
the ``MessageExt`` the same way). The header and body are copied as stored, so any host
layout passes through; the writer fills in the store fields and the CRC when it appends.
"""

from __future__ import annotations

import struct

import numpy as np
from numba import njit

from shmq.codec import record as rec
from shmq.codec.record_pack import tail

_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_ZERO_OFFSETS = bytes(16)  # QUEUEOFFSET and PHYSICALOFFSET: the writer's to fill
QUEUE_ID_POS, MAGIC_POS, QUEUE_OFFSET_POS, PHYSICAL_OFFSET_POS = 12, 4, 20, 28
SYSFLAG_POS = 36
# RECONSUMETIMES sits 16 bytes before the body (then PREPARED_TRANSACTION_OFFSET 8 and
# BODYLENGTH 4), whatever the hosts' sizes
_RECONSUME_BEFORE_BODY = 16
_PREPARED_BEFORE_BODY = 12


def rebuild_record(
    buf: np.ndarray,
    row: np.void,
    topic: bytes,
    queue_id: int,
    props: bytes,
    reconsume_times: int | None = None,
    *,
    sysflag: int | None = None,
    prepared_offset: int | None = None,
) -> bytearray:
    """Record ``row`` of ``buf`` (a decoded ``RECORD_ROW``) under ``topic`` / ``queue_id``
    with properties ``props``; ``reconsume_times``, ``sysflag`` and ``prepared_offset``
    (PREPARED_TRANSACTION_OFFSET) replace the stored fields when given."""
    pos = int(row["pos"])
    body_end = int(row["body_start"]) + int(row["body_len"])
    topic_part, magic = tail(topic, props)
    out = bytearray(buf[pos:body_end].tobytes())
    out += topic_part
    _I32.pack_into(out, 0, len(out))
    _U32.pack_into(out, MAGIC_POS, magic)
    _I32.pack_into(out, QUEUE_ID_POS, queue_id)
    out[QUEUE_OFFSET_POS : QUEUE_OFFSET_POS + 16] = _ZERO_OFFSETS
    before_body = int(row["body_start"]) - pos
    if reconsume_times is not None:
        _I32.pack_into(out, before_body - _RECONSUME_BEFORE_BODY, reconsume_times)
    if sysflag is not None:
        _I32.pack_into(out, SYSFLAG_POS, sysflag)
    if prepared_offset is not None:
        _I64.pack_into(out, before_body - _PREPARED_BEFORE_BODY, prepared_offset)
    return out


def edit_properties(
    raw: bytes,
    remove: frozenset[bytes] | set[bytes] = frozenset(),
    add: dict[str, str] | None = None,
) -> bytes:
    """RocketMQ's properties string ``raw`` without the pairs named in ``remove`` and with
    ``add`` appended (an added name replaces the stored pair). Pairs kept are kept byte for
    byte, in their order."""
    drop = set(remove)
    if add:
        drop.update(name.encode() for name in add)
    kept = [pair for pair in raw.split(b"\x02") if pair and pair.split(b"\x01", 1)[0] not in drop]
    out = b"".join(pair + b"\x02" for pair in kept)
    if add:
        out += "".join(f"{k}\x01{v}\x02" for k, v in add.items()).encode()
    return out


def property_value(raw: bytes, name: bytes) -> str | None:
    """The value of property ``name`` in ``raw`` (RocketMQ's rules: empty values absent)."""
    for pair in raw.split(b"\x02"):
        key, sep, value = pair.partition(b"\x01")
        if sep and key == name and value:
            return value.decode("utf-8", "replace")
    return None


_REAL_TOPIC = np.frombuffer(b"REAL_TOPIC", dtype=np.uint8)
_REAL_QID = np.frombuffer(b"REAL_QID", dtype=np.uint8)
_HALF_TOPIC = np.frombuffer(b"RMQ_SYS_TRANS_HALF_TOPIC", dtype=np.uint8)
MAX_QUEUE_ID = 65535
MAX_V1_TOPIC = 127
# ``rebuild_deliveries`` problems: a record that is not delivered
NO_REAL_TOPIC, BAD_REAL_QID, HALF_MESSAGE = 1, 2, 3
PROBLEMS = {
    NO_REAL_TOPIC: "no valid REAL_TOPIC property",
    BAD_REAL_QID: "no valid REAL_QID property",
    HALF_MESSAGE: "a transaction half message (dropped, as RocketMQ drops it)",
}


@njit(cache=True, nogil=True)
def rebuild_deliveries(buf, rows, picks, remove, out, out_offs, problems):
    """Delayed records ``rows[picks]`` of ``buf`` rebuilt as their deliveries, one after
    another into ``out`` from ``out_offs[0]``: topic and queue from their ``REAL_TOPIC`` /
    ``REAL_QID`` properties, the property named ``remove`` dropped (an empty name: none),
    everything else as stored (``rebuild_record``'s rule, for a whole batch in one call).
    ``out_offs[k + 1]`` is where record ``k`` ends; a record that is not to be delivered
    gets ``problems[k]`` (``PROBLEMS``) and takes no bytes.
    Returns the end of the last record, or -1 when ``out`` is too small (call again with
    a larger one)."""
    d = out_offs[0]
    for k in range(picks.shape[0]):
        i = picks[k]
        pos = rows[i].pos
        body_end = rows[i].body_start + rows[i].body_len
        s = rows[i].props_start
        end = s + rows[i].props_len
        t_start, t_end, q_value = -1, -1, np.int64(-1)
        kept = np.int64(0)
        p = s
        while p < end:
            stop, sep = rec.property_pair(buf, p, end)
            if p < sep < stop - 1:
                if rec.bytes_equal(buf, p, sep, _REAL_TOPIC):
                    t_start, t_end = sep + 1, stop
                elif rec.bytes_equal(buf, p, sep, _REAL_QID):
                    q_value = _digits(buf, sep + 1, stop)
            if not _named(buf, p, sep, remove):
                kept += min(stop + 1, end) - p
            p = stop + 1
        problems[k] = 0
        if t_start < 0 or t_end - t_start > MAX_V1_TOPIC or not _topic_ok(buf, t_start, t_end):
            problems[k] = NO_REAL_TOPIC
        elif q_value < 0 or q_value > MAX_QUEUE_ID:
            problems[k] = BAD_REAL_QID
        elif rec.bytes_equal(buf, t_start, t_end, _HALF_TOPIC):
            problems[k] = HALF_MESSAGE
        if problems[k]:
            out_offs[k + 1] = d
            continue
        head = body_end - pos
        size = head + 1 + (t_end - t_start) + 2 + kept
        if d + size > out.shape[0]:
            return -1
        for b in range(head):
            out[d + b] = buf[pos + b]
        rec.put_i32(out, d, size)
        rec.put_i32(out, d + MAGIC_POS, rec.MAGIC_V1)
        rec.put_i32(out, d + QUEUE_ID_POS, q_value)
        for b in range(16):  # QUEUEOFFSET, PHYSICALOFFSET: the writer's to fill
            out[d + QUEUE_OFFSET_POS + b] = 0
        w = d + head
        out[w] = t_end - t_start
        w += 1
        for b in range(t_end - t_start):
            out[w + b] = buf[t_start + b]
        w += t_end - t_start
        out[w] = (kept >> 8) & 0xFF
        out[w + 1] = kept & 0xFF
        w += 2
        p = s
        while p < end:
            stop, sep = rec.property_pair(buf, p, end)
            if not _named(buf, p, sep, remove):
                n = min(stop + 1, end) - p
                for b in range(n):
                    out[w + b] = buf[p + b]
                w += n
            p = stop + 1
        d += size
        out_offs[k + 1] = d
    return d


@njit(cache=True, nogil=True, inline="always")
def _digits(buf, s, e):
    """A short run of decimal digits as a number, -1 for anything else."""
    if e <= s or e - s > 9:
        return np.int64(-1)
    v = np.int64(0)
    for p in range(s, e):
        c = buf[p]
        if c < 48 or c > 57:
            return np.int64(-1)
        v = v * 10 + (c - 48)
    return v


@njit(cache=True, nogil=True, inline="always")
def _topic_ok(buf, s, e):
    for p in range(s, e):
        if not rec._TOPIC_BYTES[buf[p]]:
            return False
    return e > s


@njit(cache=True, nogil=True, inline="always")
def _named(buf, s, sep, name):
    """Whether the pair at ``s`` (separator at ``sep``) is named ``name`` (never for "")."""
    return name.shape[0] > 0 and sep > s and rec.bytes_equal(buf, s, sep, name)


@njit(cache=True, nogil=True)
def stamp_positions(data, local, ends, first, count, base):
    """Set PHYSICALOFFSET of records ``first .. first + count - 1`` (ending at ``ends[k +
    1]``, from ``ends[first]``), copied to ``data[local:]``, to their ring positions from
    ``base``: the writer checks a ring record's framing against it."""
    start = ends[first]
    for k in range(first, first + count):
        offset = ends[k] - start
        rec.put_i64(data, local + offset + PHYSICAL_OFFSET_POS, base + offset)
