"""The broker's control plane and data-path checks, with an in-process supervisor (its
agents are real processes) and namesrv."""

from __future__ import annotations

import collections
import itertools
import json
import socket
import struct
import threading
import time
from pathlib import Path

import pytest
import wire_client as wc
from test_remoting_send import dispatched
from waiting import wait_for

from shmq.broker.supervisor import Broker
from shmq.client.producer.producer import Producer
from shmq.client.transport.queue_reader import QueueReader
from shmq.client.types import PullStatus, SendStatus
from shmq.errors import MessageTooLargeError, NoRouteError, ResponseError, SendError
from shmq.ipc import counters as cn
from shmq.ipc import topic_table as tt
from shmq.message import Message, parse_offset_msg_id
from shmq.remoting.admin_bodies import runtime_stats
from shmq.remoting.client import RemotingClient
from shmq.remoting.frames import read_frame
from shmq.remoting.protocol import (
    RemotingCommand,
    RequestCode,
    ResponseCode,
    SerializeType,
)


def invoke(broker: Broker, code: int, **fields):
    with RemotingClient() as client:
        return client.invoke_json(broker.address, code, fields)


def test_offsets_queries_and_client_registry(shared_broker):
    broker, namesrv = shared_broker
    with Producer("pg", namesrv) as producer:
        sent = [producer.send(Message("Q", f"m{i}", tags="T", keys=[f"k{i}"])) for i in range(20)]
    assert {r.send_status for r in sent} == {SendStatus.SEND_OK}
    r = sent[3]
    mq = r.message_queue
    expected = sum(s.message_queue == mq for s in sent)
    assert dispatched(broker, "Q", mq.queue_id, expected) == expected
    invoke(
        broker,
        RequestCode.UPDATE_CONSUMER_OFFSET,
        consumerGroup="g",
        topic="Q",
        queueId=0,
        commitOffset=5,
    )
    resp, _ = invoke(
        broker, RequestCode.QUERY_CONSUMER_OFFSET, consumerGroup="g", topic="Q", queueId=0
    )
    assert resp.ext_fields["offset"] == "5"
    _, phys = parse_offset_msg_id(r.offset_msg_id)
    _, msg = invoke(broker, RequestCode.VIEW_MESSAGE_BY_ID, offset=phys)
    assert msg["body"] == "bTM=" and msg["msgId"] == r.msg_id and msg["keys"] == ["k3"]
    _, found = invoke(broker, RequestCode.QUERY_MESSAGE, topic="Q", key="k7", maxNum=4)
    assert [m["keys"] for m in found["messages"]] == [["k7"]]
    resp, _ = invoke(
        broker, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, topic="Q", queueId=mq.queue_id, timestamp=0
    )
    assert resp.ext_fields["offset"] == "0"
    with RemotingClient() as client:
        body = {"clientID": "c1", "consumerDataSet": [{"groupName": "g"}]}
        client.invoke_json(broker.address, RequestCode.HEART_BEAT, body_obj=body)
        _, ids = client.invoke_json(
            broker.address, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "g"}
        )
    assert ids == {"consumerIdList": ["c1"]}


def query_offset(broker: Broker, group: str, topic: str, queue_id: int) -> int | None:
    """The QUERY_CONSUMER_OFFSET answer; None for QUERY_NOT_FOUND."""
    try:
        resp, _ = invoke(
            broker,
            RequestCode.QUERY_CONSUMER_OFFSET,
            consumerGroup=group,
            topic=topic,
            queueId=queue_id,
        )
    except ResponseError as err:
        assert err.code == ResponseCode.QUERY_NOT_FOUND
        return None
    return int(resp.ext_fields["offset"])


def test_query_offset_of_a_new_group_as_rocketmq_4_9(make_broker):
    """No committed offset: 0 while the queue starts at 0 and its first message is "in
    memory" (or it is empty); QUERY_NOT_FOUND once that message is "in disk", here forced
    with accessMessageInMemoryMaxRatio 0."""
    for ratio, on_a_used_queue in ((40, 0), (0, None)):
        broker, namesrv = make_broker(access_message_in_memory_max_ratio=ratio)
        with Producer("pg", namesrv) as producer:
            mq = producer.send(Message("Young", "first")).message_queue
        dispatched(broker, "Young", mq.queue_id, 1)
        assert query_offset(broker, "new-g", "Young", mq.queue_id) == on_a_used_queue
        empty = (mq.queue_id + 1) % 4
        assert query_offset(broker, "new-g", "Young", empty) == 0
        invoke(
            broker,
            RequestCode.UPDATE_CONSUMER_OFFSET,
            consumerGroup="new-g",
            topic="Young",
            queueId=mq.queue_id,
            commitOffset=1,
        )
        assert query_offset(broker, "new-g", "Young", mq.queue_id) == 1


def test_numeric_and_boolean_ext_fields_are_answered_in_both_encodings(shared_broker):
    """Offsets requests as RocketMQ clients in other languages send them: JSON numbers and
    booleans in a JSON header, or a ROCKETMQ (binary) header; each is answered in its own
    encoding and the connection stays open."""
    broker, namesrv = shared_broker
    with Producer("pg", namesrv) as producer:
        sent = [producer.send(Message("Num", f"m{i}")) for i in range(6)]
    counts = collections.Counter(r.message_queue.queue_id for r in sent)
    for queue_id, count in counts.items():
        dispatched(broker, "Num", queue_id, count)
    opaques = itertools.count(1)

    def frame(kind: SerializeType, code: int, **fields) -> bytes:
        if kind is SerializeType.ROCKETMQ:  # every value is text in a binary header
            return RemotingCommand(
                code, next(opaques), ext_fields=fields, serialize_type=kind
            ).encode()
        header = {"code": code, "language": "CPP", "opaque": next(opaques), "flag": 0}
        header |= {"extFields": fields, "serializeTypeCurrentRPC": "JSON"}
        raw = json.dumps(header).encode()
        assert b'"queueId": "' not in raw  # numbers stay JSON numbers
        return struct.pack(">II", 4 + len(raw), len(raw)) + raw

    host, port = broker.address.split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:

        def call(kind: SerializeType, code: int, **fields) -> RemotingCommand:
            s.sendall(frame(kind, code, **fields))
            resp = read_frame(s)
            assert resp is not None, "the broker closed the connection"
            assert resp.serialize_type is kind and resp.code == ResponseCode.SUCCESS, resp
            return resp

        for kind in SerializeType:
            group = f"g-{kind.name}"
            q = RequestCode.QUERY_CONSUMER_OFFSET
            resp = call(kind, q, consumerGroup=group, topic="Num", queueId=0)
            assert resp.ext_fields["offset"] == "0"  # a new group on a queue starting at 0
            call(
                kind,
                RequestCode.UPDATE_CONSUMER_OFFSET,
                consumerGroup=group,
                topic="Num",
                queueId=0,
                commitOffset=1,
                k=False,
            )
            resp = call(kind, q, consumerGroup=group, topic="Num", queueId=0)
            assert resp.ext_fields["offset"] == "1"
            for queue_id, count in counts.items():
                resp = call(kind, RequestCode.GET_MAX_OFFSET, topic="Num", queueId=queue_id)
                assert resp.ext_fields["offset"] == str(count)


def test_malformed_frame_harms_nothing(shared_broker):
    broker, namesrv = shared_broker
    host, port = broker.address.split(":")
    with socket.create_connection((host, int(port))) as s:
        s.sendall(b"\x7f\xff\xff\xffgarbage")
        s.settimeout(5)
        assert s.recv(10) == b""  # the broker closed this connection
    with Producer("pg", namesrv) as producer:
        assert producer.send(Message("Fine", "still fine")).send_status is SendStatus.SEND_OK


def test_rejections_name_the_reason(make_broker):
    broker, namesrv = make_broker(auto_create_topic_enable=False)
    with Producer("pg", namesrv) as producer:
        with pytest.raises(NoRouteError, match="No route info of this topic: Nope"):
            producer.send(Message("Nope", "x"))
        invoke(
            broker,
            RequestCode.UPDATE_AND_CREATE_TOPIC,
            topic="RO",
            readQueueNums=1,
            writeQueueNums=1,
            perm=4,
        )
        invoke(
            broker,
            RequestCode.UPDATE_AND_CREATE_TOPIC,
            topic="RW",
            readQueueNums=1,
            writeQueueNums=1,
        )
        with pytest.raises(SendError, match="no broker accepts writes"):
            producer.send(Message("RO", "x"))
        too_big = Message("RW", b"x" * (4 * 1024 * 1024 + 1))
        with pytest.raises(MessageTooLargeError, match="maxMessageSize"):
            producer.send(too_big)  # the client checks first
    # uncompressed (compressed, 4 MiB of "x" would be a few KiB: the broker sees those)
    with Producer("pg", namesrv, max_message_size=8 << 20,
                  compress_msg_body_over_howmuch=8 << 20) as lenient:  # fmt: skip
        with pytest.raises(SendError, match="maxMessageSize"):
            lenient.send(too_big)  # and the broker checks again
        assert lenient.send(Message("RW", "ok")).queue_offset == 0  # the ring goes on


def test_sync_flush_acknowledges_after_the_flush(make_broker):
    broker, namesrv = make_broker(flush_disk_type="SYNC_FLUSH")
    with Producer("pg", namesrv) as producer:
        results = [producer.send(Message("S", f"m{i}")) for i in range(50)]
        batch = producer.send_batch([Message("S", f"b{i}") for i in range(50)])
    assert {r.send_status for r in results + batch} == {SendStatus.SEND_OK}
    words = broker.counters.words
    last = max(parse_offset_msg_id(r.offset_msg_id)[1] for r in results + batch)
    assert cn.load(words, cn.FLUSHED_OFFSET) > last
    assert cn.load(words, cn.FLUSHES) >= 1
    with QueueReader("g", namesrv) as consumer:
        offsets = dict.fromkeys(consumer.queues("S"), 0)
        got: list = []

        def all_read() -> bool:
            for mq, offset in offsets.items():
                result = consumer.pull(mq, offset, 1024)
                offsets[mq] = result.next_begin_offset
                got.extend(result.messages)
            if len(got) < 100:
                consumer.wait(offsets, 0.5)  # until a queue has more
            return len(got) >= 100

        wait_for(all_read, interval=0, what="the 100 messages sent")
    assert len(got) == 100


def test_long_poll_wakes_on_a_new_message(make_broker):
    _, namesrv = make_broker(default_topic_queue_nums=1)
    with Producer("pg", namesrv) as producer, QueueReader("g", namesrv) as consumer:
        producer.send(Message("L", "first"))
        mq = consumer.queues("L")[0]
        assert consumer.pull(mq, 0, timeout=5.0).messages[0].body == b"first"
        assert consumer.pull(mq, 1, timeout=0.05).pull_status is PullStatus.NO_NEW_MSG
        threading.Timer(0.3, lambda: producer.send(Message("L", "second"))).start()
        started = time.monotonic()
        result = consumer.pull(mq, 1, timeout=10.0)
        waited = time.monotonic() - started
        assert result.pull_status is PullStatus.FOUND and result.messages[0].body == b"second"
        assert 0.2 < waited < 5.0
        assert consumer.pull(mq, 99).pull_status is PullStatus.OFFSET_ILLEGAL


def test_an_auto_created_topic_is_registered_before_its_first_send_is_answered(make_broker):
    """The writer appends a new topic's first message once the topic is published, so the
    namesrv must know the topic by then: a consumer asking for the route right after the
    send finds it (a race CI once lost)."""
    broker, namesrv = make_broker(default_topic_queue_nums=1)
    seen = []
    register = broker.registration.register_all

    def register_and_look() -> None:
        seen.append(b"A" in tt.read_topics(broker.topic_seg.buf, broker.topic_seg.words)[1])
        register()

    broker.registration.register_all = register_and_look
    with Producer("pg", namesrv) as producer, QueueReader("g", namesrv) as consumer:
        producer.send(Message("A", "first"))
        assert consumer.queues("A")
    assert seen and not any(seen)


BAD_NAMES = ["../../etc", "a/b", "x" * 300, "", "名前", "T T"]


def test_every_name_a_request_carries_is_checked(shared_broker):
    broker, _ = shared_broker
    addr = broker.address
    calls = [
        (RequestCode.GET_MAX_OFFSET, {"topic": "{}", "queueId": "0"}),
        (RequestCode.GET_MIN_OFFSET, {"topic": "{}", "queueId": "0"}),
        (RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {"topic": "{}", "queueId": "0",
                                                  "timestamp": "0"}),
        (RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "{}", "topic": "T",
                                             "queueId": "0"}),
        (RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "g", "topic": "{}",
                                              "queueId": "0", "commitOffset": "1"}),
        (RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "{}", "readQueueNums": "1",
                                               "writeQueueNums": "1"}),
        (RequestCode.REGISTER_PRODUCER, {"pid": "1", "group": "{}"}),
    ]  # fmt: skip
    with RemotingClient() as client:
        for code, fields in calls:
            for bad in BAD_NAMES:
                request = {k: v.replace("{}", bad) for k, v in fields.items()}
                with pytest.raises(ResponseError, match="invalid") as err:
                    client.invoke_json(addr, code, request)
                assert err.value.code == ResponseCode.SYSTEM_ERROR
        # a valid group cannot persist offsets of topics the broker does not have
        with pytest.raises(ResponseError) as err:
            client.invoke_json(addr, RequestCode.UPDATE_CONSUMER_OFFSET,
                               {"consumerGroup": "g", "topic": "NoSuchTopic", "queueId": "0",
                                "commitOffset": "1"})  # fmt: skip
        assert err.value.code == ResponseCode.TOPIC_NOT_EXIST
        heartbeat = {"clientID": "c1", "consumerDataSet": [{"groupName": "../g"}]}
        with pytest.raises(ResponseError, match="invalid"):
            client.invoke_json(addr, RequestCode.HEART_BEAT, body_obj=heartbeat)
        _, info = client.invoke_json(addr, RequestCode.GET_BROKER_RUNTIME_INFO)
    assert runtime_stats(info)["broker"] == broker.config.broker_name
    assert not (Path(broker.root).parent / "etc").exists()  # ../../etc from config/


def test_a_clustering_heartbeat_creates_the_group_and_its_retry_topic(shared_broker):
    """Issue 18, as RocketMQ 4.9: a CLUSTERING consumer's first HEART_BEAT creates its
    subscription group (autoCreateSubscriptionGroup) and ``%RETRY%<group>``, which the
    namesrv routes right after; ``shmq admin examine-sub-group`` shows the group."""
    from click.testing import CliRunner

    from shmq_cli.admin import admin

    broker, namesrv = shared_broker
    consumer = {"groupName": "hb-group", "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "subscriptionDataSet": [{"topic": "HbTopic", "subString": "*"}],
                "unitMode": False}  # fmt: skip
    body = {"clientID": "10.0.0.9@1#hb", "producerDataSet": [], "consumerDataSet": [consumer]}
    with RemotingClient() as client:
        client.invoke_json(broker.address, RequestCode.HEART_BEAT, body_obj=body)

        def retry_route():
            resp = client.invoke(namesrv, RemotingCommand.request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "%RETRY%hb-group"}))  # fmt: skip
            return resp if resp.code == ResponseCode.SUCCESS else None

        resp = wait_for(retry_route, what="a route for %RETRY%hb-group")
    route = resp.json_body()
    assert [q["brokerName"] for q in route["queueDatas"]] == [broker.config.broker_name]
    result = CliRunner().invoke(
        admin, ["examine-sub-group", "-g", "hb-group", "-n", namesrv, "--json"]
    )
    assert result.exit_code == 0, result.output
    configs = json.loads(result.output)
    assert configs[broker.config.broker_name]["groupName"] == "hb-group"
    result = CliRunner().invoke(admin, ["examine-sub-group", "-g", "nobody", "-n", namesrv])
    assert result.exit_code != 0 and "does not exist" in str(result.exception or result.output)


def test_first_offsets_are_kept_only_for_pulled_queues_until_their_topic_goes(make_broker):
    """The first-offset answers the pull path reuses for a second are kept per queue; an
    admin GET_MIN_OFFSET may name any topic and queue id, so its answers are not kept (a
    client could otherwise grow the broker's memory without bound), and deleting a topic
    drops what was kept of it."""
    broker, namesrv = make_broker()
    cache = broker.context.store._min_offsets
    with Producer("min-p", namesrv) as producer:
        producer.send(Message("MinQ", b"m"))
    # as after a cleanup (the min offset then looks past units below it): the names of
    # queues that have no files open nothing either
    cn.publish(broker.counters.words, cn.MIN_PHYSICAL_OFFSET, 1)
    with RemotingClient() as client:
        for i in range(200):
            resp, _ = client.invoke_json(broker.address, RequestCode.GET_MIN_OFFSET,
                                         {"topic": f"Nowhere{i}", "queueId": str(i)})  # fmt: skip
            assert resp.ext_fields["offset"] == "0"
    assert cache == {}
    with broker.context.store.reading() as store_reader:
        assert not [key for key in store_reader._queues if key[0] != "MinQ"]
    # pulls of the supervisor's own pull processor (on the control server; the data server,
    # which answers the public port's pulls, keeps such answers in its own process)
    with wc.WireClient(broker.server.address) as c:
        for qid in range(broker.topics.get("MinQ").read_queue_nums):
            header = wc.pull_header("min-c", "MinQ", qid, 0, sys_flag=wc.SUBSCRIPTION)
            c.call(wc.PULL_MESSAGE, header)
    assert {key[0] for key in cache} == {"MinQ"}
    with RemotingClient() as client:
        client.invoke_json(broker.address, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "MinQ"})
    assert cache == {}
