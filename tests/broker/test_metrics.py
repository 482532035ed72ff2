"""The broker's Prometheus endpoint (``metricsExporterType=PROM``) against a real broker: what
is sent and consumed shows up exactly, lag is the backlog, a fenced ring is counted, the
endpoint answers while producers keep the broker busy, restarts when it dies, and is off by
default."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time

import pytest
import wire_client as wc
from metrics_scrape import Samples, sample, scrape_endpoint
from waiting import wait_for

from e2e_helpers import embedded
from shmq import LocalTransactionState, TransactionProducer
from shmq.broker.config.broker_config import BrokerConfig
from shmq.client.producer.producer import Producer
from shmq.client.transport.queue_reader import QueueReader
from shmq.client.types import MessageQueue
from shmq.errors import ConfigError
from shmq.ipc import counters as cn
from shmq.ipc import ring
from shmq.message import Message

TOPIC, GROUP = "MetricsT", "metrics-g"


@pytest.fixture(scope="module")
def mq(tmp_path_factory):
    """A broker with the endpoint on any free port and one ``metricsLabel`` pair."""
    root = str(tmp_path_factory.mktemp("metrics") / "store")
    conf = {"metrics_exporter_type": "PROM", "metrics_prom_exporter_port": 0,
            "metrics_label": "env:test"}  # fmt: skip
    with embedded(root, **conf) as mq:
        mq.create_topic(TOPIC, 4)
        yield mq


def scrape(mq) -> Samples:
    """Every sample of one scrape, keyed by name and labels."""
    return scrape_endpoint(mq.broker.metrics.address)


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample ``name`` whose labels include ``labels`` (0 when there is none)."""
    found = sample(samples, name, **labels)
    return 0.0 if found is None else found


def test_sends_and_gets_are_counted_exactly_and_lag_is_the_backlog(mq):
    sent, got = 60, 25
    words = mq.broker.counters.words
    before, write_before = scrape(mq), cn.load(words, cn.WRITE_OFFSET)
    with Producer("metrics-p", mq.namesrv) as producer:
        producer.send_bulk(TOPIC, [b"x" * (1 + i * 37 % 2000) for i in range(sent)])
    wait_for(lambda: cn.load(words, cn.DISPATCHED_OFFSET) == cn.load(words, cn.WRITE_OFFSET),
             what="the sends dispatched")  # fmt: skip
    written = cn.load(words, cn.WRITE_OFFSET) - write_before
    after = scrape(mq)
    topic = {"topic": TOPIC, "is_system": "false", "message_type": "normal"}
    for name, grown in (("rocketmq_messages_in_total", sent), ("rocketmq_throughput_in_total",
                        written), ("rocketmq_message_size_count", sent),
                        ("rocketmq_message_size_sum", written)):  # fmt: skip
        assert value(after, name, **topic) - value(before, name, **topic) == grown, name
    assert value(after, "rocketmq_message_size_bucket", le="1024.0", **topic) < sent
    constant = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a",
                "env": "test"}  # fmt: skip
    assert value(after, "rocketmq_messages_in_total", **constant, **topic) == sent

    with QueueReader(GROUP, mq.namesrv) as reader:  # exactly ``got`` messages, committed
        left = got
        for queue_id in range(4):
            queue = MessageQueue(TOPIC, "broker-a", queue_id)
            result = reader.pull(queue, 0, min(left, 32), timeout=1.0) if left else None
            offset = result.next_begin_offset if result else 0
            left -= offset
            reader.commit(queue, offset)
        assert left == 0
    group = {"topic": TOPIC, "consumer_group": GROUP}
    wait_for(lambda: value(scrape(mq), "rocketmq_messages_out_total", **group) == got,
             what=f"{got} messages out")  # fmt: skip
    samples = scrape(mq)
    assert value(samples, "rocketmq_consumer_lag_messages", **group) == sent - got
    # the oldest message not consumed was stored before this test's sends began
    assert 0 < value(samples, "rocketmq_consumer_lag_latency", **group) < 600_000
    assert value(samples, "rocketmq_topic_number") >= 1
    assert value(samples, "rocketmq_consumer_group_number") >= 1
    assert value(samples, "rocketmq_broker_permission") == 6
    assert value(samples, "shmq_messages_stored_total") >= sent
    assert value(samples, "shmq_agent_up", agent="writer") == 1
    assert value(samples, "shmq_agent_cpu_seconds_total", agent="writer") > 0


class Decide:
    """A transaction listener that commits a body ``c…`` and rolls back the others."""

    def execute_local_transaction(self, msg, _arg):
        committed = msg.body.startswith(b"c")
        return LocalTransactionState.COMMIT_MESSAGE if committed else (
            LocalTransactionState.ROLLBACK_MESSAGE)  # fmt: skip

    def check_local_transaction(self, _msg):
        return LocalTransactionState.UNKNOW


def test_tcp_producers_request_latency_and_transactions_are_counted(mq):
    """A producer's sends over TCP are observations of rocketmq_rpc_latency, a Java
    producer's heartbeat is a remoting producer connection, and transactions ended count
    per topic."""
    rpc = {"request_code": "send_message_v2", "response_code": "success", "result": "success"}
    before = scrape(mq)
    with Producer("metrics-tcp", mq.namesrv, transport="tcp") as p:
        for i in range(5):
            p.send(Message(TOPIC, b"tcp-%d" % i))
    with wc.WireClient(mq.broker.address) as java:  # a Java producer's heartbeat
        beat = {"clientID": "127.0.0.1@java", "producerDataSet": [{"groupName": "metrics-java"}],
                "consumerDataSet": []}  # fmt: skip
        assert java.call(34, {}, json.dumps(beat).encode()).code == wc.SUCCESS  # HEART_BEAT
        remoting = {"protocol_type": "remoting", "language": "java"}
        assert value(scrape(mq), "rocketmq_producer_connections", **remoting) == 1
    # the sends were answered by the data server, which reports its latencies once a second
    count = value(before, "rocketmq_rpc_latency_count", **rpc) + 5

    def reported():
        samples = scrape(mq)
        return samples if value(samples, "rocketmq_rpc_latency_count", **rpc) == count else None

    samples = wait_for(reported, what="the 5 sends' latencies")
    assert value(samples, "rocketmq_rpc_latency_bucket", le="+Inf", **rpc) == count
    assert value(samples, "rocketmq_rpc_latency_sum", **rpc) > 0
    with TransactionProducer("metrics-tx", mq.namesrv, listener=Decide()) as tx:
        for body in (b"c1", b"c2", b"r1"):
            tx.send_message_in_transaction(Message(TOPIC, body))
    topic = {"topic": TOPIC}
    wait_for(lambda: (value(s := scrape(mq), "rocketmq_commit_messages_total", **topic),
                      value(s, "rocketmq_rollback_messages_total", **topic)) == (2, 1),
             what="2 commits and 1 rollback")  # fmt: skip


def test_a_message_sent_to_the_dlq_is_counted(mq):
    """CONSUMER_SEND_MSG_BACK with delay level -1 puts the message in the group's DLQ at
    once: rocketmq_send_to_dlq_messages_total counts it for the group and its topic."""
    with Producer("metrics-dlq", mq.namesrv) as producer:
        sent = producer.send(Message(TOPIC, b"dead"))
    commit_log_offset = int(sent.offset_msg_id[-16:], 16)  # an offset msg id ends with it
    with wc.WireClient(mq.broker.address) as c:
        resp = c.call(36, {"offset": str(commit_log_offset), "group": "metrics-dlq-g",
                           "delayLevel": "-1", "originMsgId": sent.msg_id,
                           "originTopic": TOPIC, "unitMode": "false"})  # fmt: skip
        assert resp.code == wc.SUCCESS, resp  # CONSUMER_SEND_MSG_BACK
    labels = {"consumer_group": "metrics-dlq-g", "topic": TOPIC, "is_system": "false"}
    assert value(scrape(mq), "rocketmq_send_to_dlq_messages_total", **labels) == 1


def test_a_fenced_ring_is_counted(mq):
    assert value(scrape(mq), "shmq_rings_fenced") == 0
    with Producer("metrics-bad", mq.namesrv) as bad:
        bad.send_bulk(TOPIC, [b"mine"])
        [link] = bad._links.current.values()
        rp = link.ring
        local = int(rp.words[ring.TAIL]) & (rp.capacity - 1)
        rp.data[local : local + 64] = 0xAB  # not a record
        rp.words[ring.SEQ_TAIL] = 1 << 60
        rp.words[ring.TAIL] = int(rp.words[ring.TAIL]) + 64
        wait_for(lambda: int(rp.words[ring.FENCED]), what="the writer to fence the ring")
        wait_for(lambda: value(scrape(mq), "shmq_rings_fenced") == 1, what="1 fenced ring")
        used = value(scrape(mq), "shmq_ring_used_bytes", producer_group="metrics-bad")
        assert used == 64  # the bytes the writer will never read


def test_the_endpoint_answers_under_load(mq):
    stop, sent = threading.Event(), []

    def load() -> None:
        with Producer("metrics-load", mq.namesrv) as producer:
            while not stop.is_set():
                producer.send_bulk(TOPIC, [b"y" * 256] * 200)
                sent.append(200)

    thread = threading.Thread(target=load)
    thread.start()
    try:
        wait_for(lambda: len(sent) >= 5, what="the load running")
        seen = []
        for _ in range(5):
            started = time.monotonic()
            seen.append(value(scrape(mq), "rocketmq_messages_in_total", topic=TOPIC))
            assert time.monotonic() - started < 5
        assert seen[-1] > seen[0]
    finally:
        stop.set()
        thread.join()


def test_a_dead_endpoint_is_started_again(mq):
    process = mq.broker.metrics
    first = process.proc.pid
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: process.proc is not None and process.proc.pid != first,
             what="a new metrics process")  # fmt: skip
    # on the port the first one was given
    samples = wait_for(lambda: scrape(mq), what="a scrape", ignore=OSError)
    assert value(samples, "shmq_agent_up", agent="writer") == 1


def test_off_by_default(tmp_path):
    assert not BrokerConfig().metrics_enabled
    with embedded(str(tmp_path / "store")) as off:
        assert off.broker.metrics is None
        with socket.socket() as s, pytest.raises(ConnectionRefusedError):
            s.connect((off.broker.config.broker_ip1, BrokerConfig().metrics_prom_exporter_port))


@pytest.mark.parametrize("given", ["PROM", "prom", "2", " 2 "])
def test_the_exporter_type_is_a_name_or_a_number(given):
    assert BrokerConfig.from_mapping({"metricsExporterType": given}).metrics_enabled
    assert not BrokerConfig.from_mapping({"metricsExporterType": "0"}).metrics_enabled


@pytest.mark.parametrize("conf", [{"metricsExporterType": "LOG"},
                                  {"metricsExporterType": "3"}, {"metricsLabel": "novalue"},
                                  {"metricsPromExporterPort": "65536"}])  # fmt: skip
def test_what_shmq_does_not_serve_is_refused(conf):
    with pytest.raises(ConfigError):
        BrokerConfig.from_mapping(conf)


def test_metrics_labels_are_pairs():
    cfg = BrokerConfig.from_mapping({"metricsLabel": "env:prod, dc:east"})
    assert cfg.metrics_labels == {"env": "prod", "dc": "east"}
