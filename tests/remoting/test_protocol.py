"""RemotingCommand framing: RocketMQ's byte layout, round trips, and hostile input."""

from __future__ import annotations

import json
import socket
import struct
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shmq.errors import RemotingConnectError, RemotingFrameError, ResponseError
from shmq.remoting.protocol import (
    MAX_FRAME_SIZE,
    MAX_HEADER_SIZE,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    check_response,
    decode_frame,
    read_frame,
)


def roundtrip(cmd: RemotingCommand) -> RemotingCommand:
    frame = cmd.encode()
    (length,) = struct.unpack(">I", frame[:4])
    assert length == len(frame) - 4
    return decode_frame(frame[4:])


def frame_with_header(header: object, body: bytes = b"", serialize_type: int = 0) -> bytes:
    """A payload (after the length prefix) around an arbitrary JSON header."""
    raw = json.dumps(header).encode()
    return struct.pack(">I", serialize_type << 24 | len(raw)) + raw + body


def test_request_and_response_round_trip_with_unicode():
    req = RemotingCommand.request(
        RequestCode.SEND_MESSAGE,
        {"topic": "Tópico", "queueId": 3, "batch": True, "flag": False, "absent": None},
        "héllo ✓ 消息".encode(),
    )
    back = roundtrip(req)
    assert back == req
    assert back.ext_fields == {"topic": "Tópico", "queueId": "3", "batch": "true", "flag": "false"}
    assert not back.is_response and not back.is_oneway

    resp = RemotingCommand.response_to(
        req, ResponseCode.TOPIC_NOT_EXIST, "no route for «Tópico» 主题", {"x": 1}, b"\x00\xff"
    )
    back = roundtrip(resp)
    assert back == resp
    assert back.is_response and back.opaque == req.opaque
    assert back.remark == "no route for «Tópico» 主题" and back.body == b"\x00\xff"


def test_oneway_flag_and_unique_opaques():
    a = RemotingCommand.request(RequestCode.HEART_BEAT, oneway=True)
    b = RemotingCommand.request(RequestCode.HEART_BEAT)
    assert roundtrip(a).is_oneway and not roundtrip(b).is_oneway
    assert a.opaque != b.opaque


def test_header_layout_is_rocketmq_bytes():
    cmd = RemotingCommand(105, opaque=7, ext_fields={"topic": "T"}, body=b"xy")
    header = (
        b'{"code":105,"language":"PYTHON","version":0,"opaque":7,"flag":0,'
        b'"extFields":{"topic":"T"},"serializeTypeCurrentRPC":"JSON"}'
    )
    expected = (
        struct.pack(">I", 4 + len(header) + 2)
        + bytes([0])  # serialize type JSON in the high byte
        + len(header).to_bytes(3, "big")
        + header
        + b"xy"
    )
    assert cmd.encode() == expected


def test_decodes_a_java_client_header():
    header = {
        "code": 105,
        "extFields": {"topic": "TopicTest"},
        "flag": 0,
        "language": "JAVA",
        "opaque": 42,
        "serializeTypeCurrentRPC": "JSON",
        "version": 395,
    }
    cmd = decode_frame(frame_with_header(header))
    assert (cmd.code, cmd.opaque, cmd.flag) == (105, 42, 0)
    assert cmd.ext_fields == {"topic": "TopicTest"} and cmd.remark is None and cmd.body == b""


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"\x00\x00", "too short"),
        (struct.pack(">I", 10) + b"{}", "exceeds"),
        (struct.pack(">I", MAX_HEADER_SIZE + 1) + b" " * (MAX_HEADER_SIZE + 1), "over the limit"),
        (frame_with_header({"code": 1}, serialize_type=1), "serialize type 1"),
        (struct.pack(">I", 2) + b"\xff\xfe", "not UTF-8 JSON"),
        (struct.pack(">I", 3) + b"{x}", "not UTF-8 JSON"),
        (frame_with_header([1, 2]), "not an object"),
        (frame_with_header({"opaque": 1}), "'code'"),
        (frame_with_header({"code": "10"}), "'code'"),
        (frame_with_header({"code": True}), "'code'"),
        (frame_with_header({"code": 2**31}), "'code'"),
        (frame_with_header({"code": 1, "opaque": 1.5}), "'opaque'"),
        (frame_with_header({"code": 1, "flag": None}), "'flag'"),
        (frame_with_header({"code": 1, "remark": 5}), "'remark'"),
        (frame_with_header({"code": 1, "extFields": {"a": 1}}), "'extFields'"),
        (frame_with_header({"code": 1, "extFields": ["a"]}), "'extFields'"),
    ],
)
def test_malformed_frames_name_the_reason(payload, reason):
    with pytest.raises(RemotingFrameError, match=reason):
        decode_frame(payload)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=256))
def test_fuzz_arbitrary_bytes_only_raise_frame_errors(payload):
    try:
        cmd = decode_frame(payload)
    except RemotingFrameError:
        return
    assert isinstance(cmd, RemotingCommand)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=10,
)
HEADER_KEYS = st.sampled_from(["code", "opaque", "flag", "remark", "extFields", "language", "x"])


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(HEADER_KEYS, JSON_VALUES, max_size=6), st.binary(max_size=16))
def test_fuzz_json_headers_only_raise_frame_errors(header, body):
    try:
        cmd = decode_frame(frame_with_header(header, body))
    except RemotingFrameError:
        return
    assert roundtrip(cmd) == cmd  # whatever decodes re-encodes identically


def test_deeply_nested_header_is_a_frame_error():
    raw = b"[" * 50_000
    with pytest.raises(RemotingFrameError):
        decode_frame(struct.pack(">I", len(raw)) + raw)


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    b.settimeout(2.0)  # a read of a body that never comes would time out, not pass
    yield a, b
    a.close()
    b.close()


@pytest.mark.parametrize("length", [MAX_FRAME_SIZE + 1, 2**31 - 1, 3, 0, -1])
def test_bad_length_prefix_rejected_before_reading(pair, length):
    a, b = pair
    a.sendall(struct.pack(">i", length))  # no body follows
    start = time.monotonic()
    with pytest.raises(RemotingFrameError, match="frame length"):
        read_frame(b)
    assert time.monotonic() - start < 1.0


def test_read_frame_respects_a_smaller_limit(pair):
    a, b = pair
    a.sendall(RemotingCommand(10, body=b"x" * 100).encode())
    with pytest.raises(RemotingFrameError, match="outside"):
        read_frame(b, max_frame=64)


def test_read_frame_eof_and_truncation(pair):
    a, b = pair
    cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
    a.sendall(cmd.encode() + cmd.encode()[:10])
    a.shutdown(socket.SHUT_WR)
    assert read_frame(b) == cmd
    with pytest.raises(RemotingConnectError, match="middle of a frame"):
        read_frame(b)


def test_read_frame_clean_eof_is_none(pair):
    a, b = pair
    a.shutdown(socket.SHUT_WR)
    assert read_frame(b) is None


def test_read_frame_deadline(pair):
    _, b = pair
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        read_frame(b, deadline=time.monotonic() + 0.1)
    assert 0.05 < time.monotonic() - start < 1.0


def test_check_response_and_json_body():
    req = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
    ok = RemotingCommand.response_to(req, body=RemotingCommand.body_json({"a": [1, "é"]}))
    assert check_response(ok) is ok
    assert ok.body == '{"a":[1,"é"]}'.encode()
    assert ok.json_body() == {"a": [1, "é"]}
    assert RemotingCommand.response_to(req).json_body() is None

    with pytest.raises(ResponseError) as info:
        check_response(RemotingCommand.response_to(req, ResponseCode.TOPIC_NOT_EXIST, "no T"))
    assert (info.value.code, info.value.remark) == (17, "no T")
    with pytest.raises(ResponseError, match="SYSTEM_BUSY"):
        check_response(RemotingCommand.response_to(req, ResponseCode.SYSTEM_BUSY))
    with pytest.raises(ResponseError, match="response code 777"):
        check_response(RemotingCommand.response_to(req, 777))

    with pytest.raises(RemotingFrameError, match="GET_BROKER_CLUSTER_INFO"):
        RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO, body=b"{x").json_body()
    with pytest.raises(RemotingFrameError, match=r"response SUCCESS \(opaque"):
        RemotingCommand.response_to(req, body=b"\xff").json_body()


def test_required_ext_fields():
    req = RemotingCommand.request(RequestCode.REGISTER_BROKER, {"brokerId": "x", "name": "n"})
    assert req.ext("name") == "n"
    with pytest.raises(ResponseError, match="brokerName") as info:
        req.ext("brokerName")
    assert info.value.code == ResponseCode.SYSTEM_ERROR
    with pytest.raises(ResponseError, match="brokerId"):
        req.ext_int("brokerId")
    assert RemotingCommand.request(10, {"n": 5}).ext_int("n") == 5


def test_oversized_header_cannot_be_encoded():
    with pytest.raises(RemotingFrameError, match="header"):
        RemotingCommand(10, remark="x" * (MAX_HEADER_SIZE + 1)).encode()
