"""Automatic batching of TCP async sends (``tcp_batching``): every future settled once with
its own result, checked against what a consumer reads; delayed messages beside plain ones;
a broker that drops the connection or never answers; a producer closed with sends pending;
and how accumulated sends are split into requests."""

from __future__ import annotations

import re
import socket
import threading
import time
from collections import Counter
from concurrent.futures import wait
from types import SimpleNamespace

import pytest
from bad_peers import closes, sends, silent
from hypothesis import given, settings
from hypothesis import strategies as st

from e2e_helpers import read_all
from shmq import Message
from shmq.client.producer.async_completion import SendFuture
from shmq.client.producer.producer import Producer
from shmq.client.producer.records import TopicRecords, UniqKeys, one_record
from shmq.client.route import BrokerQueues
from shmq.client.transport.send_frames import CHUNK_MESSAGES, SendTemplate
from shmq.client.transport.tcp_batching import AsyncBatches, _Broker, _Queue, batch_body
from shmq.client.types import MessageQueue, SendStatus
from shmq.codec.batch_body import ENTRY_FIXED, decode_batch
from shmq.errors import ClientError, SendError


def settled_once(futures: list) -> Counter:
    """A done-callback on each future, counting how often each is settled."""
    calls: Counter = Counter()
    for i, f in enumerate(futures):
        f.add_done_callback(lambda _f, i=i: calls.update([i]))
    return calls


def check_against_store(broker, topic: str, results: list) -> None:
    """Per queue: offsets contiguous from 0, each one's msg id, offset msg id and body as
    stored there."""
    by_queue: dict[int, list] = {}
    for body, r in results:
        assert r.send_status is SendStatus.SEND_OK
        by_queue.setdefault(r.message_queue.queue_id, []).append((body, r))
    for qid, sent in by_queue.items():
        assert sorted(r.queue_offset for _, r in sent) == list(range(len(sent)))
        stored = read_all(broker, topic, qid, len(sent))
        assert len(stored) == len(sent)
        for body, r in sent:
            m = stored[r.queue_offset]
            assert (m.msg_id, m.body, m.offset_msg_id) == (r.msg_id, body, r.offset_msg_id)


def test_async_sends_from_one_thread_are_batched_in_order(broker):
    broker.create_topic("TcpBatched", 4)
    with Producer("tcp-batch-1", broker.namesrv, transport="tcp") as producer:
        bodies = [b"m%d" % i for i in range(4000)]
        futures = [producer.send_async(Message("TcpBatched", b)) for b in bodies]
        calls = settled_once(futures)
        results = [f.result(30) for f in futures]
        requests = producer.stats()["tcp_async_requests"]
    assert calls == Counter(range(len(futures)))
    assert requests < len(bodies)  # many messages went in one request
    for qid in range(4):  # one thread: each queue's offsets follow the send order
        offsets = [r.queue_offset for r in results if r.message_queue.queue_id == qid]
        assert offsets == list(range(len(offsets)))
    check_against_store(broker, "TcpBatched", list(zip(bodies, results, strict=True)))


def test_async_sends_from_several_threads_keep_each_threads_order(broker):
    broker.create_topic("TcpBatchedThreads", 2)
    sent: list[list] = [[] for _ in range(4)]
    with Producer("tcp-batch-2", broker.namesrv, transport="tcp") as producer:

        def send(t: int) -> None:
            for i in range(1000):
                body = b"t%d-%d" % (t, i)
                sent[t].append((body, producer.send_async(Message("TcpBatchedThreads", body))))

        threads = [threading.Thread(target=send, args=(t,)) for t in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        futures = [f for per_thread in sent for _, f in per_thread]
        calls = settled_once(futures)
        done = [[(body, f.result(30)) for body, f in per_thread] for per_thread in sent]
    assert calls == Counter(range(len(futures)))
    for per_thread in done:
        for qid in range(2):
            offsets = [r.queue_offset for _, r in per_thread if r.message_queue.queue_id == qid]
            assert offsets == sorted(offsets)
    check_against_store(broker, "TcpBatchedThreads", [x for per in done for x in per])


def test_delayed_messages_go_alone_beside_batched_plain_ones(broker):
    broker.create_topic("TcpBatchedDelay", 1)
    with Producer("tcp-batch-3", broker.namesrv, transport="tcp") as producer:
        msgs = [Message("TcpBatchedDelay", b"d%d" % i, delay_level=1 if i % 5 == 0 else 0)
                for i in range(500)]  # fmt: skip
        futures = [producer.send_async(m) for m in msgs]
        results = [f.result(30) for f in futures]
    plain = [(m.body, r) for m, r in zip(msgs, results, strict=True) if not m.delay_level]
    assert [r.queue_offset for _, r in plain] == list(range(len(plain)))
    delayed = {r.msg_id for m, r in zip(msgs, results, strict=True) if m.delay_level}
    assert len(delayed) == 100
    assert all(r.message_queue == MessageQueue("TcpBatchedDelay", "broker-a", 0) for r in results)
    stored = read_all(broker, "TcpBatchedDelay", 0, len(msgs))  # levels are 1 s here
    assert {m.msg_id for m in stored[len(plain) :]} == delayed
    check_against_store(broker, "TcpBatchedDelay", plain)


def test_a_dropped_connection_retries_the_batches_in_flight(broker):
    broker.create_topic("TcpBatchedDrop", 1)
    with Producer("tcp-batch-4", broker.namesrv, transport="tcp") as producer:
        futures = [producer.send_async(Message("TcpBatchedDrop", b"x%d" % i)) for i in range(300)]
        (channel,) = producer._tcp._channels.values()
        channel.sock.shutdown(socket.SHUT_RDWR)  # what a broker closing it looks like
        futures += [producer.send_async(Message("TcpBatchedDrop", b"y%d" % i)) for i in range(300)]
        calls = settled_once(futures)
        done, _ = wait(futures, 30)
    assert len(done) == len(futures) and calls == Counter(range(len(futures)))
    ok = [f.result() for f in futures if f.exception() is None]
    assert ok  # (a request stored before the drop may be stored again by its retry)
    stored = read_all(broker, "TcpBatchedDrop", 0, max(r.queue_offset for r in ok) + 1)
    assert all(stored[r.queue_offset].msg_id == r.msg_id for r in ok)


def test_a_broker_that_closes_fails_every_batched_send(peer):
    tcp, queues, mq = sends(peer(closes).address, retries=2)
    futures = [SendFuture() for _ in range(200)]
    try:
        for f in futures:
            tcp.send_async(queues, mq, record(b"x"), f, time.monotonic())
        calls = settled_once(futures)
        done, _ = wait(futures, 30)
    finally:
        tcp.close()
    assert len(done) == len(futures) and calls == Counter(range(len(futures)))
    assert all(isinstance(f.exception(), SendError) for f in futures)
    assert all(f.attempts == 2 for f in futures)  # retried as a single async send is


def test_closing_with_sends_pending_settles_them_all(peer):
    tcp, queues, mq = sends(peer(silent).address, timeout=0.3)
    futures = [SendFuture() for _ in range(100)]
    for f in futures:
        tcp.send_async(queues, mq, record(b"x"), f, time.monotonic())
    calls = settled_once(futures)
    tcp.close()  # the broker never answers: each request times out, none hangs
    assert all(f.done() for f in futures) and calls == Counter(range(len(futures)))
    errors = {str(f.exception()) for f in futures}  # a timeout, or closed before it came
    assert all(re.search("failed after 1 attempt|did not answer|closed before", e) for e in errors)


def test_sends_still_waiting_when_closed_fail_clearly(peer):
    tcp, queues, mq = sends(peer(silent).address, timeout=1.0)
    futures = [SendFuture() for _ in range(100)]
    for f in futures:
        tcp.send_async(queues, mq, record(b"x"), f, time.monotonic())
    tcp._batches.close(time.monotonic())  # the close deadline passed: nothing more goes out
    waiting = futures[2:]  # two requests of one message each are in flight
    assert all(isinstance(f.exception(0), ClientError) for f in waiting)
    assert "closed before the send to" in str(waiting[0].exception())
    with pytest.raises(ClientError, match="closed"):
        tcp.send_async(queues, mq, record(b"x"), SendFuture(), time.monotonic())
    tcp.close()
    assert all(f.done() for f in futures)


def test_closing_the_producer_answers_what_it_accumulated(broker):
    broker.create_topic("TcpBatchedClose", 1)
    producer = Producer("tcp-batch-5", broker.namesrv, transport="tcp")
    futures = [producer.send_async(Message("TcpBatchedClose", b"c%d" % i)) for i in range(3000)]
    producer.close()
    assert all(f.done() for f in futures)
    assert [f.result().queue_offset for f in futures] == list(range(3000))


# -- splitting accumulated sends into requests --------------------------------------------

TOPIC = TopicRecords("T", b"T")
KEYS = UniqKeys()


def record(body: bytes, **kw) -> tuple:
    return one_record(TOPIC, Message("T", body, **kw), body, KEYS)


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 3000), min_size=1, max_size=2500),
    limit=st.integers(200, 20_000),
    tags=st.sampled_from([None, "TagA"]),
)
def test_requests_respect_the_chunk_and_size_limits_and_keep_order(sizes, limit, tags):
    sends_ = SimpleNamespace(max_batch_body=limit, send_timeout=1.0)
    batches = AsyncBatches(sends_, 1 << 30)
    q = _Queue(BrokerQueues("b", "h:1", 1, 1, 6), MessageQueue("T", "b", 0), _Broker(),
               SendTemplate("g", "T", 4))  # fmt: skip
    ones = [record(bytes([65 + i % 26]) * n, tags=tags, flag=i % 3) for i, n in enumerate(sizes)]
    q.waiting.extend((one, None, 0.0) for one in ones)
    taken, requests = [], 0
    while q.waiting:
        request = batches._take(q)
        requests += 1
        entries = request.entries
        size = sum(ENTRY_FIXED + len(e[0][5]) + len(e[0][6]) - q.template.head_len for e in entries)
        assert len(entries) <= CHUNK_MESSAGES
        assert len(entries) == 1 or size <= limit
        if q.waiting:  # it stopped at a limit
            nxt = ENTRY_FIXED + len(q.waiting[0][0][5]) + len(q.waiting[0][0][6])
            assert len(entries) == CHUNK_MESSAGES or size + nxt - q.template.head_len > limit
        taken += [e[0] for e in entries]
        if len(entries) > 1:
            decoded = decode_batch(batch_body(q.template, entries))
            assert decoded.bodies.tobytes() == b"".join(e[0][5] for e in entries)
            assert decoded.props.tobytes() == b"".join(
                e[0][6][q.template.head_len :] for e in entries
            )
            assert decoded.flags.tolist() == [e[0][3] for e in entries]
    assert taken == ones and q.in_flight == requests
