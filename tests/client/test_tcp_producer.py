"""The producer's TCP transport (``transport="tcp"``): every kind of send against a real
broker, results checked against what the shared-memory path gives and what a consumer
reads back."""

from __future__ import annotations

from e2e_helpers import read_all
from shmq import Message
from shmq.client.producer.producer import Producer
from shmq.client.types import MessageQueue, SendStatus
from shmq.message import parse_offset_msg_id


def test_sync_send_over_tcp_gives_the_shm_result_fields(broker):
    broker.create_topic("TcpSync", 2)
    with Producer("tcp-pg", broker.namesrv, transport="tcp") as producer:
        msg = Message("TcpSync", b"hello", tags="TagA", keys=["k1"], properties={"color": "red"})
        result = producer.send(msg)
        assert result.send_status is SendStatus.SEND_OK
        assert len(result.msg_id) == 32
        stats = producer.stats()["brokers"]
        assert any(v.get("transport") == "tcp" for v in stats.values())
    (stored,) = [
        m for m in read_all(broker, "TcpSync", result.message_queue.queue_id,
                            result.queue_offset + 1) if m.msg_id == result.msg_id
    ]  # fmt: skip
    assert stored.body == b"hello" and stored.tags == "TagA" and stored.keys == ["k1"]
    assert stored.properties["color"] == "red"
    assert stored.queue_offset == result.queue_offset
    assert result.offset_msg_id == stored.offset_msg_id
    assert parse_offset_msg_id(result.offset_msg_id)[1] == stored.physical_offset


def test_async_oneway_and_selector_over_tcp(broker):
    broker.create_topic("TcpAsync", 4)
    with Producer("tcp-pg2", broker.namesrv, transport="tcp") as producer:
        futures = [producer.send_async(Message("TcpAsync", b"m%d" % i)) for i in range(2000)]
        results = [f.result(10) for f in futures]
        producer.send_oneway(Message("TcpAsync", b"oneway"), sharding_key="k")
        keyed = producer.send(Message("TcpAsync", b"keyed"), sharding_key="k")
    assert all(r.send_status is SendStatus.SEND_OK for r in results)
    assert len({r.msg_id for r in results}) == 2000
    per_queue: dict[int, list[int]] = {}
    for r in results:
        per_queue.setdefault(r.message_queue.queue_id, []).append(r.queue_offset)
    assert len(per_queue) == 4
    for offsets in per_queue.values():
        assert len(set(offsets)) == len(offsets)
    got = read_all(broker, "TcpAsync", keyed.message_queue.queue_id, keyed.queue_offset + 1)
    assert {m.body for m in got} >= {b"oneway", b"keyed"}


def test_batch_and_bulk_over_tcp(broker):
    broker.create_topic("TcpBatch", 1)
    with Producer("tcp-pg3", broker.namesrv, transport="tcp") as producer:
        msgs = [Message("TcpBatch", b"b%d" % i, tags="T", keys=[f"k{i}"]) for i in range(3000)]
        results = producer.send_batch(msgs)
        bulk = producer.send_bulk("TcpBatch", [b"x" * 100] * 5000, tags="Bulk")
    assert [r.queue_offset for r in results] == list(range(3000))
    assert len(bulk) == 5000 and bulk.send_status is SendStatus.SEND_OK
    assert list(bulk.queue_offsets[:3]) == [3000, 3001, 3002]
    got = read_all(broker, "TcpBatch", 0, 8000)
    assert [m.body for m in got[:3]] == [b"b0", b"b1", b"b2"]
    assert got[2].keys == ["k2"] and got[2].msg_id == results[2].msg_id
    assert results[2].offset_msg_id == got[2].offset_msg_id
    assert got[3000].tags == "Bulk" and got[7999].body == b"x" * 100
    assert int(bulk.physical_offsets[4999]) == got[7999].physical_offset


def test_delayed_message_over_tcp(broker):
    broker.create_topic("TcpDelay", 1)
    with Producer("tcp-pg4", broker.namesrv, transport="tcp") as producer:
        result = producer.send(Message("TcpDelay", b"later", delay_level=1))
    assert result.message_queue == MessageQueue("TcpDelay", "broker-a", 0)
    (got,) = read_all(broker, "TcpDelay", 0, 1)  # levels are 1 s in these tests
    assert got.body == b"later" and got.msg_id == result.msg_id
