"""Retry and dead-letter queues with real processes: a PushConsumer's failed messages go
back to the broker, come again through %RETRY%<group> with the original topic restored,
and land in %DLQ%<group> after max_reconsume_times."""

from __future__ import annotations

import base64
import json
import threading
import time

import pytest
from waiting import wait_for

import shmq
from e2e_helpers import cluster, shm_entries
from e2e_helpers import shmq as shmq_cli
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode

LEVELS = "1s 1s 1s 1s 1s 1s"  # retries use level 3 + reconsume times: 1 s each here


@pytest.fixture(scope="module")
def c(tmp_path_factory):
    """One broker for the retry tests (each has its topic and group), retries a second
    apart."""
    before = shm_entries()
    with cluster(tmp_path_factory.mktemp("retry"), messageDelayLevel=LEVELS) as c:
        yield c
    assert shm_entries() - before == set()


class Recorder:
    """A listener that fails the first ``fail_times`` deliveries of each message."""

    def __init__(self, fail_times: int) -> None:
        self.fail_times = fail_times
        self.calls: list[tuple[float, str, str, int, str]] = []
        self.lock = threading.Lock()

    def __call__(self, msgs, ctx):
        with self.lock:
            for m in msgs:
                self.calls.append(
                    (time.monotonic(), m.body.decode(), m.topic, m.reconsume_times,
                     ctx.message_queue.topic)
                )  # fmt: skip
            seen = sum(1 for c in self.calls if c[1] == msgs[0].body.decode())
        if seen <= self.fail_times:
            return shmq.ConsumeResult.RECONSUME_LATER
        return shmq.ConsumeResult.CONSUME_SUCCESS

    def bodies(self) -> list[str]:
        with self.lock:
            return [c[1] for c in self.calls]


def consume(namesrv: str, group: str, topic: str, listener, until, **options) -> None:
    """Run a PushConsumer of ``group`` on ``topic`` until ``until()`` holds."""
    consumer = shmq.PushConsumer(group, namesrv, listener=listener, **options)
    consumer.subscribe(topic)
    consumer.start()
    try:
        wait_for(until, what=f"{group} to consume {topic}")
    finally:
        consumer.shutdown()


def stored(namesrv: str, topic: str) -> int:
    """How many messages ``topic`` holds (its queues' max offsets: none was deleted)."""
    with shmq.Admin(namesrv) as admin:
        return sum(q.max_offset for q in admin.topic_status(topic))


def test_a_message_that_fails_once_is_consumed_once_more_with_its_topic(c):
    c.create_topic("Orders", 2)
    with shmq.Producer("retry-p", c.namesrv) as producer:
        for i in range(5):
            producer.send(shmq.Message("Orders", f"o{i}".encode()))
    recorder = Recorder(fail_times=1)
    consumer = shmq.PushConsumer("retry-group", c.namesrv, listener=recorder,
                                 consume_from_where="CONSUME_FROM_FIRST_OFFSET")  # fmt: skip
    consumer.subscribe("Orders")
    consumer.start()
    try:
        wait_for(lambda: len(recorder.bodies()) >= 10, what="10 deliveries")
        time.sleep(1.5)  # a test of absence: nothing more comes
    finally:
        consumer.shutdown()
    calls = recorder.calls
    assert sorted(recorder.bodies()) == sorted([f"o{i}" for i in range(5)] * 2)
    first = {c[1]: c for c in calls if c[3] == 0}
    again = {c[1]: c for c in calls if c[3] == 1}
    assert set(first) == set(again) == {f"o{i}" for i in range(5)}
    for body, call in again.items():
        assert call[2] == "Orders"  # the original topic, restored
        assert call[4] == "%RETRY%retry-group"  # read from the retry topic
        assert call[0] - first[body][0] >= 0.9  # after the retry level's delay
    with shmq.Admin(c.namesrv) as admin:
        assert "%RETRY%retry-group" in admin.topic_list()


def test_a_message_that_always_fails_lands_in_the_dlq(c):
    c.create_topic("Payments", 1)
    with shmq.Producer("dlq-p", c.namesrv) as producer:
        producer.send(shmq.Message("Payments", b"bad", tags="T1", keys=["k1"]))
    recorder = Recorder(fail_times=1000)
    consumer = shmq.PushConsumer("dlq-group", c.namesrv, listener=recorder,
                                 max_reconsume_times=2,
                                 consume_from_where="CONSUME_FROM_FIRST_OFFSET")  # fmt: skip
    consumer.subscribe("Payments")
    consumer.start()
    try:
        wait_for(lambda: len(recorder.bodies()) >= 3, what="3 deliveries")
        time.sleep(2.5)  # a test of absence: a 4th delivery would come by now
    finally:
        consumer.shutdown()
    assert [(c[1], c[2], c[3]) for c in recorder.calls] == [
        ("bad", "Payments", 0), ("bad", "Payments", 1), ("bad", "Payments", 2)
    ]  # fmt: skip
    # the DLQ is an ordinary topic: consume it
    dlq = []
    consume(c.namesrv, "dlq-reader", "%DLQ%dlq-group",
            lambda msgs, _ctx: dlq.extend(msgs) or shmq.ConsumeResult.CONSUME_SUCCESS,
            lambda: dlq, consume_from_where="CONSUME_FROM_FIRST_OFFSET")  # fmt: skip
    assert [m.body for m in dlq] == [b"bad"]
    assert stored(c.namesrv, "%DLQ%dlq-group") == 1  # parked once
    parked = dlq[0]
    assert parked.reconsume_times == 3
    assert parked.properties["RETRY_TOPIC"] == "Payments"
    assert parked.properties["ORIGIN_MESSAGE_ID"]
    assert parked.tags == "T1" and parked.keys == ["k1"]


def test_a_message_the_broker_does_not_take_back_is_resent_to_the_retry_topic(c):
    """RocketMQ's client fallback: when CONSUMER_SEND_MSG_BACK fails (here the listener
    spoils the message's CommitLog offset, so the broker finds no record there), the
    consumer sends the message to %RETRY%<group> itself; a later failure past the maximum
    sends it to the DLQ the same way."""
    c.create_topic("Invoices", 1)
    with shmq.Producer("fallback-p", c.namesrv) as producer:
        sent = producer.send(shmq.Message("Invoices", b"inv", tags="T", keys=["k9"]))
    seen = []

    def listener(msgs, ctx):
        for m in msgs:
            seen.append((m.msg_id, m.topic, m.reconsume_times, ctx.message_queue.topic,
                         m.properties.get("ORIGIN_MESSAGE_ID")))  # fmt: skip
            m.physical_offset = 123_456_789  # no record there: the send back fails
        return shmq.ConsumeResult.RECONSUME_LATER

    consumer = shmq.PushConsumer("fallback-group", c.namesrv, listener=listener,
                                 max_reconsume_times=2,
                                 consume_from_where="CONSUME_FROM_FIRST_OFFSET")  # fmt: skip
    consumer.subscribe("Invoices")
    consumer.start()
    try:
        wait_for(lambda: len(seen) >= 2, what="2 deliveries")
        time.sleep(2.5)  # a test of absence: a third delivery would come by now
    finally:
        consumer.shutdown()
    assert seen == [
        (sent.msg_id, "Invoices", 0, "Invoices", None),
        (sent.msg_id, "Invoices", 1, "%RETRY%fallback-group", sent.msg_id),
    ]
    dlq = []
    consume(c.namesrv, "fallback-dlq-reader", "%DLQ%fallback-group",
            lambda msgs, _ctx: dlq.extend(msgs) or shmq.ConsumeResult.CONSUME_SUCCESS,
            lambda: dlq, consume_from_where="CONSUME_FROM_FIRST_OFFSET")  # fmt: skip
    assert [(m.body, m.msg_id, m.reconsume_times) for m in dlq] == [(b"inv", sent.msg_id, 2)]
    assert stored(c.namesrv, "%DLQ%fallback-group") == 1  # parked once
    props = dlq[0].properties
    assert props["RETRY_TOPIC"] == "Invoices" and props["ORIGIN_MESSAGE_ID"] == sent.msg_id
    assert dlq[0].tags == "T" and dlq[0].keys == ["k9"]
    assert not {"REAL_TOPIC", "REAL_QID", "DELAY"} & set(props)


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """A broker with one message in topic Plain, for the three bad send-backs: one of its
    own, where no retry of another test is written meanwhile."""
    before = shm_entries()
    with cluster(tmp_path_factory.mktemp("plain")) as c:
        c.create_topic("Plain", 1)
        with shmq.Producer("sb-p", c.namesrv) as producer:
            producer.send(shmq.Message("Plain", b"x" * 100))
        yield c
    assert shm_entries() - before == set()


@pytest.mark.parametrize(
    "fields",
    [
        {"offset": 123_456_789, "group": "g", "delayLevel": 0},  # no record there
        {"offset": 7, "group": "g", "delayLevel": 0},  # inside a record
        {"offset": -1, "group": "g", "delayLevel": 0},
    ],
)
def test_a_send_back_for_an_offset_without_a_message_answers_an_error(plain, fields):
    info = plain.runtime_info()
    with RemotingClient() as client:
        resp = client.invoke(
            plain.main.address,
            RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, fields),
        )
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert "look message by offset failed" in resp.remark
    assert plain.runtime_info()["write_offset"] == info["write_offset"]  # nothing written


def test_query_dlq_and_resend_dlq_put_a_message_back(c):
    c.create_topic("Refunds", 1)
    with shmq.Producer("refund-p", c.namesrv) as producer:
        for body in (b"r1", b"r2"):
            producer.send(shmq.Message("Refunds", body, keys=[body.decode()],
                                       properties={"why": "test"}))  # fmt: skip
    failing = Recorder(fail_times=1000)
    consumer = shmq.PushConsumer("refund-group", c.namesrv, listener=failing,
                                 max_reconsume_times=0,
                                 consume_from_where="CONSUME_FROM_FIRST_OFFSET")  # fmt: skip
    consumer.subscribe("Refunds")
    consumer.start()
    try:
        wait_for(lambda: len(failing.bodies()) >= 2, what="2 deliveries")
        time.sleep(1.0)  # a test of absence: a retry would come by now
    finally:
        consumer.shutdown()
    assert sorted(failing.bodies()) == ["r1", "r2"]  # no retry: straight to the DLQ
    n = ("-n", c.namesrv)
    out = shmq_cli("admin", "query-dlq", "-g", "refund-group", *n, "--json")
    assert out.returncode == 0, out.stderr
    parked = json.loads(out.stdout)
    assert sorted((m["originTopic"], m["attempts"]) for m in parked) == [("Refunds", 1)] * 2
    table = shmq_cli("admin", "query-dlq", "-g", "refund-group", *n)
    assert "Refunds" in table.stdout and table.returncode == 0
    progress = json.loads(
        shmq_cli("admin", "consumer-progress", "-g", "refund-group", *n, "--json").stdout
    )
    assert progress["dlqMessages"] == 2
    assert "DLQ messages: 2" in shmq_cli("admin", "consumer-progress", "-g", "refund-group",
                                     *n).stdout  # fmt: skip
    usage = shmq_cli("admin", "resend-dlq", "-g", "refund-group", *n)
    assert usage.returncode != 0 and "--msg-id" in usage.stderr
    missing = shmq_cli("admin", "resend-dlq", "-g", "refund-group", "-i", "NOPE", *n)
    assert missing.returncode != 0 and "not in the DLQ" in missing.stderr
    r1 = next(m for m in parked if base64.b64decode(m["body"]) == b"r1")
    resent = shmq_cli("admin", "resend-dlq", "-g", "refund-group", "-i", r1["msgId"], *n, "--json")
    assert resent.returncode == 0, resent.stderr
    assert [r["originTopic"] for r in json.loads(resent.stdout)] == ["Refunds"]
    got = Recorder(fail_times=0)
    consume(c.namesrv, "refund-group", "Refunds", got, lambda: got.calls)
    assert [(c_[1], c_[2], c_[3]) for c_ in got.calls] == [("r1", "Refunds", 0)]
    assert stored(c.namesrv, "Refunds") == 3  # r1, r2 and r1 put back once
