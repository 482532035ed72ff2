"""POP consumption in the broker over remoting (RocketMQ 5's POP_MESSAGE, ACK_MESSAGE,
BATCH_ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME, NOTIFICATION, PEEK_MESSAGE): what a pop
returns and its headers, invisibility and revive (the message comes back, one attempt
later, from the group's POP retry topic), the DLQ after the group's retries, FIFO pops,
long polling, bad input, and the journal across a SIGKILL of the whole broker. Records are
decoded by the tests' spec decoder (``wire_client``), requests sent as raw remoting."""

from __future__ import annotations

import base64
import json
import threading
import time

import pytest
import wire_client as wc
from hypothesis import given, settings
from hypothesis import strategies as st
from test_ha import sigkill_broker
from test_remoting_send import dispatched, send

from e2e_helpers import cluster
from shmq.pop_receipt import (
    InvalidReceiptError,
    Receipt,
    parse_offset_info,
    parse_receipt,
)
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode

Rc = ResponseCode


def now_ms() -> int:
    return int(time.time() * 1000)


def call(address: str, code: int, fields: dict, body: bytes = b"", timeout: float = 30):
    with RemotingClient() as client:
        req = RemotingCommand.request(code, {k: str(v) for k, v in fields.items()}, body)
        return client.invoke(address, req, timeout)


def pop(address: str, group: str, topic: str, *, num: int = 32, invisible: int = 60_000,
        poll: int = 0, queue_id: int = -1, **extra):  # fmt: skip
    """A POP_MESSAGE: ``(response, [(record, receipt)])``, each receipt rebuilt from the
    headers as RocketMQ's client does."""
    fields = dict(consumerGroup=group, topic=topic, queueId=queue_id, maxMsgNums=num,
                  invisibleTime=invisible, pollTime=poll, bornTime=now_ms(), initMode=0,
                  **extra)  # fmt: skip
    resp = call(address, RequestCode.POP_MESSAGE, fields, timeout=poll / 1000 + 30)
    if resp.code != Rc.SUCCESS:
        return resp, []
    h = resp.ext_fields
    starts = parse_offset_info(h["startOffsetInfo"])
    offsets = parse_offset_info(h["msgOffsetInfo"])
    records = wc.pulled_records(bytes(resp.body))
    out = []
    for record in records:
        ck = record["properties"].get("POP_CK")
        if ck:  # a retry topic's message: the broker set its receipt
            out.append((record, parse_receipt(ck)))
            continue
        qid, qoff = record["queue_id"], record["queue_offset"]
        key = next(k for k, v in offsets.items() if k[1] == qid and qoff in v and k[0] == "0")
        receipt = Receipt(starts[key][0], int(h["popTime"]), int(h["invisibleTime"]),
                          int(h["reviveQid"]), key[0], "broker-a", qid, qoff)  # fmt: skip
        out.append((record, receipt))
    return resp, out


def ack(address: str, group: str, topic: str, receipt: Receipt):
    real = receipt.real_topic(topic, group)
    return call(address, RequestCode.ACK_MESSAGE, dict(
        consumerGroup=group, topic=real, queueId=receipt.queue_id, extraInfo=receipt.encode(),
        offset=receipt.queue_offset))  # fmt: skip


def change(address: str, group: str, topic: str, receipt: Receipt, invisible: int):
    real = receipt.real_topic(topic, group)
    return call(address, RequestCode.CHANGE_MESSAGE_INVISIBLETIME, dict(
        consumerGroup=group, topic=real, queueId=receipt.queue_id, extraInfo=receipt.encode(),
        offset=receipt.queue_offset, invisibleTime=invisible))  # fmt: skip


def send_n(broker, topic: str, n: int, queues: int = 2, tag: str = "a") -> list[bytes]:
    bodies = [f"{topic}-{i}".encode() for i in range(n)]
    for i, body in enumerate(bodies):
        assert send(broker, topic, i % queues, {"TAGS": tag}, body).code == wc.SUCCESS
    for q in range(queues):
        dispatched(broker, topic, q, len(range(q, n, queues)))
    return bodies


def pop_all(address, group, topic, expect: int, **kw) -> list:
    got: list = []
    deadline = time.monotonic() + 30
    while len(got) < expect and time.monotonic() < deadline:
        _, msgs = pop(address, group, topic, poll=1000, **kw)
        got += msgs
    return got


def status(address: str) -> dict:
    resp = call(address, RequestCode.GET_POP_STATUS, {})
    assert resp.code == Rc.SUCCESS
    return json.loads(bytes(resp.body))["groups"]


def create_group(address: str, group: str, **conf) -> None:
    body = json.dumps({"groupName": group, **conf}).encode()
    resp = call(address, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body)
    assert resp.code == Rc.SUCCESS, resp.remark


def test_pop_ack_and_headers(shared_broker):
    broker, _ = shared_broker
    topic, group = "PopBasic", "pop-basic"
    bodies = send_n(broker, topic, 6)
    resp, msgs = pop(broker.address, group, topic, num=4)
    assert (resp.code, resp.remark) == (Rc.SUCCESS, "FOUND")
    assert len(msgs) == 4 and int(resp.ext_fields["restNum"]) == 2
    assert int(resp.ext_fields["invisibleTime"]) == 60_000
    assert 0 <= int(resp.ext_fields["reviveQid"]) < 8
    _, rest = pop(broker.address, group, topic)
    got = msgs + rest
    assert sorted(r["body"] for r, _ in got) == sorted(bodies)
    assert {r["reconsume_times"] for r, _ in got} == {0}
    for _, receipt in got:
        assert ack(broker.address, group, topic, receipt).code == Rc.SUCCESS
    # acked twice: no error, nothing changes (RocketMQ's ack records are idempotent)
    assert ack(broker.address, group, topic, got[0][1]).code == Rc.SUCCESS
    row = status(broker.address)[group][topic]
    assert (row["inFlight"], row["acked"], row["revived"]) == (0, 6, 0)
    assert sum(row["popOffsets"].values()) == 6
    resp, none = pop(broker.address, group, topic)
    assert (resp.code, resp.remark, none) == (Rc.POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE", [])


def test_unacked_message_comes_back_one_attempt_later(shared_broker):
    broker, _ = shared_broker
    topic, group = "PopRevive", "pop-revive"
    send_n(broker, topic, 3)
    first = pop_all(broker.address, group, topic, 3, invisible=1500)
    assert len(first) == 3
    acked = first[0]
    assert ack(broker.address, group, topic, acked[1]).code == Rc.SUCCESS
    t0 = time.monotonic()
    again = pop_all(broker.address, group, topic, 2, invisible=1500)
    assert time.monotonic() - t0 >= 1.0  # not before the invisible time passed
    assert sorted(r["body"] for r, _ in again) == sorted(r["body"] for r, _ in first[1:])
    for record, receipt in again:
        assert record["topic"] == topic  # the original topic, not the retry topic
        assert record["reconsume_times"] == 1
        assert receipt.retry_flag == "1"
        assert record["properties"]["RETRY_TOPIC"] == topic
        assert ack(broker.address, group, topic, receipt).code == Rc.SUCCESS
    row = status(broker.address)[group][topic]
    assert (row["revived"], row["inFlight"], row["reviveBacklog"]) == (2, 0, 0)
    time.sleep(2)  # acked after coming back: never again
    assert pop(broker.address, group, topic)[1] == []


def test_change_invisible_time_and_batch_ack(shared_broker):
    broker, _ = shared_broker
    topic, group = "PopChange", "pop-change"
    send_n(broker, topic, 4)
    msgs = pop_all(broker.address, group, topic, 4, invisible=1000)
    (rec0, r0), rest = msgs[0], msgs[1:]
    resp = change(broker.address, group, topic, r0, 4000)
    assert resp.code == Rc.SUCCESS
    assert int(resp.ext_fields["invisibleTime"]) == 4000
    new = r0.changed(int(resp.ext_fields["popTime"]), 4000)
    acks = []
    for _, r in rest:  # one BatchAck per checkpoint, as RocketMQ's client groups them
        acks.append({"c": group, "t": topic, "r": "0", "so": r.queue_offset, "q": r.queue_id,
                     "rq": r.revive_qid, "pt": r.pop_time, "it": r.invisible_time,
                     "b": base64.b64encode(b"\x01").decode()})  # fmt: skip
    # the three others are acked by their start offset only if their checkpoint starts there;
    # ack them the general way: bit (offset - start) of their checkpoint
    acks = [{**a, "so": r.start_offset,
             "b": base64.b64encode(bytes([1 << (r.queue_offset - r.start_offset)])).decode()}
            for a, (_, r) in zip(acks, rest, strict=True)]  # fmt: skip
    body = json.dumps({"brokerName": "broker-a", "acks": acks}).encode()
    assert call(broker.address, RequestCode.BATCH_ACK_MESSAGE, {}, body).code == Rc.SUCCESS
    time.sleep(1.6)  # past the first invisible time, within the changed one
    assert pop(broker.address, group, topic)[1] == []
    back = pop_all(broker.address, group, topic, 1, invisible=5000)
    assert [r["body"] for r, _ in back] == [rec0["body"]]
    assert back[0][0]["reconsume_times"] == 1
    # the handle before the change acks nothing more now, and no error
    assert ack(broker.address, group, topic, new).code == Rc.SUCCESS


def test_dead_letter_queue_after_the_groups_retries(shared_broker):
    broker, _ = shared_broker
    topic, group = "PopDlq", "pop-dlq"
    create_group(broker.address, group, retryMaxTimes=1)
    (body,) = send_n(broker, topic, 1, queues=1)
    attempts = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(attempts) < 2:
        attempts += pop(broker.address, group, topic, invisible=300, poll=1000)[1]
    assert [r["reconsume_times"] for r, _ in attempts] == [0, 1]
    dispatched(broker, f"%DLQ%{group}", 0, 1)
    pulled = call(broker.address, RequestCode.PULL_MESSAGE,
                  wc.pull_header("x", f"%DLQ%{group}", 0, 0))  # fmt: skip
    (dead,) = wc.pulled_records(bytes(pulled.body))
    assert dead["body"] == body and dead["reconsume_times"] == 2
    time.sleep(0.5)
    assert pop(broker.address, group, topic)[1] == []
    assert status(broker.address)[group][topic]["dlq"] == 1


def test_fifo_pop_blocks_the_queue_until_acked(shared_broker):
    broker, _ = shared_broker
    topic, group = "PopFifo", "pop-fifo"
    bodies = send_n(broker, topic, 6, queues=1)
    resp, first = pop(broker.address, group, topic, num=2, invisible=1500, order="true")
    assert int(resp.ext_fields["reviveQid"]) == 999
    assert [r["body"] for r, _ in first] == bodies[:2]
    assert "orderCountInfo" in resp.ext_fields
    # blocked: the queue's next messages wait until these are acked or visible again
    assert pop(broker.address, group, topic, order="true")[1] == []
    assert ack(broker.address, group, topic, first[0][1]).code == Rc.SUCCESS
    assert pop(broker.address, group, topic, order="true")[1] == []
    # the second one comes back, in order, counted once more
    time.sleep(1.6)
    resp, again = pop(broker.address, group, topic, num=2, invisible=1500, order="true")
    assert [r["body"] for r, _ in again] == bodies[1:3]
    counts = resp.ext_fields["orderCountInfo"]
    assert "0 qo0%1 1" in counts and "0 qo0%2 0" in counts
    for _, r in again:
        assert ack(broker.address, group, topic, r).code == Rc.SUCCESS
    resp, rest = pop(broker.address, group, topic, invisible=1500, order="true")
    assert [r["body"] for r, _ in rest] == bodies[3:]


def test_long_polling_wakes_on_a_send(shared_broker):
    broker, _ = shared_broker
    topic, group = "PopPoll", "pop-poll"
    send_n(broker, topic, 1, queues=1)
    assert len(pop_all(broker.address, group, topic, 1)) == 1
    result: dict = {}

    def waiter() -> None:
        t0 = time.monotonic()
        result["msgs"] = pop(broker.address, group, topic, poll=10_000)[1]
        result["s"] = time.monotonic() - t0

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.5)
    assert send(broker, topic, 0, {"TAGS": "a"}, b"late").code == wc.SUCCESS
    t.join(15)
    assert [r["body"] for r, _ in result["msgs"]] == [b"late"]
    assert 0.4 < result["s"] < 5
    # NOTIFICATION: nothing now; a held one says hasMsg once a message comes
    fields = dict(consumerGroup=group, topic=topic, queueId=-1, pollTime=0, bornTime=now_ms())
    resp = call(broker.address, RequestCode.NOTIFICATION, fields)
    assert resp.ext_fields["hasMsg"] == "false"
    threading.Timer(0.3, lambda: send(broker, topic, 0, {"TAGS": "a"}, b"x")).start()
    resp = call(broker.address, RequestCode.NOTIFICATION, {**fields, "pollTime": 10_000})
    assert resp.ext_fields["hasMsg"] == "true"


def test_tag_filter_skips_other_tags(shared_broker):
    broker, _ = shared_broker
    topic, group = "PopTags", "pop-tags"
    for i, tag in enumerate("abab"):
        send(broker, topic, 0, {"TAGS": tag}, f"{tag}{i}".encode())
    dispatched(broker, topic, 0, 4)
    _, msgs = pop(broker.address, group, topic, exp="b", expType="TAG")
    assert [r["body"] for r, _ in msgs] == [b"b1", b"b3"]


def test_bad_requests_answer_as_rocketmq(shared_broker):
    broker, _ = shared_broker
    addr, topic, group = broker.address, "PopBad", "pop-bad"
    send_n(broker, topic, 1, queues=1)
    assert pop(addr, group, "NoSuchTopic")[0].code == Rc.TOPIC_NOT_EXIST
    assert pop(addr, group, topic, num=33)[0].code == Rc.INVALID_PARAMETER
    assert pop(addr, group, topic, queue_id=99)[0].code == Rc.INVALID_PARAMETER
    assert pop(addr, group, topic, exp="a", expType="SQL92")[0].code == Rc.SYSTEM_ERROR
    (_, receipt) = pop_all(addr, group, topic, 1)[0]
    base = dict(consumerGroup=group, topic=topic, queueId=0, offset=receipt.queue_offset)
    for bad in ("", "1 2 3", "x " * 8, receipt.encode().replace("broker-a", "")):
        resp = call(addr, RequestCode.ACK_MESSAGE, {**base, "extraInfo": bad})
        assert resp.code == Rc.INVALID_PARAMETER, bad
    resp = call(addr, RequestCode.ACK_MESSAGE, {**base, "extraInfo": receipt.encode(),
                                                 "offset": 10**6})  # fmt: skip
    assert resp.code == Rc.NO_MESSAGE
    # another group's ack of this receipt acks nothing of this group's
    assert ack(addr, "pop-bad-other", topic, receipt).code == Rc.SUCCESS
    assert status(addr)[group][topic]["inFlight"] == 1
    body = b'{"acks": [{"c": 1}]}'
    assert call(addr, RequestCode.BATCH_ACK_MESSAGE, {}, body).code == Rc.INVALID_PARAMETER
    assert call(addr, RequestCode.BATCH_ACK_MESSAGE, {}, b"\xff").code == Rc.INVALID_PARAMETER


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=120), st.lists(
    st.one_of(st.integers(-5, 2**64), st.sampled_from(["0", "1", "2", "b", ""])),
    max_size=10).map(lambda xs: " ".join(map(str, xs)))))  # fmt: skip
def test_receipt_parser_refuses_or_round_trips(text):
    try:
        receipt = parse_receipt(text)
    except InvalidReceiptError:
        return
    assert parse_receipt(receipt.encode()) == receipt


@pytest.mark.slow
def test_sigkill_of_the_broker_loses_no_popped_message_and_revives_no_acked_one(tmp_path):
    topic, group, n = "PopCrash", "pop-crash", 40
    with cluster(tmp_path, brokerRole="ASYNC_MASTER") as c:
        c.create_topic(topic, 2)
        addr = c.main.address

        class B:
            address = addr

        send_n(B, topic, n)
        got = pop_all(addr, group, topic, n, invisible=3000)
        assert len(got) == n
        acked = {r["body"] for r, _ in got[::2]}
        for _, receipt in got[::2]:
            assert ack(addr, group, topic, receipt).code == Rc.SUCCESS
        sigkill_broker(c, "broker-a")
        c.start_broker("broker-a")
        back = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(back) < n // 2:
            msgs = pop(addr, group, topic, poll=1000, invisible=30_000)[1]
            back += msgs
            for _, receipt in msgs:
                assert ack(addr, group, topic, receipt).code == Rc.SUCCESS
        bodies = [r["body"] for r, _ in back]
        assert sorted(bodies) == sorted({r["body"] for r, _ in got} - acked)
        time.sleep(1)
        assert pop(addr, group, topic, poll=500)[1] == []


_FIELD_VALUES = st.one_of(
    st.text(max_size=12), st.integers(-(2**64), 2**64).map(str),
    st.sampled_from(["-1", "0", "1", "32", "33", "true", "PopFuzz", "pop-fuzz", "TAG", "SQL92",
                     "0 0 0 0 0 broker-a 0 0"]),
)  # fmt: skip
_PARTIAL_ACK = b'{"acks": [{"c": "g", "t": "PopFuzz"}]}'
_POP_FIELDS = ["consumerGroup", "topic", "queueId", "maxMsgNums", "invisibleTime", "pollTime",
               "bornTime", "initMode", "expType", "exp", "order", "attemptId", "extraInfo",
               "offset", "shmqLocal"]  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(code=st.sampled_from([RequestCode.POP_MESSAGE, RequestCode.ACK_MESSAGE,
                             RequestCode.CHANGE_MESSAGE_INVISIBLETIME, RequestCode.PEEK_MESSAGE,
                             RequestCode.NOTIFICATION, RequestCode.POLLING_INFO,
                             RequestCode.BATCH_ACK_MESSAGE]),
       fields=st.dictionaries(st.sampled_from(_POP_FIELDS), _FIELD_VALUES, max_size=10),
       body=st.one_of(st.binary(max_size=40), st.just(_PARTIAL_ACK)))  # fmt: skip
def test_hostile_pop_requests_get_an_answer_and_change_nothing(pop_fuzz_broker, code, fields, body):
    broker = pop_fuzz_broker
    if code in (RequestCode.POP_MESSAGE, RequestCode.NOTIFICATION) and "pollTime" in fields:
        fields["pollTime"] = "0"  # a long poll would only make the example slow
    resp = call(broker.address, code, fields, body, timeout=10)
    assert resp.code in set(Rc), resp
    assert resp.code == Rc.SUCCESS or resp.remark


@pytest.fixture(scope="module")
def pop_fuzz_broker(shared_broker):
    broker, _ = shared_broker
    bodies = send_n(broker, "PopFuzz", 3, queues=1)
    yield broker
    # the group the fuzz may have popped with is untouched for another group
    got = pop_all(broker.address, "pop-fuzz-after", "PopFuzz", 3)
    assert sorted(r["body"] for r, _ in got) == sorted(bodies)
