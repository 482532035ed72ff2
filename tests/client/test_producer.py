"""The Producer against real processes (a namesrv and two brokers of one cluster): queue
selection, sharding keys and selectors, pipelined async sends, oneway, client-side checks,
auto-created topics, route refresh, failover when a broker stops; and its retry rules with
the attempt function replaced (no processes)."""

from __future__ import annotations

import collections
import logging
import os
import re
import signal
import threading
import time

import pytest
from waiting import wait_for

from e2e_helpers import cluster, shm_entries
from shmq.client.consumer.lite_pull import PullConsumer
from shmq.client.producer.producer import Producer, select_by_hash
from shmq.client.producer.publish_info import TopicPublishInfo
from shmq.client.route import BrokerQueues
from shmq.client.transport.queue_reader import QueueReader
from shmq.client.types import MessageQueue, SendResult, SendStatus
from shmq.codec.jhash import java_hash
from shmq.errors import (
    AttemptError,
    ClientError,
    ConfigError,
    InvalidMessageError,
    InvalidPropertyError,
    InvalidTopicError,
    MessageTooLargeError,
    NoRouteError,
    SendError,
    SendTimeoutError,
)
from shmq.ipc import ring
from shmq.message import Message, parse_offset_msg_id
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RequestCode


def broker_pids(c) -> set[int]:
    return {b.proc.pid for b in c.brokers.values() if b.proc is not None}


def shm_left(before: set[str], pids: set[int]) -> set[str]:
    """``shm_entries() - before``, without the entries of other processes: other test runs
    on this host may create (and remove) their own meanwhile. An entry whose name does not
    tell its creator counts."""
    left = set()
    for name in shm_entries() - before:
        owner = re.search(r"shmq-(\d+)-", name)
        if owner is None or int(owner.group(1)) in pids:
            left.add(name)
    return left


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """broker-a and broker-b of one cluster (topics auto-created on first send)."""
    before = shm_entries()
    with cluster(tmp_path_factory.mktemp("pair"), defaultTopicQueueNums=4) as c:
        c.add_broker("broker-b")
        pids = broker_pids(c)
        yield c
    assert shm_left(before, pids) == set()


def topic_on_both(c, topic: str, queues: int) -> list[MessageQueue]:
    c.create_topic(topic, queues, "broker-a")
    c.create_topic(topic, queues, "broker-b")  # waits until the namesrv routes both
    return [MessageQueue(topic, b, q) for b in ("broker-a", "broker-b") for q in range(queues)]


def read_back(c, queues: list[MessageQueue], n: int) -> list:
    """The first ``n`` messages of ``queues`` from the start (PullConsumer, assign mode)."""
    got: list = []
    with PullConsumer("read-back", c.namesrv, pull_batch_size=100, auto_commit=False) as pc:
        pc.assign(queues)
        pc.start()
        for mq in queues:
            pc.seek_to_begin(mq)
        wait_for(lambda: got.extend(pc.poll(0.5)) or len(got) >= n, interval=0,
                 what=f"{n} messages")  # fmt: skip
    return got


def qkey(mq: MessageQueue) -> tuple[str, int]:
    return mq.broker_name, mq.queue_id


# -- queue selection --------------------------------------------------------------------------


def test_round_robin_covers_every_queue_of_both_brokers(pair):
    queues = topic_on_both(pair, "RoundRobin", 4)
    with Producer("p-rr", pair.namesrv) as producer:
        results = [producer.send(Message("RoundRobin", f"m{i}")) for i in range(16)]
        batch = producer.send_batch([Message("RoundRobin", f"b{i}") for i in range(5)])
    assert {r.send_status for r in results + batch} == {SendStatus.SEND_OK}
    used = [r.message_queue for r in results]
    assert collections.Counter(used) == dict.fromkeys(queues, 2)
    # consecutive sends take consecutive queues of the sorted list (a-0..3, b-0..3)
    start = queues.index(used[0])
    assert used == [queues[(start + i) % 8] for i in range(16)]
    assert len({r.message_queue for r in batch}) == 1  # a batch goes to one queue
    assert [r.queue_offset for r in batch] == list(range(batch[0].queue_offset,
                                                         batch[0].queue_offset + 5))  # fmt: skip


def test_sharding_key_keeps_a_key_on_one_queue_and_spreads_keys(pair):
    queues = topic_on_both(pair, "Sharded", 4)
    assert java_hash("hello") == 99162322  # Java's "hello".hashCode()
    keys = [f"order-{i}" for i in range(40)]
    with Producer("p-shard", pair.namesrv) as producer:
        seen = collections.defaultdict(set)
        for round_ in range(3):
            for key in keys:
                r = producer.send(Message("Sharded", f"{key}/{round_}"), sharding_key=key)
                seen[key].add(r.message_queue)
        batch = producer.send_batch([Message("Sharded", "b1"), Message("Sharded", "b2")],
                                    sharding_key="order-7")  # fmt: skip
        future = producer.send_async(Message("Sharded", "async"), sharding_key="order-7")
        async_mq = future.result(10).message_queue
        by_selector = producer.send(Message("Sharded", "sel"), selector=select_by_hash,
                                    arg="order-7").message_queue  # fmt: skip
    for key in keys:  # SelectMessageQueueByHash over the sorted writable queues
        assert seen[key] == {queues[abs(java_hash(key)) % len(queues)]}
    assert len({mq for s in seen.values() for mq in s}) >= 6  # 40 keys spread over 8 queues
    assert {r.message_queue for r in batch} == seen["order-7"] == {async_mq, by_selector}


def test_selector_chooses_the_queue_and_bad_selectors_raise(pair):
    topic_on_both(pair, "Selected", 2)
    calls = []

    def by_arg(queues, msg, arg):
        calls.append((len(queues), msg.topic))
        return queues[arg % len(queues)]

    with Producer("p-sel", pair.namesrv) as producer:
        results = [producer.send(Message("Selected", f"m{i}"), selector=by_arg, arg=i)
                   for i in range(8)]  # fmt: skip
        assert calls == [(4, "Selected")] * 8
        assert [qkey(r.message_queue) for r in results] == [
            ("broker-a", 0), ("broker-a", 1), ("broker-b", 0), ("broker-b", 1)
        ] * 2  # fmt: skip
        foreign = MessageQueue("Selected", "broker-z", 0)
        with pytest.raises(ClientError, match=r"broker-z.*not one of the 4 writable queues"):
            producer.send(Message("Selected", "x"), selector=lambda q, m, a: foreign)
        with pytest.raises(ClientError, match="not one of"):
            producer.send(Message("Selected", "x"), selector=lambda q, m, a: None)
        with pytest.raises(ClientError, match=r"selector failed.*ZeroDivisionError"):
            producer.send(Message("Selected", "x"), selector=lambda q, m, a: 1 / 0)
        with pytest.raises(ClientError, match="not both"):
            producer.send(Message("Selected", "x"), selector=by_arg, sharding_key="k")
        future = producer.send_async(Message("Selected", "x"), selector=lambda q, m, a: foreign)
        with pytest.raises(ClientError, match="not one of"):
            future.result(10)


# -- async --------------------------------------------------------------------------------


def test_send_async_resolves_1000_futures_with_consecutive_offsets(pair):
    topic_on_both(pair, "Async", 2)
    with Producer("p-async", pair.namesrv) as producer:
        sent = [f"a{i}" for i in range(1000)]
        futures = [producer.send_async(Message("Async", body)) for body in sent]
        results = [f.result(30) for f in futures]
        assert producer.stats()["brokers"]["broker-a"]["in_flight_async"] == 0
    assert {r.send_status for r in results} == {SendStatus.SEND_OK}
    assert len({r.msg_id for r in results}) == 1000
    per_queue = collections.defaultdict(list)
    for r in results:  # in send order
        per_queue[r.message_queue].append(r.queue_offset)
    assert len(per_queue) == 4 and all(len(v) == 250 for v in per_queue.values())
    for offsets in per_queue.values():
        assert offsets == list(range(250))  # a fresh topic: 0, 1, 2, … in send order
    stored = read_back(pair, list(per_queue), 1000)
    assert sorted(m.body.decode() for m in stored) == sorted(sent)
    by_id = {m.msg_id: m.queue_offset for m in stored}
    assert all(by_id[r.msg_id] == r.queue_offset for r in results)


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_send_async_callback_gets_the_send_result_or_the_exception(pair, caplog, transport):
    """RocketMQ's SendCallback: onSuccess(SendResult) and onException(exc), as ``callback``
    alone or with ``on_exception``; a callback that raises is logged."""
    topic = f"AsyncCb-{transport}"
    topic_on_both(pair, topic, 1)
    got = []
    lock = threading.Lock()

    def callback(arg):
        with lock:
            got.append(arg)
        if isinstance(arg, SendResult) and arg.queue_offset == 3:
            raise RuntimeError("callback bug")

    foreign = MessageQueue(topic, "broker-z", 0)
    with (
        caplog.at_level(logging.ERROR, logger="shmq.client.producer.producer"),
        Producer(f"p-cb-{transport}", pair.namesrv, transport=transport) as producer,
    ):
        futures = [
            producer.send_async(Message(topic, f"c{i}"), callback, sharding_key="one")
            for i in range(20)
        ]
        results = [f.result(10) for f in futures]
        wait_for(lambda: len(got) == 20, timeout=10, what="callbacks")
        assert all(type(r) is SendResult and r.msg_id for r in got)
        assert {id(r) for r in got} == {id(r) for r in results}  # each its own send's
        failed = producer.send_async(Message(topic, "x"), callback, selector=lambda *_: foreign)
        wait_for(lambda: len(got) == 21, timeout=10, what="the failure's callback")
        assert isinstance(got[-1], ClientError) and got[-1] is failed.exception(10)
        assert "broker-z" in str(got[-1])

        successes, failures = [], []
        kw = {"on_exception": failures.append}
        ok = producer.send_async(Message(topic, "ok"), successes.append, **kw)
        bad = producer.send_async(Message(topic, "bad"), successes.append,
                                  selector=lambda *_: foreign, **kw)  # fmt: skip
        only = producer.send_async(Message(topic, "only"), on_exception=failures.append)
        only.result(10)
        wait_for(lambda: len(successes) == 1 and len(failures) == 1, timeout=10, what="callbacks")
        assert successes == [ok.result(10)] and successes[0].msg_id
        assert failures == [bad.exception(10)] and isinstance(failures[0], ClientError)
    assert any("callback" in r.getMessage() and r.exc_info for r in caplog.records)


def test_close_settles_every_outstanding_future_and_stops_its_threads(pair):
    topic_on_both(pair, "AsyncClose", 2)
    producer = Producer("p-close", pair.namesrv, poll_name_server_interval=0.2)
    futures = [producer.send_async(Message("AsyncClose", f"x{i}")) for i in range(300)]
    threads = (producer._completion._thread, producer._infos._refresher)
    assert all(t is not None and t.is_alive() for t in threads)
    started = time.monotonic()
    producer.close()
    assert time.monotonic() - started < 10
    assert all(f.done() for f in futures)
    assert all(f.exception() is None for f in futures)  # the brokers answered them all
    assert not any(t.is_alive() for t in threads)
    assert producer.stats()["brokers"] == {}  # unregistered from both brokers
    with pytest.raises(ClientError, match="closed"):
        producer.send(Message("AsyncClose", "late"))
    with pytest.raises(ClientError, match="closed"):
        producer.send_async(Message("AsyncClose", "late"))


def test_a_failing_completion_still_settles_every_future(pair, monkeypatch):
    topic_on_both(pair, "AsyncBroken", 2)
    with Producer("p-broken", pair.namesrv) as producer:
        producer.send(Message("AsyncBroken", b"warm"))

        def broken(*_args):
            raise RuntimeError("a bug in completing")

        monkeypatch.setattr(producer._completion, "_resolve", broken)
        futures = [producer.send_async(Message("AsyncBroken", f"x{i}")) for i in range(50)]
        for f in futures:
            with pytest.raises(SendError, match="a bug in completing"):
                f.result(timeout=20)
        monkeypatch.undo()
        later = producer.send_async(Message("AsyncBroken", b"after"))
        assert later.result(timeout=20).send_status is SendStatus.SEND_OK


def test_async_rejections_are_retried_on_the_same_queue_then_fail(pair):
    """A topic shrunk after the producer cached its route: queue 3 is rejected
    (queue id not below writeQueueNums, a retryable reason)."""
    pair.create_topic("Shrunk", 4, "broker-a")
    key = next(k for k in (f"k{i}" for i in range(1000)) if abs(java_hash(k)) % 4 == 3)
    with Producer("p-shrunk", pair.namesrv) as producer:
        assert producer.send(Message("Shrunk", "x"), sharding_key=key).message_queue.queue_id == 3
        with RemotingClient() as client:
            shrink = {"topic": "Shrunk", "readQueueNums": 1, "writeQueueNums": 1}
            client.invoke_json(
                pair.brokers["broker-a"].address, RequestCode.UPDATE_AND_CREATE_TOPIC, shrink
            )

        def rejected() -> bool:
            producer._infos.infos["Shrunk"].stale = False  # keep the cached 4-queue route
            try:
                producer.send(Message("Shrunk", "probe"), sharding_key=key)
            except SendError as exc:
                return "writeQueueNums" in str(exc)
            return False

        wait_for(rejected, timeout=10, what="the broker to apply the new queue count")
        producer._infos.infos["Shrunk"].stale = False  # keep the cached 4-queue route
        retries = producer.stats().get("async_retries", 0)
        future = producer.send_async(Message("Shrunk", "async"), sharding_key=key)
        exc = future.exception(10)
        assert isinstance(exc, SendError)
        assert "3 attempt(s)" in str(exc) and "writeQueueNums" in str(exc)
        assert producer.stats()["async_retries"] - retries == 2
    with QueueReader("probe", pair.namesrv) as reader:

        def one_queue_routed() -> bool:
            reader.routes.invalidate("Shrunk")
            return len(reader.queues("Shrunk")) == 1

        wait_for(one_queue_routed, timeout=10, what="the new queue count in the namesrv")
    with Producer("p-shrunk2", pair.namesrv) as producer:  # a fresh route: queue 0 only
        assert (
            producer.send(Message("Shrunk", "fine"), sharding_key=key).message_queue.queue_id == 0
        )


def test_async_link_failures_are_retried_on_the_same_broker(pair):
    topic_on_both(pair, "AsyncRetry", 2)
    for failures, ok in ((2, True), (3, False)):
        with Producer("p-aretry", pair.namesrv) as producer:
            real = producer._links.link_for
            calls = []

            def flaky(broker, real=real, calls=calls, failures=failures):
                calls.append(broker.broker_name)
                if len(calls) <= failures:
                    raise AttemptError("injected: broker unreachable", retryable=True)
                return real(broker)

            producer._links.link_for = flaky
            future = producer.send_async(Message("AsyncRetry", "r"))
            if ok:
                assert future.result(10).message_queue.broker_name == calls[0]
                assert calls == [calls[0]] * 3
            else:
                with pytest.raises(SendError, match=r"after 3 attempt\(s\).*injected"):
                    future.result(10)
                assert calls == [calls[0]] * 3


# -- oneway, checks, topics, routes ----------------------------------------------------------


def test_close_right_after_oneway_sends_loses_none_of_them(pair):
    """The writer is stopped (SIGSTOP) while a new producer sends oneway and closes: close()
    must wait until the broker took its ring's records instead of unregistering, which
    would have the broker destroy the ring before the writer ever read it."""
    pair.create_topic("OnewayClose", 2, "broker-a")
    writer = pair.runtime_info("broker-a")["agents"]["writer"]["pid"]
    producer = Producer("p-oneway-close", pair.namesrv, send_timeout=20)
    producer.send(Message("OnewayClose", b"registered"))
    os.kill(writer, signal.SIGSTOP)
    try:
        for i in range(20):
            producer.send_oneway(Message("OnewayClose", f"c{i}"))
        closing = threading.Thread(target=producer.close)
        closing.start()
        closing.join(0.5)
        assert closing.is_alive(), "close() returned with records still in the ring"
    finally:
        os.kill(writer, signal.SIGCONT)
    closing.join(30)
    assert not closing.is_alive()
    queues = [MessageQueue("OnewayClose", "broker-a", q) for q in range(2)]
    got = {m.body.decode() for m in read_back(pair, queues, 21)}
    assert got == {"registered"} | {f"c{i}" for i in range(20)}


def test_oneway_messages_are_delivered(pair):
    queues = topic_on_both(pair, "Oneway", 2)
    with Producer("p-oneway", pair.namesrv) as producer:
        for i in range(20):
            producer.send_oneway(Message("Oneway", f"o{i}"))
        producer.send_oneway(Message("Oneway", "keyed"), sharding_key="k")
    got = read_back(pair, queues, 21)
    assert sorted(m.body.decode() for m in got) == sorted([f"o{i}" for i in range(20)] + ["keyed"])
    expected = queues[abs(java_hash("k")) % 4]
    keyed = read_back(pair, [expected], 1)
    assert "keyed" in {m.body.decode() for m in keyed}


def test_client_side_checks_raise_before_anything_is_sent(pair):
    with Producer("p-checks", pair.namesrv, max_message_size=1024) as producer:
        with pytest.raises(MessageTooLargeError, match=r"Checked.*1025 bytes.*maxMessageSize 1024"):
            producer.send(Message("Checked", b"x" * 1025))
        with pytest.raises(MessageTooLargeError, match="empty"):
            producer.send_async(Message("Checked", b""))
        with pytest.raises(InvalidPropertyError, match="32767"):
            producer.send(Message("Checked", "x", properties={"big": "v" * 40000}))
        with pytest.raises(InvalidTopicError, match="forbidden"):
            producer.send(Message("SCHEDULE_TOPIC_XXXX", "x"))
        with pytest.raises(InvalidTopicError, match="TBW102"):
            producer.send_oneway(Message("TBW102", "x"))
        renamed = Message("Checked", "x")
        renamed.topic = "no spaces allowed"
        with pytest.raises(InvalidTopicError, match="no spaces allowed"):
            producer.send(renamed)
        with pytest.raises(InvalidMessageError, match="delay_level 19"):
            Message("Checked", "x", delay_level=19)
        with pytest.raises(ClientError, match="delay level"):
            producer.send_batch([Message("Checked", "x", delay_level=2)])
        with pytest.raises(ClientError, match="one topic"):
            producer.send_batch([Message("Checked", "x"), Message("Other", "y")])
        with pytest.raises(MessageTooLargeError, match=r"Checked: body 2 is 2000 bytes"):
            producer.send_bulk("Checked", [b"a", b"b", b"x" * 2000, b""])
        with pytest.raises(MessageTooLargeError, match=r"body 1 is 0 bytes"):
            producer.send_bulk("Checked", [b"a", b"", b"c"])
        assert producer.stats()["brokers"] == {}  # never registered with a broker
        assert producer.stats()["topics"] == []  # not even a route lookup
        # within the limit it goes (and auto-creates the topic)
        assert producer.send(Message("Checked", b"x" * 1024)).send_status is SendStatus.SEND_OK
        assert len(producer.send_bulk("Checked", [b"a", b"x" * 1024])) == 2


def test_a_new_topic_is_created_by_the_brokers_on_first_send(pair):
    with Producer("p-auto", pair.namesrv, default_topic_queue_nums=2) as producer:
        results = [producer.send(Message("AutoCreated", f"m{i}")) for i in range(8)]
    assert {r.send_status for r in results} == {SendStatus.SEND_OK}
    # TBW102's route with min(default_topic_queue_nums, 8) queues per broker
    assert {qkey(r.message_queue) for r in results} == {
        ("broker-a", 0), ("broker-a", 1), ("broker-b", 0), ("broker-b", 1)
    }  # fmt: skip
    with QueueReader("probe", pair.namesrv) as reader:

        def routed() -> bool:
            reader.routes.invalidate("AutoCreated")
            try:
                return {mq.broker_name for mq in reader.queues("AutoCreated")} == {
                    "broker-a", "broker-b"
                }  # fmt: skip
            except NoRouteError:
                return False

        wait_for(routed, timeout=10, what="the auto-created topic in the namesrv")
        # created with the producer's 2 queues, not the broker's 8: none stays empty
        assert {(mq.broker_name, mq.queue_id) for mq in reader.queues("AutoCreated")} == {
            ("broker-a", 0), ("broker-a", 1), ("broker-b", 0), ("broker-b", 1)
        }  # fmt: skip


def test_routes_are_refreshed_every_poll_interval(pair):
    pair.create_topic("Growing", 2, "broker-a")
    with Producer("p-poll", pair.namesrv, poll_name_server_interval=0.3) as producer:
        first = [producer.send(Message("Growing", f"m{i}")) for i in range(4)]
        assert {r.message_queue.broker_name for r in first} == {"broker-a"}
        pair.create_topic("Growing", 2, "broker-b")
        brokers = set()

        def reaches_b() -> bool:
            brokers.add(producer.send(Message("Growing", "more")).message_queue.broker_name)
            return "broker-b" in brokers

        wait_for(reaches_b, timeout=10, what="sends to reach the new broker")
        assert "failed_attempts" not in producer.stats()  # learnt by polling, not by failing
        refresher = producer._infos._refresher
        assert refresher is not None and refresher.is_alive()
    assert not refresher.is_alive()


# -- failover ------------------------------------------------------------------------------


def test_sends_fail_over_when_a_broker_stops_and_fail_when_all_are_down(tmp_path):
    before = shm_entries()
    conf = {"autoCreateTopicEnable": "false", "flushDiskType": "SYNC_FLUSH"}
    with cluster(tmp_path, defaultTopicQueueNums=4, **conf) as c:
        c.add_broker("broker-b")
        pids = broker_pids(c)
        topic_on_both(c, "Failover", 2)
        plain = Producer("p-fail", c.namesrv)
        faulty = Producer("p-fail-lat", c.namesrv, send_latency_fault_enable=True)
        try:
            with pytest.raises(NoRouteError, match="NoSuchTopic"):
                plain.send(Message("NoSuchTopic", "x"))
            with pytest.raises(NoRouteError, match="NoSuchTopic"):
                plain.send_async(Message("NoSuchTopic", "x")).result(10)
            # SYNC_FLUSH: an async send is answered once the flush covers it
            futures = [plain.send_async(Message("Failover", f"s{i}")) for i in range(200)]
            stored = [f.result(20) for f in futures]
            assert {r.send_status for r in stored} == {SendStatus.SEND_OK}
            for name in ("broker-a", "broker-b"):
                ends = [parse_offset_msg_id(r.offset_msg_id)[1] for r in stored
                        if r.message_queue.broker_name == name]  # fmt: skip
                assert ends and c.runtime_info(name)["flushed_offset"] > max(ends)

            results = {plain: [], faulty: []}
            errors = []
            stopped = threading.Event()
            after_stop = {plain: 0, faulty: 0}

            def loop(producer):
                i = 0
                while after_stop[producer] < 60:
                    flag = stopped.is_set()
                    try:
                        r = producer.send(Message("Failover", f"{producer.group}-{i}"))
                        results[producer].append((flag, r))
                    except Exception as exc:  # the test looks at them
                        errors.append(exc)
                    if stopped.is_set():
                        after_stop[producer] += 1
                    i += 1
                    time.sleep(0.002)

            threads = [threading.Thread(target=loop, args=(p,)) for p in (plain, faulty)]
            for t in threads:
                t.start()
            wait_for(lambda: min(len(v) for v in results.values()) >= 30, timeout=20, what="sends")
            assert c.stop_broker("broker-b") == 0  # SIGTERM while the loops run
            stopped.set()
            for t in threads:
                t.join(60)
            assert errors == []
            for rows in results.values():
                before_stop = {r.message_queue.broker_name for s, r in rows if not s}
                assert before_stop == {"broker-a", "broker-b"}
                assert {r.message_queue.broker_name for s, r in rows if s} == {"broker-a"}
                assert {r.send_status for _, r in rows} == {SendStatus.SEND_OK}
            # the producer with latency fault tolerance isolated the failed broker
            assert faulty.stats().get("failed_attempts", 0) >= 1
            assert not faulty.faults.is_available("broker-b")
            assert faulty.faults.is_available("broker-a")

            assert c.stop_broker("broker-a") == 0
            started = time.monotonic()
            with pytest.raises(SendError, match=r"Failover.*3 attempt\(s\)"):
                plain.send(Message("Failover", "nobody"))
            future = plain.send_async(Message("Failover", "nobody"))
            assert isinstance(future.exception(15), SendError)
            assert time.monotonic() - started < 15
        finally:
            plain.close()
            faulty.close()
    assert shm_left(before, pids) == set()


# -- retry rules (the attempt replaced; no processes) ----------------------------------------


def fake_producer(**options) -> Producer:
    """A producer whose topic "U" is routed to broker-a and broker-b (2 queues each) without
    a namesrv (a route refresh fails and keeps this route)."""
    producer = Producer("p-unit", "127.0.0.1:1", **options)
    brokers = {n: BrokerQueues(n, f"127.0.0.1:{i + 2}", 2, 2, 6)
               for i, n in enumerate(("broker-a", "broker-b"))}  # fmt: skip
    queues = [MessageQueue("U", n, q) for n in brokers for q in range(2)]
    producer._infos.infos["U"] = TopicPublishInfo("U", brokers, queues, frozenset(queues), False)
    return producer


def scripted(producer: Producer, outcome) -> list[str]:
    """Replace the attempt: ``outcome(broker_name, call_no)`` returns a SendStatus or raises."""
    calls: list[str] = []

    def attempt_one(broker, mq, one, deadline):
        calls.append(mq.broker_name)
        return SendResult(outcome(mq.broker_name, len(calls)), one[-1].decode(), "00", mq, 0)

    def attempt_batch(broker, mq, batch, deadline):
        calls.append(mq.broker_name)
        status = outcome(mq.broker_name, len(calls))
        return [SendResult(status, u, "00", mq, 0) for u in batch.uniq]

    producer._attempt_one = attempt_one
    producer._attempt_batch = attempt_batch
    return calls


def always(broker, _n):
    raise SendTimeoutError(f"{broker} did not answer")


def timeout_on(name):
    def outcome(broker, _n):
        if broker == name:
            raise SendTimeoutError(f"{broker} did not answer")
        return SendStatus.SEND_OK

    return outcome


def test_a_failed_attempt_is_retried_on_another_broker():
    with fake_producer() as producer:
        calls = scripted(producer, timeout_on("broker-a"))
        for i in range(10):
            before = len(calls)
            assert producer.send(Message("U", f"m{i}")).message_queue.broker_name == "broker-b"
            made = calls[before:]
            assert made in (["broker-b"], ["broker-a", "broker-b"])
        assert "broker-a" in calls  # round robin did try it


def test_retries_are_bounded_and_the_error_names_topic_and_brokers():
    with fake_producer() as producer:
        scripted(producer, always)
        with pytest.raises(SendTimeoutError, match=r"topic U failed after 3 attempt\(s\)") as ei:
            producer.send(Message("U", "x"))
        assert "broker-a" in str(ei.value) and "broker-b" in str(ei.value)
    with fake_producer(retry_times_when_send_failed=0) as producer:
        calls = scripted(producer, always)
        with pytest.raises(SendError, match=r"1 attempt\(s\)"):
            producer.send(Message("U", "x"))
        assert len(calls) == 1


def test_a_send_that_used_up_send_timeout_is_not_sent_again():
    def slow_timeout(broker, _n):
        time.sleep(0.25)  # the attempt waited the whole send_timeout: it may be stored
        raise SendTimeoutError(f"{broker} did not answer")

    with fake_producer(send_timeout=0.2) as producer:
        calls = scripted(producer, slow_timeout)
        with pytest.raises(SendTimeoutError, match=r"1 attempt\(s\)"):
            producer.send(Message("U", "x"))
        assert len(calls) == 1  # RocketMQ's sendDefaultImpl: one timeout budget for all


def test_only_retryable_failures_are_retried():
    def rejected(retryable):
        def outcome(broker, _n):
            raise AttemptError(f"{broker} rejected", retryable=retryable,
                                reason=ring.REASON_TOPIC_NOT_EXIST)  # fmt: skip

        return outcome

    with fake_producer() as producer:
        calls = scripted(producer, rejected(False))
        with pytest.raises(SendError, match="rejected"):
            producer.send(Message("U", "x"))
        assert len(calls) == 1
        calls = scripted(producer, rejected(True))
        with pytest.raises(SendError, match=r"3 attempt\(s\)"):
            producer.send(Message("U", "x"))
        assert len(calls) == 3
        assert calls[0] != calls[1] != calls[2]  # each retry on the other broker


def test_not_store_ok_is_returned_or_retried_on_another_broker():
    def flush_timeout_on_a(broker, _n):
        return SendStatus.FLUSH_DISK_TIMEOUT if broker == "broker-a" else SendStatus.SEND_OK

    with fake_producer() as producer:
        calls = scripted(producer, flush_timeout_on_a)
        statuses = {producer.send(Message("U", f"m{i}")).send_status for i in range(4)}
        assert statuses == {SendStatus.SEND_OK, SendStatus.FLUSH_DISK_TIMEOUT}
        assert len(calls) == 4  # never retried
    with fake_producer(retry_another_broker_when_not_store_ok=True) as producer:
        calls = scripted(producer, flush_timeout_on_a)
        for i in range(4):
            before = len(calls)
            assert producer.send(Message("U", f"m{i}")).send_status is SendStatus.SEND_OK
            assert calls[before:] in (["broker-b"], ["broker-a", "broker-b"])
        calls = scripted(producer, lambda b, _n: SendStatus.FLUSH_DISK_TIMEOUT)
        result = producer.send(Message("U", "x"))
        assert result.send_status is SendStatus.FLUSH_DISK_TIMEOUT and len(calls) == 3

        def flush_then_fail(broker, n):
            if n == 1:
                return SendStatus.FLUSH_DISK_TIMEOUT
            raise SendTimeoutError("down")

        calls = scripted(producer, flush_then_fail)
        assert producer.send(Message("U", "x")).send_status is SendStatus.FLUSH_DISK_TIMEOUT
        assert len(calls) == 3  # the last result got is returned, as RocketMQ does


def test_a_selected_queue_is_never_retried_elsewhere():
    with fake_producer() as producer:
        calls = scripted(producer, always)
        target = MessageQueue("U", "broker-b", 1)
        with pytest.raises(SendTimeoutError, match=r"broker-b.*queueId=1.*did not answer"):
            producer.send(Message("U", "x"), selector=lambda q, m, a: target)
        assert calls == ["broker-b"]
        with pytest.raises(SendError):
            producer.send_batch([Message("U", "x")], sharding_key="k")
        assert len(calls) == 2


def test_latency_fault_tolerance_keeps_sends_off_a_failed_broker():
    for enabled in (True, False):
        with fake_producer(send_latency_fault_enable=enabled) as producer:
            calls = scripted(producer, timeout_on("broker-a"))
            for i in range(12):
                producer.send(Message("U", f"m{i}"))
            tries_on_a = calls.count("broker-a")
            if enabled:
                assert tries_on_a == 1  # isolated for 10 minutes after the first failure
                assert not producer.faults.is_available("broker-a")
                assert producer.faults.is_available("broker-b")
            else:
                assert tries_on_a >= 4  # round robin keeps coming back to it


def test_options_are_checked():
    with fake_producer() as producer:  # RocketMQ's defaults
        assert (producer.send_timeout, producer.retry_times_when_send_failed) == (3.0, 2)
        assert producer.retry_times_when_send_async_failed == 2
        assert not producer.retry_another_broker_when_not_store_ok
        assert not producer.send_latency_fault_enable
        assert producer.faults.latency_max == (50, 100, 550, 1000, 2000, 3000, 15000)
        assert producer.poll_name_server_interval == 30.0
        assert (producer.max_message_size, producer.default_topic_queue_nums) == (4 << 20, 4)
    bad = [
        ({"send_timeout": 0}, "send_timeout"),
        ({"retry_times_when_send_failed": -1}, "retry_times_when_send_failed"),
        ({"max_message_size": 0}, "max_message_size"),
        ({"default_topic_queue_nums": 0}, "default_topic_queue_nums"),
        ({"poll_name_server_interval": 0}, "poll_name_server_interval"),
        ({"latency_max": (1, 2), "not_available_duration": (0,)}, "equal length"),
    ]
    for options, match in bad:
        with pytest.raises(ConfigError, match=match):
            Producer("p-bad", "127.0.0.1:1", **options)
