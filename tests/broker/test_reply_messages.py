"""SEND_REPLY_MESSAGE(_V2) with the independent wire client: the broker pushes the reply
to the requester as PUSH_REPLY_MESSAGE_TO_CLIENT with 4.9's ReplyMessageRequestHeader,
stores it in the cluster's reply topic, and answers as 4.9's ReplyMessageProcessor does
when the requester is unknown, absent or refuses."""

from __future__ import annotations

import contextlib
import json
import socket
import threading

import pytest
import wire_client as wc
from test_remoting_send import stored

HEART_BEAT, SEND_REPLY_MESSAGE, SEND_REPLY_MESSAGE_V2, PUSH_REPLY = 34, 324, 325, 326
REPLY_TOPIC = "DefaultCluster_REPLY_TOPIC"


def announce_producer(client: wc.WireClient, client_id: str, group: str) -> None:
    """Heartbeat as a producer of ``group``: the broker pushes replies to ``client_id`` here."""
    beat = {"clientID": client_id, "producerDataSet": [{"groupName": group}],
            "consumerDataSet": []}  # fmt: skip
    assert client.call(HEART_BEAT, {}, json.dumps(beat).encode()).code == wc.SUCCESS


class Requester:
    """A wire client announced as a producer that answers the broker's pushes with
    ``code`` on a thread of its own, keeping what it was pushed."""

    def __init__(self, address: str, client_id: str, encoding: int, code: int = wc.SUCCESS):
        self.client = wc.WireClient(address, encoding)
        announce_producer(self.client, client_id, "requesters")
        self.code = code
        self.pushed: list[wc.Frame] = []
        self.thread = threading.Thread(target=self._answer, daemon=True)
        self.thread.start()

    def _answer(self) -> None:
        try:
            while True:
                frame = self.client.read()
                self.pushed.append(frame)
                answer = wc.Frame(self.code, frame.opaque, wc.RESPONSE, None, {}, b"",
                                  self.client.serialize)  # fmt: skip
                self.client.sock.sendall(wc.encode(answer))
        except OSError:
            return

    def close(self) -> None:
        # a shutdown wakes the thread's recv; a close alone leaves it blocked until its timeout
        with contextlib.suppress(OSError):
            self.client.sock.shutdown(socket.SHUT_RDWR)
        self.client.close()
        self.thread.join(5)


def reply_props(client_id: str | None, correlation: str = "corr-1") -> dict[str, str]:
    props = {"CORRELATION_ID": correlation, "MSG_TYPE": "reply", "TTL": "3000"}
    if client_id is not None:
        props["REPLY_TO_CLIENT"] = client_id
    return props


@pytest.mark.parametrize("encoding", [wc.JSON, wc.ROCKETMQ])
def test_reply_is_pushed_to_its_requester_and_stored(shared_broker, encoding):
    broker, _ = shared_broker
    requester = Requester(broker.address, f"10.0.0.1@1#{encoding}", encoding)
    try:
        with wc.WireClient(broker.address, encoding) as replier:
            header = wc.send_header_v2("responders", REPLY_TOPIC, 0,
                                       reply_props(f"10.0.0.1@1#{encoding}"), flag=3)  # fmt: skip
            resp = replier.call(SEND_REPLY_MESSAGE_V2, header, b"the answer")
            local = "{}:{}".format(*replier.sock.getsockname())
    finally:
        requester.close()
    assert resp.code == wc.SUCCESS and resp.remark is None, resp
    assert len(resp.ext["msgId"]) == 32 and resp.ext["queueId"] == "0"
    (push,) = requester.pushed
    assert push.code == PUSH_REPLY and not push.flag & wc.RESPONSE
    assert push.body == b"the answer"
    h = push.ext
    assert (h["producerGroup"], h["topic"], h["queueId"], h["flag"], h["sysFlag"]) == (
        "responders", REPLY_TOPIC, "0", "3", "0")  # fmt: skip
    assert (h["defaultTopic"], h["defaultTopicQueueNums"]) == ("TBW102", "4")
    assert h["unitMode"] == "false"
    assert h["bornTimestamp"] == "1700000000000" and h["reconsumeTimes"] == "0"
    assert h["bornHost"] == local and h["storeHost"] == broker.config.store.store_host
    assert int(h["storeTimestamp"]) > 1_700_000_000_000
    props = dict(p.split("\x01") for p in h["properties"].split("\x02") if p)
    assert props["CORRELATION_ID"] == "corr-1" and props["MSG_TYPE"] == "reply"
    assert int(props["PUSH_REPLY_TIME"]) >= int(h["storeTimestamp"]) - 5_000
    records = stored(broker, REPLY_TOPIC, 0, int(resp.ext["queueOffset"]) + 1)
    (record,) = [r for r in records if r["body"] == b"the answer" and
                 r["properties"]["REPLY_TO_CLIENT"] == f"10.0.0.1@1#{encoding}"]  # fmt: skip
    assert record["properties"]["CORRELATION_ID"] == "corr-1"


def test_send_reply_message_v1_header(shared_broker):
    broker, _ = shared_broker
    requester = Requester(broker.address, "v1-requester", wc.JSON)
    v2 = wc.send_header_v2("responders", REPLY_TOPIC, 0, reply_props("v1-requester", "c-v1"))
    names = [
        "producerGroup",
        "topic",
        "defaultTopic",
        "defaultTopicQueueNums",
        "queueId",
        "sysFlag",
        "bornTimestamp",
        "flag",
        "properties",
        "reconsumeTimes",
        "unitMode",
    ]
    header = dict(zip(names, [v2[k] for k in "abcdefghijk"], strict=True))
    try:
        with wc.WireClient(broker.address) as replier:
            resp = replier.call(SEND_REPLY_MESSAGE, header, b"v1")
    finally:
        requester.close()
    assert resp.code == wc.SUCCESS, resp
    assert [p.body for p in requester.pushed] == [b"v1"]


def test_reply_that_reaches_nobody_is_a_system_error_and_still_stored(shared_broker):
    broker, _ = shared_broker
    refusing = Requester(broker.address, "refusing-requester", wc.JSON, code=wc.SYSTEM_ERROR)
    try:
        with wc.WireClient(broker.address) as replier:

            def reply(props):
                header = wc.send_header_v2("responders", REPLY_TOPIC, 0, props)
                return replier.call(SEND_REPLY_MESSAGE_V2, header, b"lost")

            unknown = reply(reply_props("nobody@0"))
            missing = reply(reply_props(None))
            refused = reply(reply_props("refusing-requester"))
    finally:
        refusing.close()
    assert (unknown.code, unknown.remark) == (
        wc.SYSTEM_ERROR, "push reply message fail, channel of <nobody@0> not found.")  # fmt: skip
    assert (missing.code, missing.remark) == (
        wc.SYSTEM_ERROR, "reply message properties[REPLY_TO_CLIENT] is null")  # fmt: skip
    assert (refused.code, refused.remark) == (
        wc.SYSTEM_ERROR, "push reply message to refusing-requester fail.")  # fmt: skip
    assert len(refusing.pushed) == 1
    for resp in (unknown, missing, refused):
        assert len(resp.ext["msgId"]) == 32  # stored all the same (storeReplyMessageEnable)


def test_reply_to_a_bad_topic_is_refused_before_any_push(shared_broker):
    broker, _ = shared_broker
    requester = Requester(broker.address, "bad-topic-requester", wc.JSON)
    try:
        with wc.WireClient(broker.address) as replier:
            header = wc.send_header_v2("responders", "bad topic!", 0,
                                       reply_props("bad-topic-requester"))  # fmt: skip
            resp = replier.call(SEND_REPLY_MESSAGE_V2, header, b"x")
            batch = wc.send_header_v2("responders", REPLY_TOPIC, 0,
                                      reply_props("bad-topic-requester"), batch=True)  # fmt: skip
            as_batch = replier.call(SEND_REPLY_MESSAGE_V2, batch,
                                    wc.batch_body([(0, b"a", {}), (0, b"b", {})]))  # fmt: skip
    finally:
        requester.close()
    assert resp.code == wc.SYSTEM_ERROR and "bad topic!" in resp.remark
    assert as_batch.code == wc.MESSAGE_ILLEGAL and "batch" in as_batch.remark
    assert requester.pushed == []


def test_a_client_that_is_its_own_requester_on_one_connection(shared_broker):
    """A RocketMQ client uses one connection per broker: its reply to its own request is
    pushed back on the connection the reply came on, which stays usable."""
    broker, _ = shared_broker
    with wc.WireClient(broker.address) as c:
        beat = {"clientID": "self-requester", "producerDataSet": [{"groupName": "selves"}],
                "consumerDataSet": []}  # fmt: skip
        assert c.call(HEART_BEAT, {}, json.dumps(beat).encode()).code == wc.SUCCESS
        header = wc.send_header_v2("selves", REPLY_TOPIC, 0, reply_props("self-requester"))
        n = 40  # replies in flight at once, each pushed back on this connection
        opaques = {c.send(SEND_REPLY_MESSAGE_V2, header, b"to myself %d" % i) for i in range(n)}
        pushed, responses = [], []
        while len(pushed) < n or len(responses) < n:
            frame = c.read()
            if frame.flag & wc.RESPONSE:
                assert frame.opaque in opaques
                responses.append(frame)
            else:
                pushed.append(frame)
                c.sock.sendall(wc.encode(wc.Frame(wc.SUCCESS, frame.opaque, wc.RESPONSE)))
        again = c.call(HEART_BEAT, {}, json.dumps(beat).encode())
    assert {r.code for r in responses} == {wc.SUCCESS}
    assert {p.code for p in pushed} == {PUSH_REPLY}
    assert sorted(p.body for p in pushed) == sorted(b"to myself %d" % i for i in range(n))
    assert again.code == wc.SUCCESS  # the connection was not closed over the push's answer


def test_a_push_waiting_for_its_requester_holds_back_no_other_request(shared_broker):
    """A push waits (up to 3 s) for its requester's answer on a pool thread, not on the
    replier's connection: here the requester answers only once the replier's next request
    on that connection was answered, and the reply still succeeds. Were the wait the
    connection's, the two would wait for each other until the push timed out."""
    broker, _ = shared_broker
    with wc.WireClient(broker.address) as requester, wc.WireClient(broker.address) as replier:
        announce_producer(requester, "late-requester", "late")
        header = wc.send_header_v2("responders", REPLY_TOPIC, 0, reply_props("late-requester"))
        reply = replier.send(SEND_REPLY_MESSAGE_V2, header, b"answered late")
        push = requester.read()
        beat_answer = replier.call(HEART_BEAT, {}, json.dumps({"clientID": "replier"}).encode())
        requester.sock.sendall(wc.encode(wc.Frame(wc.SUCCESS, push.opaque, wc.RESPONSE)))
        answer = replier.receive(reply)
    assert (push.code, push.body) == (PUSH_REPLY, b"answered late")
    assert beat_answer.code == wc.SUCCESS
    assert answer.code == wc.SUCCESS, answer


@pytest.mark.parametrize("bound", ["count", "bytes"])
def test_replies_past_the_pool_and_its_queue_are_system_busy(make_broker, bound):
    """One reply thread and room for one waiting reply (RocketMQ's executor and queue
    capacity), or for 10 bytes of waiting bodies (shmq's maxReplyWaitingBytes): with a
    reply held on its push and one waiting, the next is refused at once with RocketMQ's
    [OVERLOAD] remark; the two taken succeed once the requester answers."""
    capacity, waiting_bytes = (1, 256 << 20) if bound == "count" else (100, 10)
    broker, _ = make_broker(process_reply_message_thread_pool_nums=1,
                            reply_thread_pool_queue_capacity=capacity,
                            max_reply_waiting_bytes=waiting_bytes)  # fmt: skip
    with wc.WireClient(broker.address) as requester, wc.WireClient(broker.address) as replier:
        announce_producer(requester, "slow-requester", "slow")
        header = wc.send_header_v2("responders", REPLY_TOPIC, 0, reply_props("slow-requester"))
        held = replier.send(SEND_REPLY_MESSAGE_V2, header, b"held")
        first_push = requester.read()  # the pool's one thread waits for its answer now
        waiting = replier.send(SEND_REPLY_MESSAGE_V2, header, b"waiting")  # 7 bytes
        refused = replier.receive(replier.send(SEND_REPLY_MESSAGE_V2, header, b"refused"))
        for push in (first_push, None):  # the second push comes once the first is answered
            push = push or requester.read()
            requester.sock.sendall(wc.encode(wc.Frame(wc.SUCCESS, push.opaque, wc.RESPONSE)))
        answers = [replier.receive(held), replier.receive(waiting)]
    assert (refused.code, refused.remark) == (
        wc.SYSTEM_BUSY, "[OVERLOAD]system busy, start flow control for a while")  # fmt: skip
    assert [a.code for a in answers] == [wc.SUCCESS, wc.SUCCESS]
