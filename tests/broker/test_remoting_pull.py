"""PULL_MESSAGE over TCP: 4.9's statuses and header, long polling woken by reput, tag
filtering, offset commits, and messages sent through shared memory pulled over TCP,
checked with the independent wire client and the spec decoder."""

from __future__ import annotations

import json
import threading

import pytest
import wire_client as wc
from test_remoting_send import dispatched, send
from waiting import wait_for

from shmq.client.producer.producer import Producer
from shmq.client.transport.queue_reader import QueueReader
from shmq.client.types import MessageQueue, PullStatus
from shmq.message import Message
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RequestCode


def pull(broker, topic: str, queue_id: int, offset: int, encoding: int = wc.JSON,
         **kw) -> wc.Frame:  # fmt: skip
    with wc.WireClient(broker.address, encoding) as c:
        return c.call(wc.PULL_MESSAGE, wc.pull_header("pg-tcp", topic, queue_id, offset, **kw))


def create_topic(broker, topic: str) -> None:
    with RemotingClient() as client:
        client.invoke_json(broker.address, RequestCode.UPDATE_AND_CREATE_TOPIC,
                           {"topic": topic, "readQueueNums": 4, "writeQueueNums": 4})  # fmt: skip


# the tests that watch the hold's table ask the control server directly (on loopback): the
# broker's public port is the data server's, another process with a hold of its own (the
# same ``PullHold``), whose held pulls ``tests/broker/test_data_server.py`` checks by answers


def to_queue(queues: list[MessageQueue], _msg: Message, queue_id: int) -> MessageQueue:
    return next(q for q in queues if q.queue_id == queue_id)


def header(resp: wc.Frame) -> tuple[int, int, int, int]:
    assert set(resp.ext) == {"suggestWhichBrokerId", "nextBeginOffset", "minOffset",
                             "maxOffset"}, resp.ext  # fmt: skip
    e = resp.ext
    return (int(e["nextBeginOffset"]), int(e["minOffset"]), int(e["maxOffset"]),
            int(e["suggestWhichBrokerId"]))  # fmt: skip


@pytest.mark.parametrize("encoding", [wc.JSON, wc.ROCKETMQ])
def test_statuses_and_header_as_4_9(shared_broker, encoding):
    broker, _ = shared_broker
    topic = f"Status{encoding}"
    no_wait = wc.SUBSCRIPTION
    for i in range(3):
        assert send(broker, topic, 0, {"TAGS": f"t{i}"}, f"b{i}".encode()).code == wc.SUCCESS
    dispatched(broker, topic, 0, 3)
    resp = pull(broker, topic, 0, 0, encoding, sys_flag=no_wait)
    assert (resp.code, resp.remark) == (wc.SUCCESS, "FOUND")
    assert header(resp) == (3, 0, 3, 0)
    assert [r["body"] for r in wc.pulled_records(resp.body)] == [b"b0", b"b1", b"b2"]
    resp = pull(broker, topic, 0, 1, encoding, sys_flag=no_wait, max_nums=1)
    assert header(resp)[0] == 2 and len(wc.pulled_records(resp.body)) == 1
    resp = pull(broker, topic, 0, 3, encoding, sys_flag=no_wait)
    assert (resp.code, resp.remark, header(resp)) == (wc.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE",
                                                      (3, 0, 3, 0))  # fmt: skip
    resp = pull(broker, topic, 0, 9, encoding, sys_flag=no_wait)  # far past a queue from 0:
    assert (resp.code, resp.remark, header(resp)[0]) == (wc.PULL_OFFSET_MOVED,  # from 0 again
                                                         "OFFSET_OVERFLOW_BADLY", 0)  # fmt: skip
    resp = pull(broker, topic, 1, 0, encoding, sys_flag=no_wait)  # an empty queue
    assert (resp.code, resp.remark, header(resp)) == (wc.PULL_NOT_FOUND, "NO_MESSAGE_IN_QUEUE",
                                                      (0, 0, 0, 0))  # fmt: skip
    resp = pull(broker, topic, 1, 5, encoding, sys_flag=no_wait)
    assert (resp.code, header(resp)[0]) == (wc.PULL_OFFSET_MOVED, 0)
    resp = pull(broker, topic, 0, 0, encoding, sys_flag=no_wait, subscription="t1 || t2")
    assert [r["body"] for r in wc.pulled_records(resp.body)] == [b"b1", b"b2"]
    resp = pull(broker, topic, 0, 0, encoding, sys_flag=no_wait, subscription="nope")
    assert (resp.code, resp.remark, header(resp)[0]) == (wc.PULL_RETRY_IMMEDIATELY,
                                                         "NO_MATCHED_MESSAGE", 3)  # fmt: skip


def test_at_most_32_messages_of_the_commitlogs_end_per_pull(shared_broker):
    broker, _ = shared_broker
    with wc.WireClient(broker.address) as c:
        messages = [(0, b"m", {})] * 40
        header_v2 = wc.send_header_v2("pg", "Many", 0, {}, batch=True)
        assert c.call(wc.SEND_BATCH_MESSAGE, header_v2, wc.batch_body(messages)).code == 0
    dispatched(broker, "Many", 0, 40)
    resp = pull(broker, "Many", 0, 0, sys_flag=wc.SUBSCRIPTION, max_nums=100)
    assert len(wc.pulled_records(resp.body)) == 32 and header(resp)[0] == 32


def test_long_poll_returns_when_a_shared_memory_send_arrives(shared_broker):
    """A pull suspended on an empty queue is answered by the message that arrives, not by
    its timeout (60 s here, longer than the socket's): shared-memory send, TCP pull."""
    broker, namesrv = shared_broker
    create_topic(broker, "Poll")
    hold = broker.pull.hold  # the control server's (see above)
    missed = hold.parking.missed_wakeups
    with wc.WireClient(broker.server.address, wc.ROCKETMQ, timeout=30) as c:
        opaque = c.send(wc.PULL_MESSAGE, wc.pull_header("lp", "Poll", 0, 0, suspend_ms=60000))
        wait_for(lambda: broker.pull.hold.held() == 1, what="the pull to be held")
        with Producer("pg", namesrv) as producer:
            producer.send(Message("Poll", "woke", tags="w"), selector=to_queue, arg=0)
        resp = c.receive(opaque)
    assert resp.code == wc.SUCCESS, resp
    (record,) = wc.pulled_records(resp.body)
    assert record["body"] == b"woke" and record["properties"]["TAGS"] == "w"
    assert hold.held() == 0
    assert hold.parking.missed_wakeups == missed  # reput's post woke it, not a park's timeout


def test_long_poll_times_out_and_filters_what_arrives(shared_broker):
    broker, _ = shared_broker
    create_topic(broker, "Quiet")
    with wc.WireClient(broker.server.address, timeout=30) as c:  # the control server's hold
        resp = c.call(wc.PULL_MESSAGE, wc.pull_header("lp", "Quiet", 0, 0, suspend_ms=100))
        assert (resp.code, header(resp)[0]) == (wc.PULL_NOT_FOUND, 0)
        opaque = c.send(wc.PULL_MESSAGE, wc.pull_header("lp", "Quiet", 0, 0, suspend_ms=60000,
                                                        subscription="want"))  # fmt: skip
        wait_for(lambda: broker.pull.hold.held() == 1, what="the pull to be held")
        assert send(broker, "Quiet", 0, {"TAGS": "other"}).code == wc.SUCCESS
        dispatched(broker, "Quiet", 0, 1)
        assert broker.pull.hold.held() == 1  # nothing it takes: still held
        assert send(broker, "Quiet", 0, {"TAGS": "want"}, b"yes").code == wc.SUCCESS
        resp = c.receive(opaque)
    assert resp.code == wc.SUCCESS
    assert [r["body"] for r in wc.pulled_records(resp.body)] == [b"yes"]


def test_pull_commits_the_offset_it_carries(shared_broker):
    broker, _ = shared_broker
    assert send(broker, "Commit", 0, {}).code == wc.SUCCESS
    dispatched(broker, "Commit", 0, 1)
    flags = wc.COMMIT_OFFSET | wc.SUBSCRIPTION
    assert pull(broker, "Commit", 0, 0, sys_flag=flags, commit_offset=1).code == wc.SUCCESS

    def committed() -> tuple[int, str]:
        with wc.WireClient(broker.address) as c:
            header = {"consumerGroup": "pg-tcp", "topic": "Commit", "queueId": "0"}
            resp = c.call(wc.QUERY_CONSUMER_OFFSET, header)
        return resp.code, resp.ext["offset"]

    # the data server answered the pull and owes its account on that connection's link
    # (``data_server.accounts``): ahead of that connection's next request, but a query on
    # another connection may come first, so it sees the commit within FLUSH_S, not at once
    wait_for(lambda: committed() == (wc.SUCCESS, "1"), what="the pull's commit on the broker")


def test_subscription_from_the_heartbeat(shared_broker):
    """4.9's push consumer does not send its subscription with each pull: the broker takes
    the one of the group's last heartbeat."""
    broker, _ = shared_broker
    for tag in ("a", "b"):
        assert send(broker, "Beat", 0, {"TAGS": tag}, tag.encode()).code == wc.SUCCESS
    dispatched(broker, "Beat", 0, 2)
    with wc.WireClient(broker.address) as c:
        ext = wc.pull_header("hb", "Beat", 0, 0, sys_flag=0)
        resp = c.call(wc.PULL_MESSAGE, ext)
        assert resp.code == 24 and "group info not exist" in resp.remark  # SUBSCRIPTION_NOT_EXIST
        beat = {"clientID": "127.0.0.1@java", "producerDataSet": [], "consumerDataSet": [{
            "groupName": "hb", "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
            "subscriptionDataSet": [{"topic": "Beat", "subString": "b", "tagsSet": ["b"],
                                     "codeSet": [98], "subVersion": 7, "expressionType": "TAG",
                                     "classFilterMode": False}]}]}  # fmt: skip
        assert c.call(34, {}, json.dumps(beat).encode()).code == wc.SUCCESS  # HEART_BEAT
        resp = c.call(wc.PULL_MESSAGE, ext)
        assert [r["body"] for r in wc.pulled_records(resp.body)] == [b"b"]
        resp = c.call(wc.PULL_MESSAGE, ext | {"subVersion": "8"})
        assert resp.code == 25  # SUBSCRIPTION_NOT_LATEST


def test_bad_pulls_are_answered(shared_broker):
    broker, _ = shared_broker
    good = wc.pull_header("bad", "NoSuchTopic", 0, 0, sys_flag=wc.SUBSCRIPTION)
    with wc.WireClient(broker.address, wc.ROCKETMQ) as c:
        resp = c.call(wc.PULL_MESSAGE, {k: v for k, v in good.items() if k != "queueOffset"})
        assert resp.code == wc.SYSTEM_ERROR and "<queueOffset> is null" in resp.remark
        resp = c.call(wc.PULL_MESSAGE, good | {"maxMsgNums": "many"})
        assert resp.code == wc.SYSTEM_ERROR and "<maxMsgNums>" in resp.remark
        assert c.call(wc.PULL_MESSAGE, good).code == wc.TOPIC_NOT_EXIST
        assert send(broker, "PullBad", 0, {}).code == wc.SUCCESS
        resp = c.call(wc.PULL_MESSAGE, good | {"topic": "PullBad", "queueId": "99"})
        assert resp.code == wc.SYSTEM_ERROR and "queueId[99] is illegal" in resp.remark
        resp = c.call(wc.PULL_MESSAGE, good | {"topic": "PullBad", "expressionType": "SQL92"})
        assert resp.code == wc.SYSTEM_ERROR and "SQL92" in resp.remark
        resp = c.call(wc.PULL_MESSAGE, good | {"topic": "PullBad", "subscription": "||"})
        assert resp.code == 23  # SUBSCRIPTION_PARSE_FAILED


@pytest.mark.parametrize("kind", ["SQL92", "TAG"])
def test_check_client_config_refuses_what_a_pull_would(shared_broker, kind):
    """CHECK_CLIENT_CONFIG (46), which a 4.9 push consumer with a SQL92 subscription sends
    before it starts: refused as 4.9 refuses it without enablePropertyFilter; tags pass."""
    broker, _ = shared_broker
    body = {"clientId": "10.0.0.9@7#1", "group": "check-g", "subscriptionData": {
        "topic": "PullBad", "subString": "a > 1", "expressionType": kind, "tagsSet": [],
        "codeSet": [], "subVersion": 1, "classFilterMode": False}}  # fmt: skip
    with wc.WireClient(broker.address) as c:
        resp = c.call(46, {}, json.dumps(body).encode())
    if kind == "TAG":
        assert resp.code == wc.SUCCESS, resp
    else:
        assert resp.code == wc.SYSTEM_ERROR
        assert resp.remark == "The broker does not support consumer to filter message by SQL92"


def test_shared_memory_sends_pulled_over_tcp_are_the_same_messages(shared_broker):
    broker, namesrv = shared_broker
    mq = MessageQueue("Same", broker.config.broker_name, 1)
    with Producer("pg", namesrv) as producer:
        results = [producer.send(Message("Same", f"s{i}", tags="T", keys=[f"k{i}"],
                                         properties={"p": str(i)}), selector=to_queue, arg=1)
                   for i in range(5)]  # fmt: skip
    dispatched(broker, "Same", 1, 5)
    records = wc.pulled_records(pull(broker, "Same", 1, 0, sys_flag=wc.SUBSCRIPTION).body)
    with QueueReader("same", namesrv) as reader:
        messages = reader.pull(mq, 0, 32).messages
    for r, result, msg in zip(records, results, messages, strict=True):
        assert r["properties"]["UNIQ_KEY"] == result.msg_id == msg.msg_id
        assert r["offset_msg_id"] == result.offset_msg_id == msg.offset_msg_id
        assert r["queue_offset"] == result.queue_offset == msg.queue_offset
        assert r["properties"] == msg.properties and r["body"] == msg.body
        assert r["store_timestamp"] == msg.store_timestamp
        assert r["born_timestamp"] == msg.born_timestamp


def test_many_held_pulls_are_all_answered(shared_broker):
    broker, _ = shared_broker
    create_topic(broker, "Fan")
    answers = []

    def wait(q: int) -> None:
        with wc.WireClient(broker.server.address, timeout=30) as c:  # the control server's hold
            ext = wc.pull_header("many", "Fan", q, 0, suspend_ms=60000)
            answers.append(c.call(wc.PULL_MESSAGE, ext).code)

    threads = [threading.Thread(target=wait, args=(q % 4,)) for q in range(12)]
    for t in threads:
        t.start()
    wait_for(lambda: broker.pull.hold.held() == 12, what="12 pulls held")
    for q in range(4):
        assert send(broker, "Fan", q, {}).code == wc.SUCCESS
    for t in threads:
        t.join(30)
    assert answers == [wc.SUCCESS] * 12


def test_pulls_past_max_held_pulls_are_answered_at_once(make_broker):
    """maxHeldPulls bounds long polling: with one pull held, the next that finds nothing is
    answered PULL_NOT_FOUND at once instead of waiting its 60 s. Both on one connection,
    whose requests the broker handles in order: the first is held before the second is
    looked at."""
    broker, _ = make_broker(max_held_pulls=1)
    create_topic(broker, "Held")
    with wc.WireClient(broker.address, timeout=30) as c:
        opaque = c.send(wc.PULL_MESSAGE, wc.pull_header("mh", "Held", 0, 0, suspend_ms=60000))
        resp = c.call(wc.PULL_MESSAGE, wc.pull_header("mh", "Held", 1, 0, suspend_ms=60000))
        assert resp.code == wc.PULL_NOT_FOUND
        assert send(broker, "Held", 0, {}).code == wc.SUCCESS
        assert c.receive(opaque).code == wc.SUCCESS


def test_earliest_message_store_time(shared_broker):
    broker, _ = shared_broker
    with wc.WireClient(broker.address) as c:
        resp = c.call(32, {"topic": "Early", "queueId": "0"})  # GET_EARLIEST_MSG_STORETIME
        assert resp.code == wc.SYSTEM_ERROR and "no message" in resp.remark
        assert send(broker, "Early", 0, {}).code == wc.SUCCESS
        dispatched(broker, "Early", 0, 1)
        (record,) = wc.pulled_records(pull(broker, "Early", 0, 0, sys_flag=wc.SUBSCRIPTION).body)
        resp = c.call(32, {"topic": "Early", "queueId": "0"})
    assert resp.code == wc.SUCCESS and resp.ext == {"timestamp": str(record["store_timestamp"])}


@pytest.mark.parametrize("subscription", ["*", "t1", "nope"])
def test_tcp_and_shared_memory_pulls_answer_alike(shared_broker, subscription):
    """One fetch rule: a consumer reading the mapped files gets the status, next offset and
    messages a TCP consumer gets, wherever it asks from (before, inside, at and far past
    the queue), with and without a tag filter. A TCP consumer pulls again at once after
    PULL_RETRY_IMMEDIATELY (NO_MATCHED_MSG), as RocketMQ's does; a local read does that
    itself."""
    broker, namesrv = shared_broker
    topic = "Alike"
    for i in range(3):
        assert send(broker, topic, 0, {"TAGS": f"t{i}"}, f"b{i}".encode()).code == wc.SUCCESS
    dispatched(broker, topic, 0, 3)
    mq = MessageQueue(topic, broker.config.broker_name, 0)
    expression = None if subscription == "*" else subscription
    with (
        QueueReader("alike-shm", namesrv, transport="shm") as shm,
        QueueReader("alike-tcp", namesrv, transport="tcp") as tcp,
    ):
        for offset in (0, 1, 2, 3, 4, 9, 1000):
            local = shm.pull(mq, offset, 32, expression)
            remote = tcp.pull(mq, offset, 32, expression)
            while remote.pull_status is PullStatus.NO_MATCHED_MSG:
                remote = tcp.pull(mq, remote.next_begin_offset, 32, expression)
            assert (local.pull_status, local.next_begin_offset) == (
                remote.pull_status, remote.next_begin_offset), offset  # fmt: skip
            assert [m.body for m in local.messages] == [m.body for m in remote.messages]
