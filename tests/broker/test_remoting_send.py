"""SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE over TCP, checked with the independent
wire client (``tests/wire_client.py``) and the spec decoder, in both header encodings."""

from __future__ import annotations

import time

import pytest
import wire_client as wc

from shmq.client.queue_reader import QueueReader
from shmq.client.types import MessageQueue
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RequestCode


def until(check, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError("condition never held")


def max_offset(broker, topic: str, queue_id: int) -> int:
    with RemotingClient() as client:
        resp, _ = client.invoke_json(
            broker.address, RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id}
        )
    return int(resp.ext_fields["offset"])


def stored(broker, topic: str, queue_id: int, count: int) -> list[dict]:
    """The queue's first ``count`` records from the CommitLog, via a TCP pull decoded by the
    spec decoder (once reput dispatched them)."""
    until(lambda: max_offset(broker, topic, queue_id) >= count)
    with wc.WireClient(broker.address) as c:
        resp = c.call(wc.PULL_MESSAGE, wc.pull_header("check", topic, queue_id, 0, sys_flag=4,
                                                       max_nums=count))  # fmt: skip
    assert resp.code == wc.SUCCESS, resp
    return wc.pulled_records(resp.body)


@pytest.mark.parametrize("encoding", [wc.JSON, wc.ROCKETMQ])
def test_send_v2_stores_the_message_and_answers_4_9_fields(make_broker, encoding):
    broker, _ = make_broker()
    props = {"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "0A0000010001" + "0" * 20,
             "WAIT": "true", "color": "red"}  # fmt: skip
    with wc.WireClient(broker.address, encoding) as c:
        resp = c.call(wc.SEND_MESSAGE_V2, wc.send_header_v2("pg", "TcpT", 1, props, flag=7),
                      b"hello")  # fmt: skip
        again = c.call(wc.SEND_MESSAGE_V2, wc.send_header_v2("pg", "TcpT", 1, props), b"two")
    assert resp.code == wc.SUCCESS and resp.remark is None, resp
    assert set(resp.ext) == {"msgId", "queueId", "queueOffset", "MSG_REGION", "TRACE_ON"}
    assert (resp.ext["queueId"], resp.ext["queueOffset"]) == ("1", "0")
    assert again.ext["queueOffset"] == "1"
    (record, second) = stored(broker, "TcpT", 1, 2)
    assert resp.ext["msgId"] == record["offset_msg_id"]
    assert again.ext["msgId"] == second["offset_msg_id"]
    assert record["body"] == b"hello" and record["flag"] == 7 and record["topic"] == "TcpT"
    assert record["born_timestamp"] == 1_700_000_000_000 and record["queue_offset"] == 0
    expected = {k: v for k, v in props.items() if k != "WAIT"} | {"CLUSTER": "DefaultCluster"}
    assert record["properties"] == expected
    assert record["born_host"][:4] == bytes([127, 0, 0, 1])


def test_send_v1_header_names(make_broker):
    broker, _ = make_broker()
    ext = {"producerGroup": "pg", "topic": "V1", "defaultTopic": "TBW102",
           "defaultTopicQueueNums": "2", "queueId": "0", "sysFlag": "0",
           "bornTimestamp": "5", "flag": "0", "properties": "TAGS\x01a\x02"}  # fmt: skip
    with wc.WireClient(broker.address) as c:
        resp = c.call(wc.SEND_MESSAGE, ext, b"v1")
    assert resp.code == wc.SUCCESS, resp
    assert broker.topics.get("V1").write_queue_nums == 2  # min(2, TBW102's 8)
    (record,) = stored(broker, "V1", 0, 1)
    assert record["body"] == b"v1" and record["born_timestamp"] == 5


@pytest.mark.parametrize("encoding", [wc.JSON, wc.ROCKETMQ])
def test_batch_of_1000_is_stored_whole_with_the_batch_properties(make_broker, encoding):
    broker, _ = make_broker()
    messages = [(i, f"m{i}".encode(), {"UNIQ_KEY": f"U{i:031d}", "TAGS": f"t{i % 3}"})
                for i in range(1000)]  # fmt: skip
    header = wc.send_header_v2("pg", "Batch", 2, {"WAIT": "true"}, batch=True)
    with wc.WireClient(broker.address, encoding) as c:
        resp = c.call(wc.SEND_BATCH_MESSAGE, header, wc.batch_body(messages))
    assert resp.code == wc.SUCCESS, resp
    ids = resp.ext["msgId"].split(",")
    assert len(ids) == 1000 and resp.ext["queueOffset"] == "0" and resp.ext["queueId"] == "2"
    records = []
    until(lambda: max_offset(broker, "Batch", 2) == 1000)
    with wc.WireClient(broker.address) as c:
        offset = 0
        while offset < 1000:
            r = c.call(wc.PULL_MESSAGE, wc.pull_header("g", "Batch", 2, offset, sys_flag=4))
            assert r.code == wc.SUCCESS
            records += wc.pulled_records(r.body)
            offset = int(r.ext["nextBeginOffset"])
    assert [r["offset_msg_id"] for r in records] == ids
    assert [r["queue_offset"] for r in records] == list(range(1000))
    assert [r["body"] for r in records] == [m[1] for m in messages]
    assert [r["flag"] for r in records] == list(range(1000))
    assert records[5]["properties"] == {"UNIQ_KEY": f"U{5:031d}", "TAGS": "t2", "WAIT": "true",
                                        "CLUSTER": "DefaultCluster"}  # fmt: skip


def test_shared_memory_consumer_reads_tcp_sends_field_for_field(make_broker):
    broker, namesrv = make_broker()
    with wc.WireClient(broker.address, wc.ROCKETMQ) as c:
        header = wc.send_header_v2("pg", "Mixed", 0, {"TAGS": "x", "UNIQ_KEY": "A" * 32})
        resp = c.call(wc.SEND_MESSAGE_V2, header, b"over tcp")
    (record,) = stored(broker, "Mixed", 0, 1)
    with QueueReader("mix", namesrv) as reader:
        result = reader.pull(MessageQueue("Mixed", broker.config.broker_name, 0), 0, 8)
    (msg,) = result.messages
    assert msg.msg_id == "A" * 32 and msg.offset_msg_id == resp.ext["msgId"]
    assert msg.body == record["body"] and msg.properties == record["properties"]
    assert msg.store_timestamp == record["store_timestamp"]
    assert msg.born_timestamp == record["born_timestamp"] and msg.queue_offset == 0
