"""A producer ring is written by its producer, so anything in it may be wrong: absurd
sequence numbers, a tail that runs ahead, garbage records, scribbled journal words, a wrong
body CRC. At worst that producer's ring is fenced or its records refused; the writer keeps
running, every other producer keeps sending, and every stored record carries the CRC of its
body. The broker runs as a real process (with ``checkProducerCrc`` on, as well as with the
default, off); the bad producer is a real Producer whose ring words the test overwrites."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from waiting import wait_for

from e2e_helpers import cluster, shm_entries
from shmq.client.producer.producer import Producer
from shmq.client.transport.queue_reader import QueueReader
from shmq.client.types import SendStatus
from shmq.codec import record as rec
from shmq.errors import ShmqError
from shmq.ipc import counters as cn
from shmq.ipc import ring
from shmq.ipc.segment import Segment
from shmq.message import Message
from shmq.names import DELETED_TOPIC_LOG
from spec_decoder import decode_record

TOPIC = "Hostile"


@pytest.fixture(scope="module", params=[True, False], ids=["check-crc", "default"])
def c(request, tmp_path_factory):
    """A broker that verifies producer CRCs (``checkProducerCrc=true``) and one with the
    default (off): a bad ring must harm neither."""
    before = shm_entries()
    conf = {"checkProducerCrc": "true"} if request.param else {}
    with cluster(tmp_path_factory.mktemp("hostile"), **conf) as c:
        c.check_crc = request.param
        c.create_topic(TOPIC, 2)
        yield c
    assert shm_entries() - before == set()


@pytest.fixture(scope="module")
def good(c):
    with Producer("good", c.namesrv, send_timeout=10) as producer:
        yield producer


def ring_of(producer: Producer):
    """The RingProducer of ``producer``'s link to the only broker (after one send)."""
    [link] = producer._links.current.values()
    return link.ring


def writer_state(c) -> tuple[int, int]:
    writer = c.runtime_info()["agents"]["writer"]
    return writer["pid"], writer["restarts"]


def settle(rp) -> None:
    """Until the writer consumed what the ring published, fenced it, or parked twice since
    now (a whole pass over the rings after the change, which left this one as it was)."""
    parks = int(rp.counters[cn.WRITER_PARKS])
    wait_for(lambda: rp.words[ring.FENCED]
             or int(rp.words[ring.HEAD]) == int(rp.words[ring.TAIL])
             or int(rp.counters[cn.WRITER_PARKS]) > parks + 1,
             what="the writer to deal with the ring")  # fmt: skip


def assert_others_unharmed(c, good: Producer, writer_before: tuple[int, int]) -> None:
    assert good.send(Message(TOPIC, b"still fine")).send_status is SendStatus.SEND_OK
    assert writer_state(c) == writer_before, "the writer agent died"
    assert c.broker_proc.poll() is None


def test_an_absurd_seq_tail_fences_only_that_ring(c, good):
    good.send(Message(TOPIC, b"warm"))
    before = writer_state(c)
    with Producer("bad", c.namesrv, send_timeout=10) as bad:
        assert bad.send(Message(TOPIC, b"mine")).send_status is SendStatus.SEND_OK
        rp = ring_of(bad)
        local = int(rp.words[ring.TAIL]) & (rp.capacity - 1)
        rp.data[local : local + 64] = 0xAB  # not a record
        rp.words[ring.SEQ_TAIL] = 1 << 60
        rp.words[ring.TAIL] = int(rp.words[ring.TAIL]) + 64
        settle(rp)
        assert int(rp.words[ring.FENCED]) == ring.FENCE_SEQ
        assert rp.fence_reason() == ring.FENCES[ring.FENCE_SEQ]
        assert_others_unharmed(c, good, before)
        # the fenced producer registers again, with a new ring, and sends
        assert bad.send(Message(TOPIC, b"again")).send_status is SendStatus.SEND_OK
        assert ring_of(bad) is not rp


def test_a_tail_beyond_one_ring_is_fenced(c, good):
    good.send(Message(TOPIC, b"warm"))
    before = writer_state(c)
    with Producer("bad-tail", c.namesrv, send_timeout=10) as bad:
        bad.send(Message(TOPIC, b"mine"))
        rp = ring_of(bad)
        rp.words[ring.SEQ_TAIL] = int(rp.words[ring.SEQ_TAIL]) + 1
        rp.words[ring.TAIL] = int(rp.words[ring.HEAD]) + 8 * rp.capacity
        settle(rp)
        assert int(rp.words[ring.FENCED]) == ring.FENCE_TAIL
        assert_others_unharmed(c, good, before)


WORDS = (ring.TAIL, ring.SEQ_TAIL, ring.HEAD, ring.SEQ_HEAD, ring.COMMIT_HEAD, ring.COMMIT_SEQ,
         ring.COMMIT_WOFF)  # fmt: skip
word_values = st.one_of(
    st.integers(-(1 << 63), (1 << 63) - 1),
    st.integers(-4, 1 << 20),
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    writes=st.lists(st.tuples(st.sampled_from(WORDS), word_values), min_size=1, max_size=4),
    garbage=st.binary(min_size=0, max_size=512),
)
def test_any_ring_words_never_stop_the_broker_nor_another_producer(c, good, writes, garbage):
    good.send(Message(TOPIC, b"warm"))
    before = writer_state(c)
    with Producer("fuzzed", c.namesrv, send_timeout=5) as bad:
        bad.send(Message(TOPIC, b"mine"))
        rp = ring_of(bad)
        local = int(rp.words[ring.TAIL]) & (rp.capacity - 1)
        n = min(len(garbage), rp.capacity - local)
        rp.data[local : local + n] = np.frombuffer(garbage[:n], dtype=np.uint8)
        for word, value in writes:
            rp.words[word] = value
        settle(rp)
        assert_others_unharmed(c, good, before)
        try:  # its own sends succeed (a new ring if fenced) or fail with a clear error
            bad.send(Message(TOPIC, b"after"))
        except ShmqError as exc:
            assert str(exc)


def test_the_writer_checks_a_ring_geometry_against_its_segment():
    words = np.zeros(ring.DATA // 8, dtype=np.int64)
    ring.init(words, 1 << 16, 16)
    size = ring.segment_size(1 << 16, 16)
    assert ring.geometry(words, size) == (1 << 16, 16)
    words[ring.CAPACITY] = 1 << 40  # larger than the segment: reading it would be out of bounds
    with pytest.raises(ShmqError, match="does not fit its segment"):
        ring.geometry(words, size)
    words[ring.CAPACITY] = (1 << 16) + 1
    with pytest.raises(ShmqError, match="power of two"):
        ring.geometry(words, size)


def test_a_writer_that_dies_twice_on_one_ring_gets_that_ring_fenced(c, good):
    """The writer names the ring it reads in the counters; when it dies there twice within a
    minute the supervisor fences that ring rather than let it take the writer down again.
    (The test names the ring itself, then kills the parked writer with SIGKILL.)"""
    good.send(Message(TOPIC, b"warm"))
    with Producer("doomed", c.namesrv, send_timeout=10) as bad:
        bad.send(Message(TOPIC, b"mine"))
        [link] = bad._links.current.values()
        slot, gen = link.broker.info["slot"], link.broker.info["gen"]
        rp = link.ring
        counters = Segment.attach(link.broker.info["counters"])  # clients map it read-only
        try:
            for _ in range(2):
                pid, _ = writer_state(c)
                counters.words[cn.WRITER_RING_GEN] = gen
                counters.words[cn.WRITER_RING] = slot + 1
                os.kill(pid, signal.SIGKILL)
                wait_for(lambda pid=pid: writer_state(c)[0] not in (pid, None, 0),
                         what="the writer restarted")  # fmt: skip
        finally:
            counters.close()
        assert rp.fence_reason() == ring.FENCES[ring.FENCE_CRASH]
        assert good.send(Message(TOPIC, b"others go on")).send_status is SendStatus.SEND_OK
        assert bad.send(Message(TOPIC, b"new ring")).send_status is SendStatus.SEND_OK
        assert c.broker_proc.poll() is None


def inject(rp, body: bytes, *, crc: int = -1, break_framing: bool = False,
           topic_name: bytes = TOPIC.encode()) -> int:  # fmt: skip
    """Encode one record at the ring's tail as a producer does (``crc``: the BODYCRC to
    claim, -1 for the right one), optionally with broken framing (properties not ending in
    0x02), publish it and return its sequence number. The producer must be idle."""
    props = np.frombuffer(b"TAGS\x01t\x02", dtype=np.uint8)
    data = np.frombuffer(body, dtype=np.uint8)
    topic = np.frombuffer(topic_name, dtype=np.uint8)
    fields = np.zeros(1, dtype=rec.ENCODE_ROW)
    fields["body_crc"][0] = crc
    local = rp.tail & (rp.capacity - 1)
    end = rec.encode_batch(rp.data, local, rp.tail - local, topic, data,
                           np.array([0, len(body)], dtype=np.int64), props,
                           np.array([0, len(props)], dtype=np.int64), fields)  # fmt: skip
    if break_framing:
        rp.data[end - 1] = ord("X")
    seq = rp.seq
    rp.tail += int(end) - local
    rp.seq += 1
    ring.publish_tail(rp.words, rp.tail, rp.seq)
    rp.writer_sem.release()
    return seq


def stored_record(c, phys: int) -> dict | None:
    """The record at CommitLog offset ``phys`` as the independent decoder reads it from the
    file (None unless it validates, its BODYCRC included)."""
    size = 1 << 20  # the cluster's mappedFileSizeCommitLog
    start = phys - phys % size
    with open(os.path.join(c.store, "commitlog", f"{start:020d}"), "rb") as f:
        data = f.read()
    return decode_record(data, phys - start, start)


def test_a_record_with_broken_framing_is_refused_whatever_checks_crc(c, good):
    good.send(Message(TOPIC, b"warm"))
    before = writer_state(c)
    with Producer("bad-frame", c.namesrv, send_timeout=10) as bad:
        bad.send(Message(TOPIC, b"mine"))
        rp = ring_of(bad)
        answer = rp.wait_answer(inject(rp, b"torn", break_framing=True), time.monotonic() + 10)
        assert (answer.status, answer.reason) == (ring.REJECTED, ring.REASON_CORRUPT)
        assert_others_unharmed(c, good, before)
        assert bad.send(Message(TOPIC, b"after")).send_status is SendStatus.SEND_OK


def test_a_wrong_producer_crc_is_refused_when_checked_and_never_stored(c, good):
    """With checkProducerCrc the record is refused; without, it is stored with the CRC the
    writer computed, so recovery's CRC check can never cut the log there."""
    good.send(Message(TOPIC, b"warm"))
    before = writer_state(c)
    with Producer("bad-crc", c.namesrv, send_timeout=10) as bad:
        bad.send(Message(TOPIC, b"mine"))
        rp = ring_of(bad)
        answer = rp.wait_answer(inject(rp, b"claims a wrong crc", crc=12345),
                                time.monotonic() + 10)  # fmt: skip
        if c.check_crc:
            assert (answer.status, answer.reason) == (ring.REJECTED, ring.REASON_CORRUPT)
        else:
            assert answer.status == ring.SEND_OK
            stored = stored_record(c, answer.physical_offset)
            assert stored is not None and stored["body"] == b"claims a wrong crc"
        right = rp.wait_answer(inject(rp, b"right crc"), time.monotonic() + 10)
        assert right.status == ring.SEND_OK
        assert stored_record(c, right.physical_offset)["body"] == b"right crc"
        assert_others_unharmed(c, good, before)


def test_a_topic_name_no_topic_may_have_is_refused_not_asked_for(c, good):
    """A record may carry a topic of up to 32,767 bytes (magic V2); over RocketMQ's 127 it
    is refused, and never becomes an auto-create request (whose field holds 127 bytes)."""
    good.send(Message(TOPIC, b"warm"))
    before = writer_state(c)
    with Producer("long-topic", c.namesrv, send_timeout=10) as bad:
        bad.send(Message(TOPIC, b"mine"))
        rp = ring_of(bad)
        requests = int(rp.counters[cn.TOPIC_REQUEST_SEQ])
        answer = rp.wait_answer(inject(rp, b"x", topic_name=b"T" * 200), time.monotonic() + 10)
        assert (answer.status, answer.reason) == (ring.REJECTED, ring.REASON_TOPIC_NOT_EXIST)
        assert int(rp.counters[cn.TOPIC_REQUEST_SEQ]) == requests  # nothing was asked for
        assert_others_unharmed(c, good, before)
        assert bad.send(Message(TOPIC, b"after")).send_status is SendStatus.SEND_OK


def test_a_new_topic_after_the_ring_wrapped_is_created_and_stored(c, good):
    """The writer resolves a record's unknown topic by parsing it again at its ring
    position: on any lap, not only the first (it once looped forever past the first)."""
    before = writer_state(c)
    with Producer("wrapped", c.namesrv, send_timeout=10) as producer:
        producer.send(Message(TOPIC, b"mine"))
        rp = ring_of(producer)
        body = np.zeros(1 << 20, dtype=np.uint8)
        offsets = np.arange(0, (1 << 20) + 1, 1 << 10, dtype=np.int64)
        while rp.tail < rp.capacity + (1 << 20):  # well into the second lap
            producer.send_bulk(TOPIC, (body, offsets))
        topic = f"Hostile_New_{c.check_crc}"
        result = producer.send(Message(topic, b"on a later lap"))
        assert result.send_status is SendStatus.SEND_OK
        assert result.message_queue.topic == topic
    assert_others_unharmed(c, good, before)


def test_a_forged_deletion_record_is_refused_and_deletes_nothing(c, good):
    """A ring record to the deletion log (whose records make reput purge a topic) is
    refused as a topic that does not exist: no topic config may name that topic, so
    auto-creation refuses it too; the topic it names keeps its messages."""
    sent = good.send(Message(TOPIC, b"still here"))
    before = writer_state(c)
    with Producer("forger", c.namesrv, send_timeout=10) as bad:
        bad.send(Message(TOPIC, b"mine"))
        rp = ring_of(bad)
        forged = inject(rp, TOPIC.encode(), topic_name=DELETED_TOPIC_LOG.encode())
        answer = rp.wait_answer(forged, time.monotonic() + 10)
        assert (answer.status, answer.reason) == (ring.REJECTED, ring.REASON_TOPIC_NOT_EXIST)
        assert_others_unharmed(c, good, before)
    q = sent.message_queue
    with QueueReader("forger-check", c.namesrv) as reader:
        assert reader.min_offset(q) == 0 and reader.max_offset(q) > sent.queue_offset
