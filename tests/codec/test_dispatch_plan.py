"""Reput's dispatch plan: every record that enters a consume queue is in exactly one group,
the group of its (topic, queue id), in log order; the others in none."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from shmq.codec import record as rec
from shmq.codec.dispatch_plan import plan_dispatch

MAX_QID = 15
TX_TYPES = [0, rec.SYSFLAG_TRANSACTION_PREPARED, rec.SYSFLAG_TRANSACTION_COMMIT,
            rec.SYSFLAG_TRANSACTION_ROLLBACK]  # fmt: skip
DISPATCHED = (0, rec.SYSFLAG_TRANSACTION_COMMIT)


def encode(records: list[tuple[int, int, int, bool]]) -> tuple[np.ndarray, np.ndarray]:
    """Records ``(topic number, queue id, transaction type bits, keyed)`` in one buffer,
    parsed back into rows."""
    buf = np.zeros(1 << 16, dtype=np.uint8)
    pos = 0
    for topic, qid, tx, keyed in records:
        props = np.frombuffer(b"KEYS\x01k\x02" if keyed else b"", dtype=np.uint8)
        fields = np.zeros(1, dtype=rec.ENCODE_ROW)
        fields["queue_id"][0] = qid
        fields["sysflag"][0] = tx
        fields["body_crc"][0] = -1
        pos = int(rec.encode_batch(buf, pos, 0, np.frombuffer(f"T{topic}".encode(), np.uint8),
                                   np.ones(1, np.uint8), np.array([0, 1], np.int64), props,
                                   np.array([0, len(props)], np.int64), fields))  # fmt: skip
    rows = np.zeros(len(records), dtype=rec.RECORD_ROW)
    n, _, _ = rec.parse_records(buf, 0, pos, 0, True, rows)
    assert n == len(records)
    return buf, rows


records = st.lists(
    st.tuples(
        st.integers(0, 3),
        st.integers(-1, MAX_QID + 1),  # -1 and MAX_QID + 1 are out of range
        st.sampled_from(TX_TYPES),
        st.booleans(),
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(records)
def test_groups_hold_exactly_the_dispatchable_records_in_log_order(records):
    buf, rows = encode(records)
    n = len(records)
    out = [np.empty(n, np.int64) for _ in range(3)]
    starts, keys, indexed = np.empty(n + 1, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
    groups, topics, n_indexed, bad = plan_dispatch(buf, rows, MAX_QID, out[0], out[1], out[2],
                                                   starts, keys, indexed)  # fmt: skip
    _, first, picks = out
    names = [buf[rows["topic_start"][first[t]] :][:2].tobytes() for t in range(topics)]
    assert sorted(names) == sorted({f"T{t}".encode() for t, *_ in records})
    wanted: dict[tuple[bytes, int], list[int]] = {}
    for i, (topic, qid, tx, _) in enumerate(records):
        if tx in DISPATCHED and 0 <= qid <= MAX_QID:
            wanted.setdefault((f"T{topic}".encode(), qid), []).append(i)
    got = {}
    for g in range(groups):
        t, qid = divmod(int(keys[g]), MAX_QID + 1)
        got[(names[t], qid)] = picks[starts[g] : starts[g + 1]].tolist()
    assert got == wanted
    assert bad == sum(1 for _, q, tx, _ in records if tx in DISPATCHED and not 0 <= q <= MAX_QID)
    keyed = sorted(i for rows_ in wanted.values() for i in rows_ if records[i][3])
    assert indexed[:n_indexed].tolist() == keyed
