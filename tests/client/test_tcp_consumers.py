"""Consumers over TCP (``transport="tcp"``: PULL_MESSAGE with long polling): the same
messages, fields and offsets as the shared-memory path, bulk consumption, and a group
whose members use different transports consuming every message exactly once."""

from __future__ import annotations

import collections
import threading
import time

import pytest
from waiting import wait_for

from shmq.client.consumer.lite_pull import PullConsumer
from shmq.client.consumer.push import PushConsumer
from shmq.client.producer.producer import Producer
from shmq.client.transport.queue_reader import QueueReader
from shmq.client.transport.tcp_pull import TcpConsumerLink
from shmq.client.types import ConsumeResult, MessageQueue, PullStatus
from shmq.message import Message

OK = ConsumeResult.CONSUME_SUCCESS


def produce(c, topic: str, n: int, **kw) -> None:
    with Producer("tcp-test-producer", c.namesrv) as producer:
        futures = [producer.send_async(Message(topic, f"m{i}", **kw)) for i in range(n)]
        for f in futures:
            f.result(10)


def test_tcp_pull_decodes_exactly_as_the_mmap_path(broker):
    broker.create_topic("TcpRead", 1)
    with Producer("tcp-read-p", broker.namesrv) as producer:
        for i in range(50):
            producer.send(Message("TcpRead", f"r{i}", tags="A" if i % 2 else "B",
                                  keys=[f"k{i}"], properties={"p": str(i)}))  # fmt: skip
    mq = MessageQueue("TcpRead", "broker-a", 0)
    with QueueReader("tcp-read", broker.namesrv, transport="tcp") as tcp, \
            QueueReader("tcp-read", broker.namesrv, transport="shm") as shm:  # fmt: skip
        assert isinstance(tcp._link(mq), TcpConsumerLink)
        wait_for(lambda: tcp.max_offset(mq) == 50, what="50 messages dispatched")
        got = tcp.pull(mq, 0, 32, timeout=1.0)
        want = shm.pull(mq, 0, 32, timeout=1.0)
        assert got.pull_status is PullStatus.FOUND and len(got.messages) == 32
        assert got.next_begin_offset == want.next_begin_offset == 32
        for a, b in zip(got.messages, want.messages, strict=True):
            assert (a.msg_id, a.offset_msg_id, a.queue_offset, a.physical_offset, a.body,
                    a.properties, a.store_timestamp, a.born_timestamp, a.born_host,
                    a.store_host, a.tags, a.keys) == (
                b.msg_id, b.offset_msg_id, b.queue_offset, b.physical_offset, b.body,
                b.properties, b.store_timestamp, b.born_timestamp, b.born_host, b.store_host,
                b.tags, b.keys)  # fmt: skip
        tagged = tcp.pull(mq, 0, 32, expression="A", timeout=1.0)
        assert {m.tags for m in tagged.messages} == {"A"}
        bulk = tcp.pull_bulk(mq, 0, 100, timeout=1.0)
        assert bulk.batch.body(0) == b"r0" and list(bulk.batch.queue_offsets[:2]) == [0, 1]
        empty = tcp.pull(mq, 50, 32, timeout=0.2)
        assert empty.pull_status is PullStatus.NO_NEW_MSG and empty.next_begin_offset == 50
        moved = tcp.pull(mq, 80, 32, timeout=0.0)  # past a queue that starts at 0: from 0
        assert moved.pull_status is PullStatus.OFFSET_ILLEGAL and moved.next_begin_offset == 0
        # long polling: a held pull is answered when a message arrives
        threading.Timer(0.3, produce, (broker, "TcpRead", 1)).start()
        late = tcp.pull(mq, 50, 32, timeout=10.0)
        assert late.pull_status is PullStatus.FOUND and late.messages[0].queue_offset == 50


def test_push_consumer_over_tcp_and_offsets(broker):
    broker.create_topic("TcpPush", 4)
    produce(broker, "TcpPush", 400)
    got = collections.Counter()
    lock = threading.Lock()

    def listener(msgs, ctx):
        with lock:
            got.update(m.body for m in msgs)
        return OK

    pc = PushConsumer("tcp-push", broker.namesrv, listener=listener, transport="tcp",
                      consume_from_where="FIRST_OFFSET")  # fmt: skip
    pc.subscribe("TcpPush")
    with pc:
        pc.start()
        wait_for(lambda: sum(got.values()) >= 400, what="400 messages")
        produce(broker, "TcpPush", 100)  # arrives through held pulls
        wait_for(lambda: sum(got.values()) >= 500, what="500 messages")
    assert len(got) == 400 and max(got.values()) <= 2
    with QueueReader("tcp-push", broker.namesrv) as reader:
        total = sum(reader.committed(mq) for mq in reader.queues("TcpPush"))
    assert total == 500


def test_bulk_push_consumer_over_tcp(broker):
    broker.create_topic("TcpBulk", 1)
    with Producer("tcp-bulk-p", broker.namesrv, transport="tcp") as producer:
        producer.send_bulk("TcpBulk", [b"%05d" % i for i in range(3000)])
    seen: list[bytes] = []

    def listener(batch, ctx):
        seen.extend(batch.body(i) for i in range(len(batch)))
        return OK

    pc = PushConsumer("tcp-bulk", broker.namesrv, listener=listener, transport="tcp", bulk=True,
                      pull_batch_size=4096, consume_from_where="FIRST_OFFSET")  # fmt: skip
    pc.subscribe("TcpBulk")
    with pc:
        pc.start()
        wait_for(lambda: len(seen) >= 3000, what="3000 messages")
    assert seen == [b"%05d" % i for i in range(3000)]


def test_mixed_transport_group_consumes_exactly_once(broker):
    broker.create_topic("TcpMixed", 8)
    got = collections.Counter()
    by = collections.Counter()
    lock = threading.Lock()

    def listener_for(name):
        def listener(msgs, ctx):
            with lock:
                got.update(m.body for m in msgs)
                by[name] += len(msgs)
            return OK

        return listener

    consumers = []
    for name, transport in (("shm", "shm"), ("tcp", "tcp")):
        pc = PushConsumer("tcp-mixed", broker.namesrv, listener=listener_for(name),
                          transport=transport, consume_from_where="FIRST_OFFSET")  # fmt: skip
        pc.subscribe("TcpMixed")
        pc.start()
        consumers.append(pc)
    try:
        wait_for(lambda: all(len(pc.assignment()) == 4 for pc in consumers), what="rebalance")
        produce(broker, "TcpMixed", 800)
        wait_for(lambda: sum(got.values()) >= 800, what="800 messages")
        time.sleep(0.3)  # a test of absence: a message twice would come by now
    finally:
        for pc in consumers:
            pc.shutdown()
    assert len(got) == 800 and set(got.values()) == {1}
    assert by["shm"] > 0 and by["tcp"] > 0


def test_pull_consumer_over_tcp(broker):
    broker.create_topic("TcpLite", 2)
    produce(broker, "TcpLite", 60)
    with PullConsumer("tcp-lite", broker.namesrv, transport="tcp",
                      consume_from_where="FIRST_OFFSET") as consumer:  # fmt: skip
        consumer.subscribe("TcpLite")
        consumer.start()
        bodies: list[bytes] = []
        wait_for(lambda: bodies.extend(m.body for m in consumer.poll(1.0)) or len(bodies) >= 60,
                 interval=0, what="60 messages over TCP")  # fmt: skip
    assert sorted(bodies) == sorted(f"m{i}".encode() for i in range(60))


def test_auto_transport_takes_shared_memory_only_for_this_hosts_store(broker):
    from shmq.client.transport.chooser import TransportChooser, broker_is_local
    from shmq.remoting.client import RemotingClient
    from shmq.remoting.protocol import RequestCode

    address = broker.brokers["broker-a"].address
    with RemotingClient() as client:
        _, info = client.invoke_json(address, RequestCode.GET_STORE_INFO)
        assert broker_is_local(info)
        assert TransportChooser(client, "auto").tcp(address) is False
        assert TransportChooser(client, "tcp").tcp(address) is True
    # another kernel, another /dev/shm, or another directory of the same path: TCP
    assert not broker_is_local({**info, "hostId": "another-boot-id/0:0"})
    assert not broker_is_local({**info, "storeId": "0:0"})
    assert not broker_is_local({k: v for k, v in info.items() if k != "hostId"})
    assert not broker_is_local({**info, "shmLayout": "0123456789abcdef"})  # another version


def test_a_broker_of_another_shmq_version_is_reached_over_tcp(broker, monkeypatch):
    """Shared-memory layouts differ between installs: ``auto`` takes TCP, ``shm`` refuses
    naming both layouts (the client's is made to differ here)."""
    from shmq.client.transport import chooser
    from shmq.errors import ConfigError
    from shmq.remoting.client import RemotingClient

    address = broker.brokers["broker-a"].address
    monkeypatch.setattr(chooser, "layout_id", lambda: "0123456789abcdef")
    with RemotingClient() as client:
        assert chooser.TransportChooser(client, "auto").tcp(address) is True
        with pytest.raises(ConfigError, match=r"0123456789abcdef.*upgrade both"):
            chooser.TransportChooser(client, "shm").tcp(address)
