"""RocketMQ's batch body: the messages of one ``SEND_BATCH_MESSAGE`` request, back to back
(``MessageDecoder.encodeMessages``), each::

    int32 TOTALSIZE | int32 MAGICCODE (0) | int32 BODYCRC (0) | int32 FLAG
    int32 BODYLENGTH | BODY | int16 PROPERTIESLENGTH | PROPERTIES

The body comes from the network, so ``scan_entries`` trusts nothing: every length is checked
against the bytes left before it is used, and TOTALSIZE must match the entry's parts (the
Java client always writes it so). ``decode_batch`` turns a body into the arrays
``record.encode_batch`` takes, each message's properties followed by the batch's own (RocketMQ's
``MessageExtBatchEncoder`` appends the request header's properties, ``CLUSTER`` among them, to
every message's), so a batch of any size costs two kernel calls, no Python per message.
``encode_batch_body`` is the client's side (``MessageDecoder.encodeMessages``): one kernel
call writes a batch from the same arrays a producer's ``RecordBatch`` holds. ``warm_up``
loads both sides' kernels before the first request needs them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from numba import njit

from shmq.codec import record as rec
from shmq.errors import BatchBodyError

ENTRY_FIXED = 22  # the fixed fields of an entry: five int32 and the int16 properties length
MAX_PROPERTIES = 32767
# scan_entries columns
E_FLAG, E_BODY, E_BODY_LEN, E_PROPS, E_PROPS_LEN = 0, 1, 2, 3, 4
N_ECOLS = 5
# scan_entries problems
OK, SHORT_HEADER, BAD_BODY_LENGTH, SHORT_BODY, BAD_PROPS_LENGTH, SHORT_PROPS, BAD_TOTAL = range(7)
PROBLEMS = {
    SHORT_HEADER: "fewer bytes left than an entry's fixed fields (22)",
    BAD_BODY_LENGTH: "a negative BODYLENGTH",
    SHORT_BODY: "BODYLENGTH runs past the end of the request body",
    BAD_PROPS_LENGTH: "a negative PROPERTIESLENGTH",
    SHORT_PROPS: "PROPERTIESLENGTH runs past the end of the request body",
    BAD_TOTAL: "TOTALSIZE does not match 22 + BODYLENGTH + PROPERTIESLENGTH",
}


@njit(cache=True, nogil=True)
def scan_entries(body, out):
    """Index the entries of ``body`` into ``out`` (``N_ECOLS`` columns, at least
    ``len(body) // ENTRY_FIXED`` rows). Returns ``(count, problem, entry)``: the entries
    found, and ``OK`` or the first problem and the index of the entry that has it."""
    n = body.shape[0]
    p = 0
    k = 0
    while p < n:
        if n - p < ENTRY_FIXED:
            return k, SHORT_HEADER, k
        total = rec.get_i32(body, p)
        body_len = rec.get_i32(body, p + 16)
        if body_len < 0:
            return k, BAD_BODY_LENGTH, k
        if body_len > n - p - ENTRY_FIXED:
            return k, SHORT_BODY, k
        q = p + 20 + body_len
        props_len = (np.int32(body[q]) << 8) | np.int32(body[q + 1])
        if props_len >= 0x8000:
            return k, BAD_PROPS_LENGTH, k
        if props_len > n - q - 2:
            return k, SHORT_PROPS, k
        if total != ENTRY_FIXED + body_len + props_len:
            return k, BAD_TOTAL, k
        out[k, E_FLAG] = rec.get_i32(body, p + 12)
        out[k, E_BODY] = p + 20
        out[k, E_BODY_LEN] = body_len
        out[k, E_PROPS] = q + 2
        out[k, E_PROPS_LEN] = props_len
        k += 1
        p = q + 2 + props_len
    return k, OK, k


@njit(cache=True, nogil=True)
def gather_entries(body, entries, suffix, bodies, body_offs, props, props_offs):
    """Copy the bodies of ``entries`` back to back into ``bodies`` and their properties,
    each followed by ``suffix`` (after a 0x02 when the entry's own do not end with one), into
    ``props``, filling the offset arrays (``record.encode_batch``'s layout)."""
    b = 0
    s = 0
    m = suffix.shape[0]
    for k in range(entries.shape[0]):
        start, n = entries[k, E_BODY], entries[k, E_BODY_LEN]
        rec.copy_bytes(bodies, b, body, start, n)
        b += n
        body_offs[k + 1] = b
        start, n = entries[k, E_PROPS], entries[k, E_PROPS_LEN]
        rec.copy_bytes(props, s, body, start, n)
        s += n
        if n > 0 and m > 0 and body[start + n - 1] != 2:
            props[s] = 2
            s += 1
        rec.copy_bytes(props, s, suffix, 0, m)
        s += m
        props_offs[k + 1] = s
    return s


@dataclass
class BatchBody:
    """A decoded batch: ``encode_batch``'s arrays and each message's flag."""

    flags: np.ndarray
    bodies: np.ndarray
    body_offs: np.ndarray
    props: np.ndarray
    props_offs: np.ndarray

    def __len__(self) -> int:
        return self.flags.shape[0]


def decode_batch(body: bytes, suffix: bytes = b"") -> BatchBody:
    """The messages of a batch body, ``suffix`` (properties, ending with 0x02) appended to
    each one's properties. ``BatchBodyError`` names the first entry that breaks a rule; an
    empty body, an empty message body, or properties over 32,767 bytes are errors too."""
    raw = np.frombuffer(body, dtype=np.uint8)
    entries = np.empty((raw.shape[0] // ENTRY_FIXED + 1, N_ECOLS), dtype=np.int64)
    count, problem, at = scan_entries(raw, entries)
    if problem != OK:
        raise BatchBodyError(f"batch body: message {at}: {PROBLEMS[problem]}")
    if count == 0:
        raise BatchBodyError("batch body holds no message")
    entries = entries[:count]
    empty = np.flatnonzero(entries[:, E_BODY_LEN] == 0)
    if empty.size:
        raise BatchBodyError(f"batch body: message {int(empty[0])} has an empty body")
    sfx = np.frombuffer(suffix, dtype=np.uint8)
    props_len = entries[:, E_PROPS_LEN] + sfx.shape[0] + 1  # at most one separator more
    body_offs = np.zeros(count + 1, dtype=np.int64)
    props_offs = np.zeros(count + 1, dtype=np.int64)
    bodies = np.empty(int(entries[:, E_BODY_LEN].sum()), dtype=np.uint8)
    props = np.empty(int(props_len.sum()), dtype=np.uint8)
    used = gather_entries(raw, entries, sfx, bodies, body_offs, props, props_offs)
    over = np.flatnonzero(np.diff(props_offs) > MAX_PROPERTIES)
    if over.size:
        k = int(over[0])
        raise BatchBodyError(
            f"batch body: message {k} has {int(props_offs[k + 1] - props_offs[k])} bytes of "
            f"properties, above the limit {MAX_PROPERTIES}"
        )
    return BatchBody(entries[:, E_FLAG].copy(), bodies, body_offs, props[:used], props_offs)


@njit(cache=True, nogil=True)
def write_entries(bodies, body_offs, props, props_offs, flags, start, end, out):
    """Write entries ``start .. end - 1`` into ``out`` (sized by ``batch_body_size``); a
    ``props_offs`` of two elements is every message's properties (a bulk send's)."""
    shared = props_offs.shape[0] == 2
    p = 0
    for k in range(start, end):
        b0, b1 = body_offs[k], body_offs[k + 1]
        j = 0 if shared else k
        q0, q1 = props_offs[j], props_offs[j + 1]
        n, m = b1 - b0, q1 - q0
        rec.put_i32(out, p, ENTRY_FIXED + n + m)
        rec.put_i32(out, p + 4, 0)
        rec.put_i32(out, p + 8, 0)
        rec.put_i32(out, p + 12, flags[k] if flags.shape[0] > 1 else flags[0])
        rec.put_i32(out, p + 16, n)
        rec.copy_bytes(out, p + 20, bodies, b0, n)
        q = p + 20 + n
        out[q] = (m >> 8) & 0xFF
        out[q + 1] = m & 0xFF
        rec.copy_bytes(out, q + 2, props, q0, m)
        p = q + 2 + m
    return p


def batch_body_size(body_offs: np.ndarray, props_offs: np.ndarray, start: int, end: int) -> int:
    """The bytes entries ``start .. end - 1`` take."""
    bodies = int(body_offs[end] - body_offs[start])
    if props_offs.shape[0] == 2:
        props = (end - start) * int(props_offs[1] - props_offs[0])
    else:
        props = int(props_offs[end] - props_offs[start])
    return (end - start) * ENTRY_FIXED + bodies + props


def encode_batch_body(
    bodies: np.ndarray,
    body_offs: np.ndarray,
    props: np.ndarray,
    props_offs: np.ndarray,
    flags: np.ndarray,
    start: int = 0,
    end: int = -1,
) -> bytes:
    """A batch body of messages ``start .. end - 1`` (all by default): ``bodies`` /
    ``body_offs`` and ``props`` / ``props_offs`` as ``encode_batch`` takes them, ``flags``
    one per message or a single one for all."""
    end = body_offs.shape[0] - 1 if end < 0 else end
    out = np.empty(batch_body_size(body_offs, props_offs, start, end), dtype=np.uint8)
    write_entries(bodies, body_offs, props, props_offs, flags, start, end, out)
    return out.tobytes()


@functools.cache
def warm_up() -> bytes:
    """Once per process: encode a one-message batch from the array kinds the senders pass
    (a bulk send's bodies read-only or writable with read-only properties, accumulated
    async sends' both writable) and decode it, so the first request does not wait a few
    hundred ms for numba's cache; returns the body."""
    offs = np.array([0, 1], dtype=np.int64)
    props = np.frombuffer(b"TAGS\x01a\x02", dtype=np.uint8)
    props_offs = np.array([0, props.shape[0]], dtype=np.int64)
    flags = np.zeros(1, dtype=np.int64)
    body = np.frombuffer(b"x", dtype=np.uint8)
    for bodies, props_kind in ((body, props), (body.copy(), props), (body.copy(), props.copy())):
        out = encode_batch_body(bodies, offs, props_kind, props_offs, flags, 0, 1)
    decode_batch(out, b"CLUSTER\x01c\x02")
    return out
