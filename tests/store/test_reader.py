"""StoreReader: the bulk read gives the same messages as the per-message read."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shmq.message import parse_offset_msg_id
from shmq.store import MessageStore
from shmq.store.reader import StoreReader
from shmq.store.results import parse_tag_filter


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    bodies=st.lists(st.binary(min_size=1, max_size=300), min_size=1, max_size=60),
    tags=st.lists(st.sampled_from(["A", "B", None]), min_size=60, max_size=60),
    start=st.integers(0, 70),
    count=st.integers(1, 70),
    expression=st.sampled_from(["*", "A", "A || B", "C"]),
)
def test_bulk_read_equals_the_per_message_read(tmp_path_factory, bodies, tags, start, count,
                                               expression):  # fmt: skip
    root = str(tmp_path_factory.mktemp("store"))
    # small CommitLog files, so a read spans several of them
    with MessageStore.open(root, mapped_file_size_commit_log=4096) as store:
        for i, body in enumerate(bodies):
            store.put("T", 0, body, tags=tags[i])
        store.dispatch()
        cfg = store.config
        reader = StoreReader(root, cfg.mapped_file_size_commit_log, cfg.consume_queue_file_size)
        try:
            n = len(bodies)
            start = min(start, n)
            codes = parse_tag_filter(expression)
            wanted = None if codes is None else frozenset(t.strip() for t in expression.split("||"))
            msgs, next_a = reader.read_queue("T", 0, start, n, count, codes)
            if wanted is not None:
                msgs = [m for m in msgs if m.tags in wanted]
            batch, next_b = reader.read_queue_bulk("T", 0, start, n, count, codes, wanted)
        finally:
            reader.close()
    assert next_a == next_b
    assert list(batch) == [m.body for m in msgs]
    assert batch.queue_offsets.tolist() == [m.queue_offset for m in msgs]
    assert batch.store_timestamps.tolist() == [m.store_timestamp for m in msgs]
    assert batch.body_offsets[0] == 0 and np.all(np.diff(batch.body_offsets) > 0)
    assert (batch.topic, batch.queue_id) == ("T", 0)


def test_records_far_apart_are_each_their_own_message(tmp_path):
    """Another queue's records fill most of the span a read covers: each record is copied
    on its own (not the whole span), and each message still decodes its own record, by
    both the untagged read (one kernel call per CommitLog file) and the tag-filtered one."""
    root = str(tmp_path)
    with MessageStore.open(root, mapped_file_size_commit_log=1 << 20) as store:
        for i in range(3):
            store.put("T", 0, f"q0-{i}".encode(), tags="A")
            for j in range(60):  # ~120 KB of queue 1 between two records of queue 0
                store.put("T", 1, bytes([j + 1]) * 2000)
        store.dispatch()
        cfg = store.config
        reader = StoreReader(root, cfg.mapped_file_size_commit_log, cfg.consume_queue_file_size)
        try:
            for codes in (None, parse_tag_filter("A")):
                msgs, next_offset = reader.read_queue("T", 0, 0, 3, 32, codes)
                assert next_offset == 3
                assert [m.body for m in msgs] == [b"q0-0", b"q0-1", b"q0-2"]
                assert [(m.topic, m.queue_id, m.queue_offset, m.tags) for m in msgs] == [
                    ("T", 0, i, "A") for i in range(3)
                ]
                phys = [m.physical_offset for m in msgs]
                assert phys[1] - phys[0] > 120_000 and phys[2] - phys[1] > 120_000
                assert [parse_offset_msg_id(m.offset_msg_id)[1] for m in msgs] == phys
            msgs, _ = reader.read_queue("T", 1, 58, 180, 4)
            assert [m.body for m in msgs] == [bytes([j + 1]) * 2000 for j in (58, 59, 0, 1)]
            assert [m.queue_offset for m in msgs] == [58, 59, 60, 61]
        finally:
            reader.close()
