"""The process queue: the committed offset never passes an unconsumed message."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from shmq.client.process_queue import ProcessQueue
from shmq.message import MessageExt


def msg(offset: int, body: bytes = b"x") -> MessageExt:
    return MessageExt("T", 0, offset, offset * 100, body, b"", 0, 0, b"\0" * 8, b"\0" * 8)


def test_commit_offset_is_smallest_outstanding_then_max_plus_one():
    pq = ProcessQueue(10)
    assert pq.commit_offset() == -1
    msgs = [msg(o) for o in range(10, 15)]
    pq.put(msgs)
    assert (pq.count, pq.size, pq.span()) == (5, 5, 4)
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
    assert pq.count == len(outstanding) and pq.size == 2 * len(outstanding)
    assert pq.span() == (max(outstanding) - min(outstanding) if outstanding else 0)
