"""SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE over TCP, checked with the independent
wire client (``tests/wire_client.py``) and the spec decoder, in both header encodings."""

from __future__ import annotations

import pytest
import wire_client as wc
from waiting import wait_for

from shmq.client.transport.queue_reader import QueueReader
from shmq.client.types import MessageQueue
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RequestCode


def max_offset(broker, topic: str, queue_id: int) -> int:
    with RemotingClient() as client:
        resp, _ = client.invoke_json(
            broker.address, RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id}
        )
    return int(resp.ext_fields["offset"])


def dispatched(broker, topic: str, queue_id: int, count: int) -> int:
    """The queue's max offset, once reput (a process of its own) dispatched ``count``."""
    return wait_for(lambda: (n := max_offset(broker, topic, queue_id)) >= count and n,
                    what=f"{count} messages dispatched to {topic}:{queue_id}")  # fmt: skip


def stored(broker, topic: str, queue_id: int, count: int) -> list[dict]:
    """The queue's first ``count`` records from the CommitLog, via a TCP pull decoded by the
    spec decoder (once reput dispatched them)."""
    dispatched(broker, topic, queue_id, count)
    with wc.WireClient(broker.address) as c:
        resp = c.call(wc.PULL_MESSAGE, wc.pull_header("check", topic, queue_id, 0, sys_flag=4,
                                                       max_nums=count))  # fmt: skip
    assert resp.code == wc.SUCCESS, resp
    return wc.pulled_records(resp.body)


@pytest.mark.parametrize("encoding", [wc.JSON, wc.ROCKETMQ])
def test_send_v2_stores_the_message_and_answers_4_9_fields(shared_broker, encoding):
    broker, _ = shared_broker
    topic = f"TcpT{encoding}"
    props = {"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "0A0000010001" + "0" * 20,
             "WAIT": "true", "color": "red"}  # fmt: skip
    with wc.WireClient(broker.address, encoding) as c:
        resp = c.call(wc.SEND_MESSAGE_V2, wc.send_header_v2("pg", topic, 1, props, flag=7),
                      b"hello")  # fmt: skip
        again = c.call(wc.SEND_MESSAGE_V2, wc.send_header_v2("pg", topic, 1, props), b"two")
    assert resp.code == wc.SUCCESS and resp.remark is None, resp
    assert set(resp.ext) == {"msgId", "queueId", "queueOffset", "MSG_REGION", "TRACE_ON"}
    assert (resp.ext["queueId"], resp.ext["queueOffset"]) == ("1", "0")
    assert again.ext["queueOffset"] == "1"
    (record, second) = stored(broker, topic, 1, 2)
    assert resp.ext["msgId"] == record["offset_msg_id"]
    assert again.ext["msgId"] == second["offset_msg_id"]
    assert record["body"] == b"hello" and record["flag"] == 7 and record["topic"] == topic
    assert record["born_timestamp"] == 1_700_000_000_000 and record["queue_offset"] == 0
    expected = {k: v for k, v in props.items() if k != "WAIT"} | {"CLUSTER": "DefaultCluster"}
    assert record["properties"] == expected
    assert record["born_host"][:4] == bytes([127, 0, 0, 1])


def test_send_v1_header_names(shared_broker):
    broker, _ = shared_broker
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
def test_batch_of_1000_is_stored_whole_with_the_batch_properties(shared_broker, encoding):
    broker, _ = shared_broker
    topic = f"Batch{encoding}"
    messages = [(i, f"m{i}".encode(), {"UNIQ_KEY": f"U{i:031d}", "TAGS": f"t{i % 3}"})
                for i in range(1000)]  # fmt: skip
    header = wc.send_header_v2("pg", topic, 2, {"WAIT": "true"}, batch=True)
    with wc.WireClient(broker.address, encoding) as c:
        resp = c.call(wc.SEND_BATCH_MESSAGE, header, wc.batch_body(messages))
    assert resp.code == wc.SUCCESS, resp
    ids = resp.ext["msgId"].split(",")
    assert len(ids) == 1000 and resp.ext["queueOffset"] == "0" and resp.ext["queueId"] == "2"
    records = []
    dispatched(broker, topic, 2, 1000)
    with wc.WireClient(broker.address) as c:
        offset = 0
        while offset < 1000:
            r = c.call(wc.PULL_MESSAGE, wc.pull_header("g", topic, 2, offset, sys_flag=4))
            assert r.code == wc.SUCCESS
            records += wc.pulled_records(r.body)
            offset = int(r.ext["nextBeginOffset"])
    assert [r["offset_msg_id"] for r in records] == ids
    assert [r["queue_offset"] for r in records] == list(range(1000))
    assert [r["body"] for r in records] == [m[1] for m in messages]
    assert [r["flag"] for r in records] == list(range(1000))
    assert records[5]["properties"] == {"UNIQ_KEY": f"U{5:031d}", "TAGS": "t2", "WAIT": "true",
                                        "CLUSTER": "DefaultCluster"}  # fmt: skip


def test_shared_memory_consumer_reads_tcp_sends_field_for_field(shared_broker):
    broker, namesrv = shared_broker
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


def send(broker, topic: str, queue_id: int, props: dict[str, str], body: bytes = b"x",
         encoding: int = wc.JSON, **kw) -> wc.Frame:  # fmt: skip
    with wc.WireClient(broker.address, encoding) as c:
        return c.call(wc.SEND_MESSAGE_V2, wc.send_header_v2("pg", topic, queue_id, props, **kw),
                      body)  # fmt: skip


def test_delayed_message_goes_through_the_schedule_topic_as_a_producers(shared_broker):
    broker, namesrv = shared_broker
    resp = send(broker, "Later", 3, {"DELAY": "1", "UNIQ_KEY": "D" * 32})
    assert resp.code == wc.SUCCESS and resp.ext["queueId"] == "3", resp  # the one asked for
    (record,) = stored(broker, "SCHEDULE_TOPIC_XXXX", 0, 1)
    expected = {"UNIQ_KEY": "D" * 32, "CLUSTER": "DefaultCluster", "REAL_TOPIC": "Later",
                "REAL_QID": "3", "DELAY": "1"}  # fmt: skip
    assert record["properties"] == expected
    dispatched(broker, "Later", 3, 1)  # delivered after its level's 1 s
    with QueueReader("later", namesrv) as reader:
        (msg,) = reader.pull(MessageQueue("Later", broker.config.broker_name, 3), 0).messages
    assert msg.msg_id == "D" * 32 and msg.body == b"x"


def test_half_message_over_tcp_commits_with_end_transaction(shared_broker):
    broker, _ = shared_broker
    props = {"TRAN_MSG": "true", "PGROUP": "txg", "UNIQ_KEY": "E" * 32}
    resp = send(broker, "TxReal", 1, props, b"tx", sys_flag=0x4)
    assert resp.code == wc.SUCCESS, resp
    half = [r for r in stored(broker, "RMQ_SYS_TRANS_HALF_TOPIC", 0, 1) if r["body"] == b"tx"]
    assert half and half[0]["sysflag"] & 0xC == 0  # reset to TRANSACTION_NOT, as 4.9
    assert half[0]["properties"]["REAL_TOPIC"] == "TxReal"
    assert half[0]["properties"]["REAL_QID"] == "1"
    _, phys = half[0]["offset_msg_id"][:16], half[0]["phys"]
    with RemotingClient() as client:
        client.invoke_json(broker.address, RequestCode.END_TRANSACTION, {
            "producerGroup": "txg", "tranStateTableOffset": half[0]["queue_offset"],
            "commitLogOffset": phys, "commitOrRollback": 8, "fromTransactionCheck": False,
            "msgId": "E" * 32})  # fmt: skip
    (committed,) = stored(broker, "TxReal", 1, 1)
    assert committed["body"] == b"tx" and committed["sysflag"] & 0xC == 0x8


def test_retry_send_past_the_maximum_goes_to_the_dlq(shared_broker):
    broker, _ = shared_broker
    resp = send(broker, "%RETRY%dg", 0, {"UNIQ_KEY": "F" * 32}, reconsume=3, max_reconsume=3)
    assert resp.code == wc.SUCCESS, resp
    (record,) = stored(broker, "%DLQ%dg", 0, 1)
    assert record["reconsume_times"] == 3 and record["properties"]["UNIQ_KEY"] == "F" * 32
    assert send(broker, "%RETRY%dg", 0, {}, reconsume=1).code == wc.SUCCESS
    assert stored(broker, "%RETRY%dg", 0, 1)[0]["reconsume_times"] == 1


def test_sync_flush_answers_success_only_after_the_flush(make_broker):
    from shmq.ipc import counters as cn

    broker, _ = make_broker(flush_disk_type="SYNC_FLUSH")
    with wc.WireClient(broker.address) as c:
        for i in range(20):
            resp = c.call(wc.SEND_MESSAGE_V2, wc.send_header_v2("pg", "Durable", 0, {}),
                          b"d" * (i + 1))  # fmt: skip
            assert resp.code == wc.SUCCESS, resp
            flushed = cn.load(broker.counters.words, cn.FLUSHED_OFFSET)
            phys = int(resp.ext["msgId"][16:], 16)
            assert flushed > phys  # past the whole record: flushed before the answer


def test_a_sync_master_without_a_slave_answers_slave_not_available(make_broker):
    """4.9's handleHA: the message is stored, but SEND_OK needs a slave in reach; a send
    that does not wait for its store (WAIT=false) is answered SUCCESS."""
    from e2e_helpers import free_port

    broker, _ = make_broker(broker_role="SYNC_MASTER", ha_listen_port=free_port())
    slave_not_available = 11
    with wc.WireClient(broker.address) as c:
        resp = c.call(wc.SEND_MESSAGE_V2, wc.send_header_v2("pg", "Replicated", 0, {}), b"r")
        assert resp.code == slave_not_available, resp
        assert resp.ext["queueOffset"] == "0"  # stored all the same
        no_wait = wc.send_header_v2("pg", "Replicated", 0, {"WAIT": "false"})
        assert c.call(wc.SEND_MESSAGE_V2, no_wait, b"w").code == wc.SUCCESS
    assert dispatched(broker, "Replicated", 0, 2) == 2


@pytest.mark.parametrize("encoding", [wc.JSON, wc.ROCKETMQ])
def test_bad_requests_are_answered_and_the_connection_goes_on(shared_broker, encoding):
    broker, _ = shared_broker
    topic = f"Bad{encoding}"
    good = wc.send_header_v2("pg", topic, 0, {"TAGS": "t"})
    cases = [
        ({k: v for k, v in good.items() if k != "b"}, b"x", wc.SYSTEM_ERROR, "<b> is null"),
        (good | {"e": "zero"}, b"x", wc.SYSTEM_ERROR, "<e> = 'zero' is not a Java Integer"),
        (good | {"g": "1" * 30}, b"x", wc.SYSTEM_ERROR, "<g>"),
        (good | {"b": "bad topic!"}, b"x", wc.SYSTEM_ERROR, "is invalid"),
        (good | {"b": "SCHEDULE_TOPIC_XXXX"}, b"x", wc.NO_PERMISSION, "is forbidden"),
        (good | {"e": "4096"}, b"x", wc.SYSTEM_ERROR, "queueId[4096] is illegal"),
        (good, b"", wc.MESSAGE_ILLEGAL, "body of 0 bytes"),
        (good, b"x" * (4 * 1024 * 1024 + 1), wc.MESSAGE_ILLEGAL, "maxMessageSize"),
        (good | {"i": "DELAY\x01soon\x02"}, b"x", wc.MESSAGE_ILLEGAL, "DELAY = 'soon'"),
        (good | {"f": "4"}, b"x", wc.MESSAGE_ILLEGAL, "TRAN_MSG"),
    ]
    messages = [(0, b"ok", {"UNIQ_KEY": "1" * 32})] * 3
    bad_batch = wc.batch_body(messages)[:-3] + wc.batch_body(messages)[-2:]  # entry 2 cut
    batch = good | {"m": "true"}
    cases += [
        (batch, bad_batch, wc.MESSAGE_ILLEGAL, "batch body: message 2"),
        (batch, wc.batch_body([*messages[:1], (0, b"", {})]), wc.MESSAGE_ILLEGAL, "message 1"),
        (batch | {"i": "DELAY\x012\x02"}, wc.batch_body(messages), wc.MESSAGE_ILLEGAL, "delayed"),
        (batch, b"\xff" * 50, wc.MESSAGE_ILLEGAL, "message 0"),
    ]
    with wc.WireClient(broker.address, encoding) as c:
        for ext, body, code, remark in cases:
            resp = c.call(wc.SEND_MESSAGE_V2, ext, body)
            assert (resp.code, resp.ext.get("MSG_REGION")) == (code, "DefaultRegion"), resp
            assert remark in resp.remark, (remark, resp.remark)
        resp = c.call(9999, {"x": "y"})
        assert resp.code == wc.REQUEST_CODE_NOT_SUPPORTED and "9999" in resp.remark
        resp = c.call(wc.SEND_BATCH_MESSAGE, batch, wc.batch_body(messages))
        assert resp.code == wc.SUCCESS and resp.ext["queueOffset"] == "0", resp
    assert dispatched(broker, topic, 0, 3) == 3  # only the good batch


def test_numeric_and_boolean_ext_fields_of_data_codes(shared_broker):
    """Issue 18: a client in another language sends SEND_MESSAGE_V2 and PULL_MESSAGE with
    JSON numbers and booleans in extFields; 4.9 reads them as text, so does the broker."""
    broker, _ = shared_broker
    raw = {"a": "pg", "b": "Numeric", "c": "TBW102", "d": 4, "e": 0, "f": 0,
           "g": 1700000000000, "h": 0, "i": "UNIQ_KEY\x01" + "9" * 32 + "\x02", "j": 0,
           "k": False, "m": False}  # fmt: skip
    with wc.WireClient(broker.address) as c:
        resp = c.call(wc.SEND_MESSAGE_V2, {}, b"n", raw_ext=raw)
        assert resp.code == wc.SUCCESS, resp
        resp = c.call(wc.SEND_MESSAGE, {}, b"n", raw_ext={
            "producerGroup": "pg", "topic": "Numeric", "defaultTopic": "TBW102",
            "defaultTopicQueueNums": 4, "queueId": 0, "sysFlag": 0, "bornTimestamp": 5,
            "flag": 0, "unitMode": False, "batch": False})  # fmt: skip
        assert resp.code == wc.SUCCESS and resp.ext["queueOffset"] == "1", resp
        dispatched(broker, "Numeric", 0, 2)
        resp = c.call(wc.PULL_MESSAGE, {}, raw_ext={
            "consumerGroup": "ng", "topic": "Numeric", "queueId": 0, "queueOffset": 0,
            "maxMsgNums": 32, "sysFlag": 4, "commitOffset": 0, "suspendTimeoutMillis": 0,
            "subscription": "*", "subVersion": 0, "expressionType": "TAG"})  # fmt: skip
        assert resp.code == wc.SUCCESS and len(wc.pulled_records(resp.body)) == 2, resp
