"""RocketMQ custom headers read from extFields (missing or mistyped fields: SYSTEM_ERROR
naming the field), and the send header's V1 / V2 names, fuzzed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shmq.broker.processors.send_header import SEND_HEADER, V2_NAMES, SendHeader
from shmq.remoting.custom_header import BOOL, INT, LONG, STR, decode_header
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode, ResponseError

SPEC = {"s": (STR, True), "i": (INT, True), "l": (LONG, False), "b": (BOOL, False)}


def request(code: int = RequestCode.PULL_MESSAGE, **fields) -> RemotingCommand:
    return RemotingCommand(code, 1, ext_fields=fields)


def test_types_as_java_reads_them():
    got = decode_header(request(s="x", i="-2147483648", l="+9223372036854775807", b="TRUE"), SPEC)
    assert got == {"s": "x", "i": -(2**31), "l": 2**63 - 1, "b": True}
    assert decode_header(request(s="", i="0", b="yes"), SPEC) == {
        "s": "", "i": 0, "l": None, "b": False}  # fmt: skip


@pytest.mark.parametrize(
    ("fields", "remark"),
    [
        ({"i": "1"}, "the custom field <s> is null in PULL_MESSAGE(11)"),
        ({"s": "x", "i": "2147483648"}, "<i> = '2147483648' is not a Java Integer"),
        ({"s": "x", "i": " 1"}, "<i> = ' 1' is not a Java Integer"),
        ({"s": "x", "i": "1", "l": "1.5"}, "<l> = '1.5' is not a Java Long"),
        ({"s": "x", "i": "1_0"}, "is not a Java Integer"),
    ],
)
def test_missing_and_mistyped_fields_are_named(fields, remark):
    with pytest.raises(ResponseError, match=remark.replace("(", r"\(").replace(")", r"\)")) as info:
        decode_header(request(**fields), SPEC)
    assert info.value.code == ResponseCode.SYSTEM_ERROR


def test_v2_letters_are_v1s_fields_in_order():
    assert list(V2_NAMES.values()) == list(SEND_HEADER)
    assert V2_NAMES["k"] == "unitMode" and V2_NAMES["m"] == "batch" and V2_NAMES["l"] == (
        "maxReconsumeTimes")  # fmt: skip
    v1 = {"producerGroup": "g", "topic": "T", "defaultTopic": "TBW102",
          "defaultTopicQueueNums": "4", "queueId": "1", "sysFlag": "0", "bornTimestamp": "9",
          "flag": "3", "batch": "true"}  # fmt: skip
    v2 = {short: v1[name] for short, name in V2_NAMES.items() if name in v1}
    a = SendHeader.parse(request(RequestCode.SEND_MESSAGE, **v1))
    b = SendHeader.parse(request(RequestCode.SEND_MESSAGE_V2, **v2))
    assert a == b and a.batch is True and a.queueId == 1 and a.properties is None


ext_values = st.one_of(
    st.text(max_size=12), st.integers().map(str), st.sampled_from(["true", "false", "-1", ""])
)


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(st.sampled_from(list("abcdefghijklmnz")), ext_values), st.booleans())
def test_send_header_parsing_answers_or_parses(fields, v1):
    if v1:
        fields = {V2_NAMES.get(k, k): v for k, v in fields.items()}
    code = RequestCode.SEND_MESSAGE if v1 else RequestCode.SEND_MESSAGE_V2
    try:
        header = SendHeader.parse(request(code, **fields))
    except ResponseError as exc:
        assert exc.code == ResponseCode.SYSTEM_ERROR and "the custom field <" in exc.remark
        return
    assert -(2**31) <= header.queueId < 2**31 and isinstance(header.topic, str)
