"""StoreReader: the bulk read gives the same messages as the per-message read."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
