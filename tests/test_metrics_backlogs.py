"""The broker's metrics of what waits (issue 54's rest) against a real broker: ready and
inflight messages of a TCP pull consumer and of a POP consumer, the processors' watermarks,
the delay levels' and the timer's backlogs; and the client metrics of the orderly push path
and of SimpleConsumer."""

from __future__ import annotations

import threading
import time

import pytest
import wire_client as wc
from metrics_scrape import Samples, sample, scrape_endpoint
from prometheus_client import CollectorRegistry
from waiting import wait_for

from e2e_helpers import embedded
from shmq.broker.metrics.supervisor_numbers import WATERMARK_PROCESSORS
from shmq.client.consumer.pop.simple import SimpleConsumer
from shmq.client.consumer.push import PushConsumer
from shmq.client.metrics import client_id
from shmq.client.producer.producer import Producer
from shmq.client.types import ConsumeFromWhere, ConsumeOrderlyStatus
from shmq.ipc import counters as cn
from shmq.message import Message

TOPIC = "BacklogT"


@pytest.fixture(scope="module")
def mq(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("backlogs") / "store")
    conf = {"metrics_exporter_type": "PROM", "metrics_prom_exporter_port": 0}
    with embedded(root, **conf) as mq:
        mq.create_topic(TOPIC, 1)
        yield mq


def scrape(mq) -> Samples:
    return scrape_endpoint(mq.broker.metrics.address)


value = sample


def send(mq, topic: str, n: int, **kwargs) -> None:
    with Producer(f"{topic}-p", mq.namesrv) as producer:
        for i in range(n):
            producer.send(Message(topic, b"m%d" % i, **kwargs))


def test_a_tcp_pull_consumer_has_ready_and_inflight_messages(mq):
    """A Java consumer's pulls: what it pulled and did not commit is inflight, the rest of
    the queue ready; a pull that commits moves messages from inflight to consumed."""
    sent, group = 20, "backlog-tcp"
    words = mq.broker.counters.words
    send(mq, TOPIC, sent)
    wait_for(lambda: cn.load(words, cn.DISPATCHED_OFFSET) == cn.load(words, cn.WRITE_OFFSET),
             what="the sends dispatched")  # fmt: skip
    labels = {"consumer_group": group, "topic": TOPIC, "is_retry": "false"}
    with wc.WireClient(mq.broker.address) as java:
        assert java.call(wc.UPDATE_CONSUMER_OFFSET, wc.offset_header(group, TOPIC, 0, 0)).code == (
            wc.SUCCESS)  # fmt: skip
        pull = java.call(wc.PULL_MESSAGE, wc.pull_header(group, TOPIC, 0, 0, max_nums=8))
        assert len(wc.pulled_records(pull.body)) == 8
        # the data server tells the broker what a pull took within 20 ms (its accounts)
        wait_for(lambda: backlog(mq, labels) == (sent - 8, 8, sent), timeout=5.0,
                 what="ready, inflight and lag after the first pull")  # fmt: skip
        flags = wc.SUSPEND | wc.SUBSCRIPTION | wc.COMMIT_OFFSET  # commits the 8 it consumed
        header = wc.pull_header(group, TOPIC, 0, 8, max_nums=4, sys_flag=flags, commit_offset=8)
        assert len(wc.pulled_records(java.call(wc.PULL_MESSAGE, header).body)) == 4
        wait_for(lambda: backlog(mq, labels) == (sent - 12, 4, sent - 8), timeout=5.0,
                 what="ready, inflight and lag after the committing pull")  # fmt: skip


def backlog(mq, labels: dict[str, str]) -> tuple[float, float, float]:
    """A group's ready, inflight and lag messages, as scraped now."""
    found = scrape(mq)
    return tuple(value(found, f"rocketmq_consumer_{name}_messages", **labels)
                 for name in ("ready", "inflight", "lag"))  # fmt: skip


def test_a_pop_consumer_has_its_unacked_messages_inflight(mq):
    topic, sent, group = "BacklogPop", 12, "backlog-pop"
    mq.create_topic(topic, 1)
    send(mq, topic, sent)
    labels = {"consumer_group": group, "topic": topic, "is_retry": "false"}
    consumer = SimpleConsumer(group, mq.namesrv, subscriptions={topic: "*"}, await_duration=2,
                              consume_from_where=ConsumeFromWhere.FIRST_OFFSET)  # fmt: skip
    consumer.start()
    try:
        got = consumer.receive(5)
        assert len(got) == 5
        found = scrape(mq)
        assert value(found, "rocketmq_consumer_inflight_messages", **labels) == 5
        assert value(found, "rocketmq_consumer_ready_messages", **labels) == sent - 5
        consumer.ack_batch(got[:2])
        found = scrape(mq)
        assert value(found, "rocketmq_consumer_inflight_messages", **labels) == 3
    finally:
        consumer.shutdown()


def test_every_processor_has_a_watermark(mq):
    found = scrape(mq)
    for processor in WATERMARK_PROCESSORS:  # nothing waits for a worker on an idle broker
        assert value(found, "rocketmq_processor_watermark", processor=processor) == 0


def test_delay_level_and_timer_backlogs(mq):
    topic = "BacklogDelay"
    mq.create_topic(topic, 1)
    send(mq, topic, 3, delay_level=4)  # 30 s: still waiting when scraped
    wait_for(lambda: value(scrape(mq), "shmq_schedule_messages", delay_level="4") == 3,
             what="3 messages waiting on delay level 4")  # fmt: skip
    found = scrape(mq)
    assert value(found, "shmq_schedule_messages", delay_level="3", delay_ms="10000") == 0
    later = int(time.time() * 1000) + 600_000
    send(mq, topic, 2, deliver_time_ms=later)
    # the timer agent takes them onto the wheel: nothing stays behind it
    wait_for(lambda: value(scrape(mq), "rocketmq_timer_enqueue_lag") == 0,
             what="the timer messages on the wheel")  # fmt: skip
    assert value(scrape(mq), "rocketmq_timer_enqueue_latency") == 0


def test_orderly_push_and_simple_consumer_record_client_metrics(mq):
    topic = "BacklogClient"
    mq.create_topic(topic, 1)
    send(mq, topic, 6)
    registry = CollectorRegistry()
    seen = threading.Event()
    count = [0]

    def listener(msgs, _ctx):
        count[0] += len(msgs)
        if count[0] >= 6:
            seen.set()
        return ConsumeOrderlyStatus.SUCCESS

    push = PushConsumer("backlog-orderly", mq.namesrv, listener=listener, orderly=True,
                        metrics=registry,
                        consume_from_where=ConsumeFromWhere.FIRST_OFFSET)  # fmt: skip
    push.subscribe(topic, "*")
    push.start()
    try:
        assert seen.wait(30)
    finally:
        push.shutdown()
    labels = {"topic": topic, "consumer_group": "backlog-orderly",
              "client_id": client_id("backlog-orderly")}  # fmt: skip
    done = dict(labels, invocation_status="success")
    assert registry.get_sample_value("rocketmq_process_time_count", done) >= 1
    assert registry.get_sample_value("rocketmq_delivery_latency_count", labels) == 6

    simple = SimpleConsumer("backlog-simple", mq.namesrv, subscriptions={topic: "*"},
                            await_duration=2, metrics=registry,
                            consume_from_where=ConsumeFromWhere.FIRST_OFFSET)  # fmt: skip
    simple.start()
    try:
        got = simple.receive(4)
        batch = simple.receive_batch(4)
        simple.ack_batch(got)
        simple.ack_batch(batch)
    finally:
        simple.shutdown()
    labels = {"topic": topic, "consumer_group": "backlog-simple",
              "client_id": client_id("backlog-simple")}  # fmt: skip
    assert len(got) + len(batch) == 6
    assert registry.get_sample_value("rocketmq_delivery_latency_count", labels) == 6
