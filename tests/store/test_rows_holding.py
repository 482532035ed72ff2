"""``rows_holding``, the byte check a SQL92 read runs before decoding anything: over one
copy of the records' properties, or record by record when they lie far apart, it keeps
exactly the records whose properties hold one string of every group (a naive check per
record is the reference)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from shmq.codec import record as rec
from shmq.store.reader import rows_holding

PAIRS = [b"a\x01x\x02", b"a\x01y\x02", b"b\x011\x02", b"TAGS\x01T\x02", b"ab\x01x\x02"]
FILLER = b"TAGS\x01T\x02a\x01x\x02b\x011\x02"
PATTERNS = [b"a\x01x", b"a\x01", b"b\x01", b"TAGS\x01T", b"x", b"\x01y"]


@settings(max_examples=400, deadline=None)
@given(
    records=st.lists(st.lists(st.sampled_from(PAIRS), max_size=3), min_size=1, max_size=12),
    gaps=st.lists(st.integers(0, 300), min_size=12, max_size=12),
    required=st.lists(st.frozensets(st.sampled_from(PATTERNS), min_size=1), max_size=3),
)
def test_keeps_exactly_the_records_holding_every_group(records, gaps, required) -> None:
    buf, rows, texts = bytearray(), np.zeros(len(records), dtype=rec.RECORD_ROW), []
    for i, pairs in enumerate(records):
        # other records between them, holding the patterns too
        buf += (FILLER * 100)[: gaps[i] * (40 if i % 5 == 4 else 1)]
        props = b"".join(pairs)
        rows[i]["props_start"], rows[i]["props_len"] = len(buf), len(props)
        buf += props
        texts.append(props)
    got = rows_holding(np.frombuffer(bytes(buf), dtype=np.uint8), rows, tuple(required))
    want = [all(any(p in t for p in group) for group in required) for t in texts]
    assert got.tolist() == want
