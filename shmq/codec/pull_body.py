"""The body of a PULL_MESSAGE response: stored CommitLog records back to back, each a copy
of the record as the broker's CommitLog holds it (from anywhere in the CommitLog, so each
record's PHYSICALOFFSET is its own, not its position in the body).

``parse_pull_body`` decodes them with the store's record parser (``record.parse_one``, the
same rows the consumers' mmap path gets), so a message pulled over TCP decodes exactly as
one read from the mapped files. The body comes from the network: a record that does not
parse, or of another topic or queue than the pull's, is an error, never a message.
``warm_up`` loads the kernels before a consumer's first pull is answered.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import njit

from shmq.codec import record as rec
from shmq.errors import RemotingFrameError


@njit(cache=True, nogil=True)
def parse_records_anywhere(buf, out):
    """Decode the records of ``buf`` into ``out`` (at least one row per ``RECORD_OVERHEAD``
    bytes); returns ``(count, code)``: the records decoded and ``PARSE_OK`` when they
    cover ``buf`` exactly, else the parse code of the first that does not decode."""
    p = 0
    n = np.int64(0)
    limit = buf.shape[0]
    while p < limit:
        if limit - p < 36 or n >= out.shape[0]:
            return n, rec.PARSE_CORRUPT
        base = rec.get_i64(buf, p + 28) - p  # the record's own PHYSICALOFFSET
        code = rec.parse_one(buf, p, limit, base, np.bool_(False), out, n)
        if code != rec.PARSE_OK:
            return n, code
        p += out[n].size
        n += 1
    return n, rec.PARSE_OK


def parse_pull_body(body: bytes, topic: str, queue_id: int) -> tuple[np.ndarray, np.ndarray]:
    """``(buf, rows)``: the body as uint8 and its records' ``RECORD_ROW`` rows, checked to be of
    ``topic`` and ``queue_id`` in increasing queue offsets; ``RemotingFrameError`` names
    the first record that breaks a rule."""
    buf = np.frombuffer(body, dtype=np.uint8)
    buf.flags.writeable = False  # one compiled parser for bytes and bytearray bodies alike
    rows = np.zeros(buf.shape[0] // rec.RECORD_OVERHEAD + 1, dtype=rec.RECORD_ROW)
    n, code = parse_records_anywhere(buf, rows)
    if code != rec.PARSE_OK:
        raise RemotingFrameError(
            f"pull body of {topic}:{queue_id}: record {n} does not decode "
            f"({rec.PARSE_REASONS[code]})"
        )
    rows = rows[:n]
    ok = np.empty(n, dtype=np.bool_)
    # contiguous columns: a strided one is another type to numba (but not with one row,
    # which numpy calls contiguous), and so another compiled copy of the kernel
    sizes = np.ascontiguousarray(rows["size"])
    qoffs = np.ascontiguousarray(rows["queue_offset"])
    topic_raw = np.frombuffer(topic.encode(), dtype=np.uint8)
    good = rec.units_match(buf, rows, sizes, qoffs, topic_raw, queue_id, ok)
    if good != n or (n > 1 and not np.all(np.diff(rows["queue_offset"]) > 0)):
        bad = int(np.flatnonzero(~ok)[0]) if good != n else -1
        raise RemotingFrameError(
            f"pull body of {topic}:{queue_id}: "
            + (f"record {bad} is of another topic or queue" if bad >= 0
               else "queue offsets do not increase")
        )  # fmt: skip
    return buf, rows


@functools.cache
def warm_up() -> None:
    """Once per process: decode a one-record pull body and gather its body, as a TCP
    consumer's first answer would (else it waits a few hundred ms for numba's cache)."""
    topic = np.frombuffer(b"WarmUp", dtype=np.uint8)
    body_offs = np.array([0, 1], dtype=np.int64)
    props_offs = np.zeros(2, dtype=np.int64)
    out = np.zeros(rec.record_size(1, topic.shape[0], 0), dtype=np.uint8)
    fields = np.zeros(1, dtype=rec.ENCODE_ROW)
    rec.encode_batch(out, 0, 0, topic, np.ones(1, dtype=np.uint8), body_offs,
                     np.zeros(0, dtype=np.uint8), props_offs, fields)  # fmt: skip
    buf, rows = parse_pull_body(out.tobytes(), "WarmUp", 0)
    rec.gather_bodies(buf, rows, np.arange(rows.shape[0]), np.empty(1, dtype=np.uint8),
                      np.zeros(2, dtype=np.int64), 0)  # fmt: skip
