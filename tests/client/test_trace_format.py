"""RocketMQ's trace data format: records as its Java client writes them decode, ours encode
to the same text, the decoder never fails on garbage, and a timeline is built from them."""

from __future__ import annotations

import base64

from hypothesis import given
from hypothesis import strategies as st

from shmq.client.trace.encoder import (
    CONTENT_SPLITOR,
    FIELD_SPLITOR,
    TraceBean,
    TraceContext,
    TraceType,
    decode,
    decode_body,
    encode,
    trans_keys,
)
from shmq.client.trace.view import timeline, trace_records

MSG_ID = "7F0000010A2B18B4AAC27A3F2E150000"
OFFSET_ID = "0A00000100002A9F0000000000000F42"
A, B = CONTENT_SPLITOR, FIELD_SPLITOR

# written by hand from TraceDataEncoder.encoderFromContextBean (spec §6): a producer's Pub,
# a consumer's SubBefore and SubAfter (4.x, non-CLOUD: timeStamp and group at the end), and
# a transactional producer's EndTransaction, concatenated in one trace message body
JAVA_BODY = (
    f"Pub{A}1700000000000{A}DefaultRegion{A}PG{A}TopicA{A}{MSG_ID}{A}TagA{A}k1 k2{A}"
    f"10.0.0.1:10911{A}5{A}3{A}0{A}{OFFSET_ID}{A}true{B}"
    f"SubBefore{A}1700000000100{A}DefaultRegion{A}CG{A}REQ1{A}{MSG_ID}{A}0{A}k1 k2{B}"
    f"SubAfter{A}REQ1{A}{MSG_ID}{A}7{A}false{A}k1 k2{A}4{A}1700000000107{A}CG{B}"
    f"EndTransaction{A}1700000000050{A}DefaultRegion{A}PG{A}TopicA{A}{MSG_ID}{A}TagA{A}"
    f"k1 k2{A}10.0.0.1:10911{A}2{A}{MSG_ID}{A}COMMIT_MESSAGE{A}false{B}"
)


def test_a_java_clients_records_decode():
    pub, before, after, end = decode(JAVA_BODY)
    assert pub.trace_type is TraceType.Pub and pub.time_stamp == 1700000000000
    assert (pub.region_id, pub.group_name, pub.cost_time) == ("DefaultRegion", "PG", 3)
    assert pub.success
    bean = pub.beans[0]
    assert (bean.topic, bean.msg_id, bean.tags, bean.keys, bean.store_host, bean.body_length,
            bean.msg_type, bean.offset_msg_id) == ("TopicA", MSG_ID, "TagA", "k1 k2",
                                                   "10.0.0.1:10911", 5, 0, OFFSET_ID)  # fmt: skip
    assert (before.trace_type, before.group_name, before.request_id) == (TraceType.SubBefore,
                                                                         "CG", "REQ1")  # fmt: skip
    assert before.beans[0].retry_times == 0 and before.beans[0].msg_id == MSG_ID
    assert (
        after.request_id,
        after.cost_time,
        after.success,
        after.context_code,
        after.time_stamp,
        after.group_name,
    ) == ("REQ1", 7, False, 4, 1700000000107, "CG")
    assert end.trace_type is TraceType.EndTransaction
    assert (end.beans[0].transaction_state, end.beans[0].from_transaction_check,
            end.beans[0].msg_type) == ("COMMIT_MESSAGE", False, 2)  # fmt: skip


def test_encoding_writes_the_java_clients_text():
    assert "".join(map(encode, decode(JAVA_BODY))) == JAVA_BODY


def test_older_and_newer_layouts_decode():
    pub13 = f"Pub{A}1{A}R{A}PG{A}T{A}{MSG_ID}{A}null{A}null{A}h:1{A}5{A}3{A}0{A}true{B}"
    [ctx] = decode(pub13)
    assert ctx.success and ctx.beans[0].offset_msg_id == "null"
    pub15 = pub13[: -len(f"true{B}")] + f"{OFFSET_ID}{A}false{A}10.1.1.1@4242{B}"
    [ctx] = decode(pub15)
    assert not ctx.success and ctx.beans[0].client_host == "10.1.1.1@4242"
    cloud_after = f"SubAfter{A}REQ{A}{MSG_ID}{A}2{A}true{A}null{A}0{A}{B}"  # no time, no group
    [ctx] = decode(cloud_after)
    assert ctx.success and ctx.context_code == 0 and ctx.group_name == "null"


def test_unreadable_records_are_skipped_not_fatal():
    bad = f"Pub{A}soon{A}R{B}SubBefore{A}1{B}Nope{A}1{B}{B}"
    assert decode(bad + JAVA_BODY) == decode(JAVA_BODY)


def test_keys_are_msg_ids_and_user_keys():
    ctx = TraceContext(TraceType.SubBefore, "CG", [TraceBean(msg_id="M1", keys="a b"),
                                                   TraceBean(msg_id="M2")])  # fmt: skip
    assert trans_keys(ctx) == {"M1", "a", "b", "M2"}


def test_a_separator_in_user_text_does_not_split_the_record():
    ctx = TraceContext(TraceType.Pub, "PG", [TraceBean(msg_id="M", tags=f"x{A}y{B}z")])
    [back] = decode(encode(ctx))
    assert back.beans[0].tags == "x y z" and back.beans[0].msg_id == "M"


@given(st.text())
def test_the_decoder_never_fails_on_text(text):
    for ctx in decode(text):
        assert isinstance(ctx.trace_type, TraceType)


@given(st.lists(st.sampled_from(["Pub", "SubBefore", "SubAfter", "EndTransaction", "1", "-1",
                                 "true", "", "x", "99999999999999999999", A, B])))  # fmt: skip
def test_the_decoder_never_fails_on_near_records(parts):
    decode("".join(parts))
    decode(A.join(parts))


@given(st.binary())
def test_the_timeline_never_fails_on_bytes(body):
    msgs = [{"body": base64.b64encode(body).decode(), "bornHost": "h"}, {"body": "not base64!"}]
    line = timeline(MSG_ID, trace_records(MSG_ID, msgs))
    assert set(line) == {"msgId", "produce", "transactions", "consume"}
    decode_body(body)


def test_the_timeline_joins_a_consume_and_keeps_other_messages_out():
    other = JAVA_BODY.replace(MSG_ID, "OTHER")
    msgs = [{"body": base64.b64encode((JAVA_BODY + other).encode()).decode(),
             "bornHost": "10.0.0.9:50000"}]  # fmt: skip
    line = timeline(MSG_ID, trace_records(MSG_ID, msgs))
    [pub] = line["produce"]
    assert (pub["group"], pub["clientHost"], pub["costTime"], pub["status"]) == (
        "PG",
        "10.0.0.9:50000",
        3,
        "success",
    )
    [consume] = line["consume"]
    assert consume == {"group": "CG", "clientHost": "10.0.0.9:50000", "timeStamp": 1700000000100,
                       "retryTimes": 0, "costTime": 7, "status": "failed", "result": "FAILED",
                       "requestId": "REQ1"}  # fmt: skip
    [end] = line["transactions"]
    assert end["transactionState"] == "COMMIT_MESSAGE"
