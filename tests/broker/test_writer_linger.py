"""The writer stays awake after answering a producer whose sync sends wait for their answers
(``ANSWER_WAITERS`` of its registry line, ``idleLingerUs``): such a sender comes back with
its next message in about its own round trip, and a writer parked by then costs both sides
a wake-up per message."""

from __future__ import annotations

import time

from waiting import wait_for

from shmq.client.producer.producer import Producer
from shmq.ipc import counters as cn
from shmq.ipc import registry as rg
from shmq.message import Message

TOPIC = "Linger"
SHARED_BROKER = {"idle_linger_us": 1_000_000}  # a second: far longer than any round trip


def waiters(rp) -> int:
    return rp.reg_w[rp.reg_base + rg.ANSWER_WAITERS]


def test_a_sync_send_counts_itself_among_the_waiters_until_answered(shared_broker):
    _, namesrv = shared_broker
    with Producer("linger-count", namesrv) as producer:
        producer.send(Message(TOPIC, b"first"))
        [link] = producer._links.current.values()
        rp = link.ring
        seen = []
        answer_words = rp.answer_words

        def spy(seq: int):
            seen.append(waiters(rp))
            return answer_words(seq)

        rp.answer_words = spy
        producer.send(Message(TOPIC, b"sync"))
        producer.send_oneway(Message(TOPIC, b"oneway"))
        producer.send_async(Message(TOPIC, b"async")).result(10)
        assert seen == [1, 0]  # the sync send's wait, then the async completion thread's
        assert waiters(rp) == 0


def wait_parks(words, timeout: float = 30.0) -> None:
    """Until the writer parks once more than it had now."""
    before = int(words[cn.WRITER_PARKS])
    wait_for(lambda: int(words[cn.WRITER_PARKS]) > before, timeout=timeout,
             what="the writer to park")  # fmt: skip


def answered_oneway(producer: Producer, rp, body: bytes) -> None:
    producer.send_oneway(Message(TOPIC, body))
    seq = rp.seq - 1
    wait_for(lambda: rp.answered(seq), what="the writer to answer")


def test_the_writer_lingers_after_answering_a_waiting_producer(shared_broker):
    broker, namesrv = shared_broker
    words = broker.counters.words
    with Producer("linger-writer", namesrv) as producer:
        producer.send(Message(TOPIC, b"first"))
        [link] = producer._links.current.values()
        rp = link.ring
        wait_parks(words)  # the sync send's linger ends
        answered_oneway(producer, rp, b"nobody waits")
        wait_parks(words, timeout=0.8)  # at once: long before the 1 s linger would end
        rp.publish_answer_waiters(1)  # as a sync sender does
        answered_oneway(producer, rp, b"answered to a waiter")
        lingering = int(words[cn.WRITER_PARKS])
        time.sleep(0.3)  # a test of absence, well inside the 1 s linger
        assert int(words[cn.WRITER_PARKS]) == lingering and not words[cn.WRITER_PARKED]
        rp.publish_answer_waiters(0)
        wait_parks(words)  # the linger ends: it parks again


def test_any_answer_waiters_word_never_stops_the_writer(shared_broker):
    """The word is the client's: whatever it holds, the writer only stays awake a while."""
    _, namesrv = shared_broker
    with Producer("linger-hostile", namesrv) as bad, Producer("linger-good", namesrv) as good:
        bad.send(Message(TOPIC, b"first"))
        [link] = bad._links.current.values()
        for word in (-1, 1 << 62, -(1 << 63)):
            link.ring.publish_answer_waiters(word)
            answered_oneway(bad, link.ring, b"after a hostile word")
            assert good.send(Message(TOPIC, b"unharmed")).send_status.name == "SEND_OK"
