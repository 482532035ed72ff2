"""The shared-memory descriptors: segments, topic table, queue table, registry, counters."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shmq.errors import ShmqError
from shmq.ipc import counters as cn
from shmq.ipc import queue_table as qt
from shmq.ipc import registry as rg
from shmq.ipc import ring
from shmq.ipc import topic_table as tt
from shmq.ipc.segment import (
    Segment,
    create_semaphore,
    names_with_prefix,
    new_prefix,
    post,
    unlink_prefix,
    wait,
)


@pytest.fixture
def prefix():
    p = new_prefix()
    yield p
    unlink_prefix(p)
    assert names_with_prefix(p) == []


def test_segment_create_attach_unlink(prefix):
    seg = Segment.create(prefix + ".a", 4096)
    other = Segment.attach(prefix + ".a")
    seg.words[3] = 42
    assert other.words[3] == 42
    with pytest.raises(ShmqError, match="exists"):
        Segment.create(prefix + ".a", 4096)
    other.close()
    seg.destroy()
    with pytest.raises(ShmqError):
        Segment.attach(prefix + ".a")


def test_semaphore_post_and_timeout(prefix):
    sem = create_semaphore(prefix + ".s")
    assert not wait(sem, 0.01)
    post(sem)
    assert wait(sem, 0.01)
    sem.close()
    assert any(n.startswith("sem:") for n in names_with_prefix(prefix))


def test_topic_table_round_trip(prefix):
    seg = Segment.create(prefix + ".t", tt.segment_size(8))
    tt.init(seg.words, 8)
    topics = {"A": (8, 8, 6), "B": (1, 2, 4)}
    tt.publish_topics(seg.buf, seg.words, topics)
    version, read = tt.read_topics(seg.buf, seg.words)
    assert version % 2 == 0
    assert read == {b"A": (8, 8, 6), b"B": (1, 2, 4)}
    tt.publish_topics(seg.buf, seg.words, {"B": (1, 1, 6)})
    assert tt.read_topics(seg.buf, seg.words)[1] == {b"B": (1, 1, 6)}
    with pytest.raises(ShmqError, match="slots"):
        tt.publish_topics(seg.buf, seg.words, {f"T{i}": (1, 1, 6) for i in range(9)})
    seg.words[tt.VERSION] += 1  # a publisher that died mid-update leaves the version odd
    with pytest.raises(ShmqError, match="mid-update"):
        tt.read_topics(seg.buf, seg.words, timeout=0.05)
    seg.destroy()


def test_clients_attach_broker_tables_read_only(prefix):
    seg = Segment.create(prefix + ".ro", 4096)
    view = Segment.attach(prefix + ".ro", readonly=True)
    seg.words[3] = 7
    assert view.words[3] == 7
    with pytest.raises(ValueError, match="read-only"):
        view.words[3] = 8  # a client's stray write cannot change the broker's counters
    view.close()
    seg.destroy()


def test_queue_table_directory_and_maxima(prefix):
    seg = Segment.create(prefix + ".q", qt.segment_size(4))
    qt.init(seg.words, 4)
    reader = qt.QueueDirectory(seg.buf, seg.words)
    assert reader.slot(b"T", 0) == -1
    slots = [qt.add_queue(seg.buf, seg.words, b"T", q) for q in range(3)]
    assert slots == [0, 1, 2]
    qt.max_offsets(seg.buf)[1] = 77
    assert reader.slot(b"T", 1) == 1
    assert reader.queues_of(b"T") == {0: 0, 1: 1, 2: 2}
    assert int(qt.max_offsets(seg.buf)[reader.slot(b"T", 1)]) == 77
    qt.add_queue(seg.buf, seg.words, b"U", 0)
    with pytest.raises(ShmqError, match="maxQueueSlots"):
        qt.add_queue(seg.buf, seg.words, b"U", 1)
    seg.destroy()


_WORD = st.integers(-(1 << 63), (1 << 63) - 1)


@settings(max_examples=300, deadline=None)
@given(
    line=st.lists(_WORD, min_size=2 * rg.W, max_size=2 * rg.W),
    changed=st.sets(st.integers(-3, 40), max_size=6),
    small=st.lists(st.integers(-3, 40), min_size=2 * rg.W, max_size=2 * rg.W),
)
def test_whatever_a_client_writes_in_its_line_reput_reads_a_bounded_answer(line, changed, small):
    """A consumer line is the client's to write, hostile or not: reput reads any words in
    it (huge or negative counts, a sequence word in any state, slot numbers of any size)
    without an error, never past the line (the words after it are a changed slot), and
    wakes the parked count it read or nobody, as the line's rules say. Half the lines have
    small words, so watch lists that match occur."""
    base = 3 * rg.W  # line A of the slot is the supervisor's, B-C the client's
    changed = changed | {99}
    for words in (line, small):
        buf = np.full(base + 4 * rg.W, 99, dtype=np.int64)  # after the slot: a changed slot
        buf[base + rg.W : base + 3 * rg.W] = words
        parked, n, seq = (int(buf[base + k]) for k in (rg.PARKED, rg.N_WATCH, rg.WATCH_SEQ))
        watched = buf[base + rg.WATCH : base + rg.WATCH + max(0, min(n, rg.MAX_WATCH))]
        wakes = n < 0 or seq % 2 == 1 or any(int(slot) in changed for slot in watched)
        expected = parked if parked > 0 and wakes else 0
        for view in (buf, memoryview(buf)):
            assert rg.wants_wake(view, base, changed) == expected
        rg.set_watch(buf, base, sorted(changed)[: rg.MAX_WATCH])  # the client's own write
        assert int(buf[base + rg.WATCH_SEQ]) % 2 == 0
        assert rg.wants_wake(buf, base, changed) == max(parked, 0)


class _RewrittenWhileRead:
    """A consumer's registry words that another thread of the consumer rewrites (parking
    on another queue) right after reput has read the watch count: reput then reads the
    count of the old list and the slots of the new one."""

    def __init__(self, words, base, new_slots):
        self.words, self.base, self.new_slots = words, base, new_slots

    def __getitem__(self, key):
        value = self.words[key]
        if key == self.base + rg.N_WATCH and self.new_slots is not None:
            slots, self.new_slots = self.new_slots, None
            rg.set_watch(self.words, self.base, slots)
        return value


def test_a_watch_list_rewritten_while_reput_reads_it_still_wakes_the_parked(prefix):
    """Thread A parks on queue slot 9; thread B of the same process then parks on slot 3,
    and the line becomes the sorted union [3, 9]. Reput reading the old count (1) and the
    new first slot (3) would see [3] alone: a message on 9 would wake nobody until A's
    park timed out. The sequence word makes that read wake the process."""
    seg = Segment.create(prefix + ".r", rg.segment_size(1, 1))
    try:
        rg.init(seg.words, 1, 1)
        base = rg.consumer_base(1, 0)
        rg.set_slot(seg.words, base, rg.ACTIVE, os.getpid(), 1)
        rg.set_watch(seg.words, base, [9])
        seg.words[base + rg.PARKED] = 1
        torn = _RewrittenWhileRead(seg.words, base, [3, 9])
        seg.words[base + rg.PARKED] = 2
        assert rg.wants_wake(torn, base, {9}) == 2
        assert rg.wants_wake(seg.words, base, {9}) == 2  # the settled list says so too
        assert rg.wants_wake(seg.words, base, {5}) == 0
    finally:
        seg.destroy()


def test_registry_watch(prefix):
    seg = Segment.create(prefix + ".r", rg.segment_size(2, 2))
    rg.init(seg.words, 2, 2)
    base = rg.consumer_base(2, 1)
    rg.set_slot(seg.words, base, rg.ACTIVE, os.getpid(), 5)
    changed = {3}  # queue-table slots reput just advanced
    rg.set_watch(seg.words, base, [1, 2])
    assert not rg.wants_wake(seg.words, base, changed)  # not parked
    seg.words[base + rg.PARKED] = 2  # two threads of the consumer parked
    assert not rg.wants_wake(seg.words, base, changed)
    rg.set_watch(seg.words, base, [3])
    assert rg.wants_wake(seg.words, base, changed) == 2
    rg.set_watch(seg.words, base, None)
    assert rg.wants_wake(seg.words, base, {7}) == 2
    seg.words[base + rg.N_WATCH] = 1 << 40  # a scribbled watch count reads no further
    assert rg.wants_wake(seg.words, base, changed) in (0, 2)
    mv = memoryview(seg.mm).cast("q")  # reput reads them through a memoryview
    assert rg.wants_wake(mv, base, changed) in (0, 2)
    rg.set_watch(seg.words, base, [-5, 3])  # a scribbled slot is only looked up
    assert rg.wants_wake(mv, base, changed) == 2
    seg.words[base + rg.WATCH_SEQ] = (1 << 63) - 1  # a scribbled sequence: no overflow
    rg.set_watch(seg.words, base, [3])
    assert rg.wants_wake(mv, base, changed) == 2
    mv.release()
    rg.set_slot(seg.words, rg.producer_base(0), rg.ACTIVE, 1, 9)
    assert rg.active_producers(seg.words, 2) == [(0, 9, rg.ACTIVE)]
    seg.words[rg.PRODUCERS] = 1 << 40  # a client scribbled the count: agents ignore it
    assert rg.active_producers(seg.words, 2) == [(0, 9, rg.ACTIVE)]
    seg.destroy()


def test_ring_journal_resume_point(prefix):
    seg = Segment.create(prefix + ".ring", ring.segment_size(1 << 16, 16))
    ring.init(seg.words, 1 << 16, 16)
    assert ring.geometry(seg.words) == (1 << 16, 16)
    ring.publish_head(seg.words, 100, 2)
    ring.write_journal(seg.words, 300, 5, 5000)
    # the append the journal describes was not published: resume from the head
    assert ring.resume_point(seg.words, 4999) == (100, 2)
    # it was: the records are in the CommitLog, skip them
    assert ring.resume_point(seg.words, 5000) == (300, 5)
    with pytest.raises(ShmqError, match="power of two"):
        ring.check_geometry(1000, 16)
    seg.destroy()


def test_counters_topic_request(prefix):
    seg = Segment.create(prefix + ".c", cn.SIZE)
    cn.init(seg.words, os.getpid(), 0)
    cn.check(seg.words)
    seq = cn.write_topic_request(seg.buf, seg.words, b"NewTopic", 4)
    assert cn.read_topic_request(seg.buf, seg.words) == (seq, b"NewTopic", 4)
    seg.words[cn.MAGIC] = 0
    with pytest.raises(ShmqError, match="magic"):
        cn.check(seg.words)
    seg.destroy()
