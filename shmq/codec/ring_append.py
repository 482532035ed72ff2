"""The writer's append of producer-ring records to the CommitLog, one kernel call per pass.

``append_from_ring`` walks the records a producer published, and for each one: validates
its framing with the CommitLog parser, finds its topic in the writer's topic index, checks
queue id, size and sysflag (plain or COMMIT), copies it to the CommitLog while stamping
queue offset, physical offset, store time and host and computing its BODYCRC, and answers
it in the ring's completion area. Records that fail a check are answered REJECTED with the
reason and not copied. It stops early, leaving the rest for the caller, when a record's
topic needs Python (unknown, or its queue slots not allocated yet) or the CommitLog file
has no room for the next record.

BODYCRC is the broker's own (RocketMQ's broker computes it on receipt and ignores the
client's value): a producer's CRC never reaches the store unchecked, so no client can plant
a record that recovery's CRC check would cut, with everything after it. ``check_crc`` also
verifies the producer's CRC (framing-level corruption of a ring is caught either way).

The topic index is a small open-addressing hash table built by ``TopicIndex``; lookups in
the kernel compare the bytes, so a hash collision can never mix topics.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from shmq.codec import record as rec
from shmq.codec.crc32 import crc32_range

# ``append_from_ring`` outcome codes (beside ``rec.PARSE_END`` / ``PARSE_BLANK`` /
# ``PARSE_CORRUPT`` for a record that does not parse)
APPEND_DONE = 10  # ``max_records`` records taken and another one follows
APPEND_TOPIC = 11  # the record at the stop position needs its topic resolved in Python
APPEND_FILE_FULL = 12  # the record at the stop position does not fit in the file's rest

# columns of the topic info table
TI_REASON, TI_WRITE_Q, TI_SLOT0 = 0, 1, 2
N_TOPIC_INFO = 3

# completion status values (``shmq.ipc.ring``'s SEND_OK / REJECTED, kept in step by a test)
_SEND_OK = 1
_REJECTED = 3

# ``append_from_ring``'s scalar inputs: one record, a 1-element array its caller keeps
APPEND_PARAMS = np.dtype(
    [
        ("start", np.int64),  # index in ``src`` of the first record to take
        ("limit", np.int64),  # end of the published bytes in ``src``
        ("src_base", np.int64),  # ring position of ``src[0]`` (the lap's start)
        ("max_records", np.int64),  # most records to answer in this call
        ("seq", np.int64),  # sequence number of the record at ``start`` (its answer slot)
        ("dst_pos", np.int64),  # where in ``dst`` the first record goes
        ("dst_room", np.int64),  # bytes of ``dst`` left from ``dst_pos``
        ("dst_base", np.int64),  # physical offset of ``dst[0]`` (the CommitLog file's)
        ("store_ts", np.int64),  # STORETIMESTAMP stamped into every record (ms)
        ("store_host", np.int64),  # STOREHOST stamped into every record (8 bytes, signed)
        ("max_body", np.int64),  # the largest body accepted (bytes)
        ("refuse", np.int64),  # non-zero: every record is REJECTED with this reason
        ("reason_queue", np.int64),  # the REJECTED reason for a queue id out of range
        ("reason_size", np.int64),  # ... for a body over ``max_body``
        ("reason_sysflag", np.int64),  # ... for a sysflag never stored from a ring
        ("reason_corrupt", np.int64),  # ... for a BODYCRC that is not its body's
        ("check_crc", np.bool_),  # verify the producer's BODYCRC (``checkProducerCrc``)
    ],
    align=True,
)

# ``append_from_ring``'s outcome, filled by the kernel: a 1-element array its caller keeps
APPEND_RESULT = np.dtype(
    [
        ("records", np.int64),  # records answered, stored or rejected
        ("ring_bytes", np.int64),  # ring bytes those records took
        ("file_bytes", np.int64),  # CommitLog bytes written from ``dst_pos``
        ("kept", np.int64),  # records stored
        ("code", np.int64),  # why it stopped: ``APPEND_*`` or the parser's ``PARSE_*``
        ("stop", np.int64),  # index in ``src`` it stopped at: the next call's ``start``
    ],
    align=True,
)

# Python's named views of the same bytes (``AppendParams.from_buffer(params)``): a field
# costs ~40 ns there, ~170 ns through numpy's field indexing, and the writer sets ten of
# them per kernel call
AppendParams = np.ctypeslib.as_ctypes_type(APPEND_PARAMS)
AppendResult = np.ctypeslib.as_ctypes_type(APPEND_RESULT)

# A ring may hold plain records and COMMIT (0x8) records (the broker's own, for committed
# transactions, as RocketMQ stores them); the 0x4 bit marks the types never stored from a
# ring, PREPARED (0x4) and ROLLBACK (0xC).
_BAD_SYSFLAG = rec.SYSFLAG_STOREHOST_V6 | rec.SYSFLAG_TRANSACTION_PREPARED


@njit(cache=True, nogil=True)
def topic_hash(buf, start, length):
    """FNV-1a of ``buf[start:start+length]`` (the topic index's hash)."""
    h = np.uint64(0xCBF29CE484222325)
    for k in range(start, start + length):
        h = (h ^ np.uint64(buf[k])) * np.uint64(0x100000001B3)
    return np.int64(h >> np.uint64(1))


@njit(cache=True, nogil=True, inline="always")
def _find_topic(buf, start, length, names, name_offs, table):
    """Index of the topic ``buf[start:start+length]`` in the topic index, or -1."""
    mask = table.shape[0] - 1
    i = topic_hash(buf, start, length) & mask
    while True:
        t = table[i] - 1
        if t < 0:
            return -1
        a = name_offs[t]
        if name_offs[t + 1] - a == length:
            same = True
            for k in range(length):
                if names[a + k] != buf[start + k]:
                    same = False
                    break
            if same:
                return t
        i = (i + 1) & mask


@njit(cache=True, nogil=True, inline="always")
def _copy(dst, d, src, s, n):
    for k in range(n):
        dst[np.uint64(d) + np.uint64(k)] = src[np.uint64(s) + np.uint64(k)]


@njit(cache=True, nogil=True, inline="always")
def _stopped(result, records, ring_bytes, file_bytes, kept, code, stop):
    out = result[0]
    out.records = records
    out.ring_bytes = ring_bytes
    out.file_bytes = file_bytes
    out.kept = kept
    out.code = code
    out.stop = stop


@njit(cache=True, nogil=True)
def append_from_ring(src, names, name_offs, table, info, slots, dst, next_qoff, comp, params,
                     result):  # fmt: skip
    """Append records from ``src[start:limit]`` (a producer ring's lap) to ``dst[dst_pos:]``
    (a CommitLog file), answering record ``seq + i`` in ``comp``; ``params`` (one
    ``APPEND_PARAMS`` record) says where and how, ``result`` (one ``APPEND_RESULT``) gets
    what it did and why it stopped.

    ``names``/``name_offs``/``table``/``info``/``slots`` are the topic index (``TopicIndex``);
    ``next_qoff`` the next queue offset per queue-table slot. A non-zero ``refuse`` rejects
    every record with that reason (the store cannot take puts now); ``check_crc`` rejects a
    record whose BODYCRC is not its body's (``reason_corrupt``).
    """
    row = np.empty(1, dtype=rec.RECORD_ROW)
    parsed = row[0]  # a view: each ``parse_one`` below refills it with the record at ``p``
    prm = params[0]
    start = prm.start
    limit = prm.limit
    src_base = prm.src_base
    max_records = prm.max_records
    seq = prm.seq
    dst_pos = prm.dst_pos
    dst_room = prm.dst_room
    dst_base = prm.dst_base
    max_body = prm.max_body
    store_ts = prm.store_ts
    store_host = prm.store_host
    refuse = prm.refuse
    check_crc = prm.check_crc
    mask = comp.shape[0] - 1
    p = start
    n = 0
    used = 0
    kept = 0
    last_t = -1
    last_start = 0
    last_len = 0
    while True:
        # parse first: a lap's closing blank is not a record and counts for nothing
        code = rec.parse_one(src, p, limit, src_base, np.bool_(False), row, np.int64(0))
        if code != rec.PARSE_OK:
            _stopped(result, n, p - start, used, kept, code, p)
            return
        if n >= max_records:
            _stopped(result, n, p - start, used, kept, APPEND_DONE, p)
            return
        size = parsed.size
        t_start = parsed.topic_start
        t_len = parsed.topic_len
        t = -1
        if last_t >= 0 and t_len == last_len:
            t = last_t
            a, b = np.uint64(t_start), np.uint64(last_start)
            for k in range(np.uint64(t_len)):  # unsigned: no wrap-around branch per byte
                if src[a + k] != src[b + k]:
                    t = -1
                    break
        if t < 0:
            t = _find_topic(src, t_start, t_len, names, name_offs, table)
            if t < 0 or (info[t, TI_REASON] == 0 and info[t, TI_SLOT0] < 0):
                _stopped(result, n, p - start, used, kept, APPEND_TOPIC, p)
                return
            last_t, last_start, last_len = t, t_start, t_len
        q = parsed.queue_id
        reason = refuse
        if reason == 0:
            reason = info[t, TI_REASON]
        if reason == 0 and (q < 0 or q >= info[t, TI_WRITE_Q]):
            reason = prm.reason_queue
        if reason == 0 and parsed.body_len > max_body:
            reason = prm.reason_size
        if reason == 0 and (parsed.sysflag & _BAD_SYSFLAG) != 0:
            reason = prm.reason_sysflag
        if reason == 0 and check_crc:
            body = parsed.body_start
            crc = crc32_range(src, body, body + parsed.body_len) & 0x7FFFFFFF
            if crc != parsed.body_crc:
                reason = prm.reason_corrupt
        j = (seq + n) & mask
        if reason == 0:
            if used + size + rec.MIN_BLANK > dst_room:
                _stopped(result, n, p - start, used, kept, APPEND_FILE_FULL, p)
                return
            d = dst_pos + used
            _copy(dst, d, src, p, size)
            slot = slots[info[t, TI_SLOT0] + q]
            qo = next_qoff[slot]
            next_qoff[slot] = qo + 1
            host_at = d + (parsed.store_host - p)
            rec.put_i64(dst, d + 20, qo)
            rec.put_i64(dst, d + 28, dst_base + d)
            rec.put_i64(dst, host_at - 8, store_ts)
            rec.put_i64(dst, host_at, store_host)
            if not check_crc:  # a verified producer CRC is already the right one
                body = d + (parsed.body_start - p)
                crc = crc32_range(dst, body, body + parsed.body_len) & 0x7FFFFFFF
                rec.put_i32(dst, d + 8, crc)
            comp[j, 0] = _SEND_OK | (q << 32)
            comp[j, 1] = qo
            comp[j, 2] = dst_base + d
            used += size
            kept += 1
        else:
            comp[j, 0] = _REJECTED | (reason << 16) | (q << 32)
            comp[j, 1] = -1
            comp[j, 2] = -1
        comp[j, 3] = store_ts
        p += size
        n += 1


@njit(cache=True, nogil=True)
def reject_all(comp, seq, count, reason):
    """Answer records ``seq .. seq + count - 1`` REJECTED with ``reason`` (a ring whose
    bytes stopped being records)."""
    mask = comp.shape[0] - 1
    for i in range(count):
        j = (seq + i) & mask
        comp[j, 0] = _REJECTED | (reason << 16)
        comp[j, 1] = -1
        comp[j, 2] = -1
        comp[j, 3] = 0


class TopicIndex:
    """The writer's view of the topic table as the arrays ``append_from_ring`` reads.

    Each topic has a reason (0: records are accepted; else the REJECTED reason for all of
    them), its write queue count and where its queue-table slots start in ``slots``
    (-1: not allocated yet; the kernel then hands the record back to Python)."""

    def __init__(self) -> None:
        self.ids: dict[bytes, int] = {}
        self._names: list[bytes] = []
        self._info: list[tuple[int, int, int]] = []
        self._slots: list[int] = []
        self.names = np.zeros(1, dtype=np.uint8)
        self.name_offs = np.zeros(1, dtype=np.int64)
        self.table = np.zeros(16, dtype=np.int64)
        self.info = np.zeros((1, N_TOPIC_INFO), dtype=np.int64)
        self.slots = np.zeros(1, dtype=np.int64)

    def __len__(self) -> int:
        return len(self._names)

    def set(self, name: bytes, reason: int, write_q: int, slots: list[int] | None) -> None:
        """Add or replace ``name``; call ``build`` before the next kernel call."""
        slot0 = -1
        if slots is not None:
            slot0 = len(self._slots)
            self._slots.extend(slots)
        entry = (reason, write_q, slot0)
        t = self.ids.get(name)
        if t is None:
            self.ids[name] = len(self._names)
            self._names.append(name)
            self._info.append(entry)
        else:
            self._info[t] = entry

    def build(self) -> None:
        names = self._names
        raw = b"".join(names) or b"\0"
        self.names = np.frombuffer(raw, dtype=np.uint8).copy()
        offs = np.zeros(len(names) + 1, dtype=np.int64)
        np.cumsum([len(n) for n in names], out=offs[1:])
        self.name_offs = offs
        size = 16
        while size < 2 * len(names) + 1:
            size *= 2
        table = np.zeros(size, dtype=np.int64)
        for t in range(len(names)):
            i = topic_hash(self.names, offs[t], offs[t + 1] - offs[t]) & (size - 1)
            while table[i]:
                i = (i + 1) & (size - 1)
            table[i] = t + 1
        self.table = table
        self.info = np.array(self._info or [(0, 0, -1)], dtype=np.int64).reshape(-1, N_TOPIC_INFO)
        self.slots = np.array(self._slots or [0], dtype=np.int64)

    def clear(self) -> None:
        self.ids.clear()
        self._names.clear()
        self._info.clear()
        self._slots.clear()
