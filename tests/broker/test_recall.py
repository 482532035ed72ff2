"""RECALL_MESSAGE (RocketMQ 5.3) against a real broker, over the independent wire client: a
timer send answers a recall handle; a recall drops that message and only it when its time
comes, also across a restart before then; bad recalls get RocketMQ's codes and remarks."""

from __future__ import annotations

import time

import wire_client as wc
from waiting import wait_for

from e2e_helpers import embedded
from shmq.recall_handle import RecallHandle

RECALL_MESSAGE, UPDATE_BROKER_CONFIG = 370, 25
ILLEGAL_OPERATION = 604
SHARED_BROKER = {"recall_message_enable": True, "timer_precision_ms": 100}


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def uniq(name: str) -> str:
    return name.encode().hex().upper().ljust(32, "0")


def send_timer(address: str, topic: str, body: str, deliver_ms: int) -> wc.Frame:
    """A timer message (``TIMER_DELIVER_MS``), its unique key made from ``body``."""
    props = {"TIMER_DELIVER_MS": str(deliver_ms), "UNIQ_KEY": uniq(body)}
    with wc.WireClient(address) as c:
        resp = c.call(wc.SEND_MESSAGE_V2, wc.send_header_v2("pg", topic, 0, props),
                      body.encode())  # fmt: skip
    assert resp.code == wc.SUCCESS, resp
    return resp


def recall(address: str, topic: str, handle: str) -> wc.Frame:
    with wc.WireClient(address) as c:
        return c.call(RECALL_MESSAGE, {"producerGroup": "pg", "topic": topic,
                                       "recallHandle": handle})  # fmt: skip


def delivered(address: str, topic: str) -> list[str]:
    """The bodies stored in ``topic``'s queue 0 so far, in order."""
    with wc.WireClient(address) as c:
        resp = c.call(wc.PULL_MESSAGE, wc.pull_header("check", topic, 0, 0, sys_flag=4,
                                                       max_nums=64))  # fmt: skip
    if resp.code != wc.SUCCESS:
        return []
    return [r["body"].decode() for r in wc.pulled_records(resp.body)]


def wait_delivered(address: str, topic: str, bodies: set[str]) -> list[str]:
    return wait_for(lambda: set(got := delivered(address, topic)) >= bodies and got,
                    what=f"{sorted(bodies)} delivered to {topic}")  # fmt: skip


def test_a_timer_send_answers_rocketmqs_recall_handle(shared_broker):
    broker, _ = shared_broker
    at = now_ms() + 60_000
    resp = send_timer(broker.address, "RecallHandle", "h", at)
    handle = RecallHandle.decode(resp.ext["recallHandle"])
    assert handle == RecallHandle("RecallHandle", broker.config.broker_name, str(at + 1), uniq("h"))
    with wc.WireClient(broker.address) as c:  # a message sent for now is no timer message
        props = {"TIMER_DELIVER_MS": str(now_ms() - 1), "UNIQ_KEY": uniq("now")}
        now = c.call(wc.SEND_MESSAGE_V2, wc.send_header_v2("pg", "RecallHandle", 0, props), b"n")
    assert now.code == wc.SUCCESS and "recallHandle" not in now.ext


def test_a_recalled_message_is_never_delivered_and_the_others_are(shared_broker):
    broker, _ = shared_broker
    at = now_ms() + 2_000
    handles = {b: send_timer(broker.address, "Recall", b, at).ext["recallHandle"]
               for b in ("a", "b", "c")}  # fmt: skip
    send_timer(broker.address, "Recall", "later", at + 300)  # a slot after theirs
    resp = recall(broker.address, "Recall", handles["b"])
    assert resp.code == wc.SUCCESS, resp
    assert resp.ext == {"msgId": uniq("b"), "MSG_REGION": "DefaultRegion"}
    got = wait_delivered(broker.address, "Recall", {"a", "c", "later"})
    assert sorted(got) == ["a", "c", "later"]  # "later" out: b's slot was passed without it


def test_bad_recalls_get_rocketmqs_codes(shared_broker):
    broker, _ = shared_broker
    address, name = broker.address, broker.config.broker_name
    at = now_ms() + 1_000
    handle = send_timer(address, "RecallBad", "x", at).ext["recallHandle"]
    other = RecallHandle("RecallBad", "broker-z", str(at + 1), uniq("x")).encode()
    far = RecallHandle("RecallBad", name, str(now_ms() + 4 * 86_400_000), uniq("x")).encode()
    cases = [
        ("RecallBad", "not a handle!", ILLEGAL_OPERATION, "recall handle is invalid"),
        ("RecallBad", RecallHandle("RecallBad", name, "soon", "id").encode(),
         ILLEGAL_OPERATION, "recall failed, timestamp invalid"),
        ("RecallBad", far, ILLEGAL_OPERATION, "recall failed, timestamp invalid"),
        ("Recall", handle, ILLEGAL_OPERATION, "recall failed, topic not match"),
        ("RecallBad", other, ILLEGAL_OPERATION, "recall failed, broker service not available"),
        ("Nope", handle, wc.TOPIC_NOT_EXIST, "recall failed, the topic[Nope] not exist"),
    ]  # fmt: skip
    region = {"MSG_REGION": "DefaultRegion"}
    for topic, bad, code, remark in cases:
        resp = recall(address, topic, bad)
        assert (resp.code, resp.remark, resp.ext) == (code, remark, region), bad
    with wc.WireClient(address) as c:  # a required header field missing
        assert c.call(RECALL_MESSAGE, {"topic": "RecallBad"}).code == wc.SYSTEM_ERROR
    wait_delivered(address, "RecallBad", {"x"})
    late = recall(address, "RecallBad", handle)  # after its delivery: its time has passed
    assert (late.code, late.remark) == (ILLEGAL_OPERATION, "recall failed, timestamp invalid")


def test_recall_is_off_unless_enabled_as_in_rocketmq(shared_broker):
    broker, _ = shared_broker
    handle = send_timer(broker.address, "RecallOff", "o", now_ms() + 60_000).ext["recallHandle"]
    with wc.WireClient(broker.address) as c:
        assert c.call(UPDATE_BROKER_CONFIG, {}, b"recallMessageEnable=false").code == wc.SUCCESS
        try:
            resp = recall(broker.address, "RecallOff", handle)
        finally:
            assert c.call(UPDATE_BROKER_CONFIG, {}, b"recallMessageEnable=true").code == 0
    assert (resp.code, resp.remark) == (wc.NO_PERMISSION, "recall failed, operation is forbidden")
    assert recall(broker.address, "RecallOff", handle).code == wc.SUCCESS


def test_a_recall_survives_a_restart_before_the_delivery_time(tmp_path):
    root = str(tmp_path / "store")
    conf = {"recall_message_enable": True, "timer_precision_ms": 100}
    with embedded(root, **conf) as mq:
        mq.create_topic("RecallRestart", 1)
        address = mq.broker.address
        at = now_ms() + 6_000
        handles = [send_timer(address, "RecallRestart", b, at).ext["recallHandle"]
                   for b in ("keep", "drop")]  # fmt: skip
        assert recall(address, "RecallRestart", handles[1]).code == wc.SUCCESS
    with embedded(root, **conf) as mq:
        address = mq.broker.address
        assert wait_delivered(address, "RecallRestart", {"keep"}) == ["keep"]
        send_timer(address, "RecallRestart", "after", now_ms() + 200)
        assert wait_delivered(address, "RecallRestart", {"after"}) == ["keep", "after"]
