"""The process queue: the committed offset never passes an unconsumed message."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from shmq.client.consumer.process_queue import ProcessQueue
from shmq.codec.record import record_size
from shmq.message import MessageBatch, MessageExt


def msg(offset: int, body: bytes = b"x") -> MessageExt:
    size = record_size(len(body), 1, 0)  # what the process queue counts
    return MessageExt("T", 0, offset, offset * 100, body, b"", 0, 0, b"\0" * 8, b"\0" * 8,
                      store_size=size)  # fmt: skip


def test_commit_offset_is_smallest_outstanding_then_max_plus_one():
    pq = ProcessQueue(10)
    assert pq.commit_offset() == -1
    msgs = [msg(o) for o in range(10, 15)]
    pq.put(msgs)
    assert (pq.count, pq.size, pq.span()) == (5, 5 * record_size(1, 1, 0), 4)
    assert pq.remove([msgs[1], msgs[3]]) == 10
    assert pq.remove([msgs[0]]) == 12
    assert pq.span() == 2
    assert pq.remove([msgs[2], msgs[4]]) == 15
    assert (pq.count, pq.size, pq.span()) == (0, 0, 0)
    pq.put([msgs[4]])  # a re-put of a consumed offset below max is ignored for max
    assert pq.remove([msgs[4]]) == 15


@given(
    st.integers(1, 60).flatmap(
        lambda n: st.tuples(st.just(n), st.permutations(range(n)), st.integers(0, n))
    )
)
def test_commit_never_skips_an_unconsumed_message(case):
    n, order, k = case
    pq = ProcessQueue(0)
    msgs = [msg(o, b"ab") for o in range(n)]
    pq.put(msgs)
    done = set(order[:k])
    for o in order[:k]:
        committed = pq.remove([msgs[o]])
    outstanding = set(range(n)) - done
    expected = min(outstanding) if outstanding else n
    assert pq.commit_offset() == expected
    if k:
        assert committed == expected
    assert pq.count == len(outstanding)
    assert pq.size == record_size(2, 1, 0) * len(outstanding)
    assert pq.span() == (max(outstanding) - min(outstanding) if outstanding else 0)


def batch(first: int, n: int) -> MessageBatch:
    offsets = np.arange(first, first + n, dtype=np.int64)
    bodies = np.zeros(2 * n, dtype=np.uint8)
    return MessageBatch("T", 0, bodies, np.arange(n + 1, dtype=np.int64) * 2, offsets, offsets)


def test_bulk_batches_are_one_entry_each_and_commit_in_order():
    pq = ProcessQueue(0)
    a, b = batch(0, 100), batch(100, 50)
    pq.put_batch(a)
    pq.put_batch(b)
    pq.put_batch(a)  # pulled again: ignored
    assert (pq.count, pq.size, pq.span()) == (150, 300, 149)
    assert pq.remove_batch(b) == 0  # the first batch is still being consumed
    assert (pq.count, pq.span()) == (100, 99)
    assert pq.remove_batch(a) == 150
    assert (pq.count, pq.size, pq.commit_offset()) == (0, 0, 150)
