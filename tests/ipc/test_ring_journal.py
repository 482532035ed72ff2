"""The ring's journal across a writer's death, without processes: what a dead writer
stored from a ring is answered when the ring is fenced (``settle_journal``), a journal
whose write offset was not published is not trusted, and one half written (the writer
killed between its stores) is never taken for a valid one."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from shmq.ipc import ring

CAPACITY, SLOTS = 1 << 16, 1 << 10


def fresh() -> np.ndarray:
    words = np.zeros(ring.segment_size(CAPACITY, SLOTS) // 8, dtype=np.int64)
    ring.init(words, CAPACITY, SLOTS)
    return words


def test_a_fenced_ring_answers_what_its_dead_writer_stored():
    words = fresh()
    ring.publish_head(words, 1000, 10)  # answered so far
    ring.write_journal(words, 5000, 50, 777_000)  # the next pass: records up to 5000 stored
    ring.settle_journal(words, published_write_offset=777_000)  # the pass's offset was out
    assert ring.load_head(words) == (5000, 50)


def test_a_journal_whose_write_offset_was_not_published_is_not_trusted():
    words = fresh()
    ring.publish_head(words, 1000, 10)
    ring.write_journal(words, 5000, 50, 777_000)
    ring.settle_journal(words, published_write_offset=776_999)  # cut back: not stored
    assert ring.load_head(words) == (1000, 10)


@given(st.integers(0, 2))
def test_a_half_written_journal_is_never_trusted(stores_done):
    """The writer killed after ``stores_done`` of a new entry's stores: the old entry's
    published write offset never vouches for the new head and seq."""
    words = fresh()
    ring.publish_head(words, 1000, 10)
    ring.write_journal(words, 3000, 30, 500_000)  # an older pass, published and answered
    ring.publish_head(words, 3000, 30)
    # the new entry's stores, in write_journal's order, cut after ``stores_done``
    steps = [(ring.COMMIT_WOFF, 0), (ring.COMMIT_HEAD, 6000), (ring.COMMIT_SEQ, 60)]
    for index, value in steps[: stores_done + 1]:
        words[index] = value
    assert ring.resume_point(words, published_write_offset=500_000) == (3000, 30)
