"""RemotingCommand framing: RocketMQ's byte layout, round trips, and hostile input."""

from __future__ import annotations

import itertools
import json
import socket
import struct
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shmq.errors import RemotingConnectError, RemotingFrameError, ResponseError
from shmq.remoting import protocol
from shmq.remoting.frames import FrameReader, read_frame
from shmq.remoting.protocol import (
    MAX_FRAME_SIZE,
    MAX_HEADER_SIZE,
    RemotingCommand,
    RemotingHeaderError,
    RequestCode,
    ResponseCode,
    SerializeType,
    check_response,
    decode_frame,
)

JSON, ROCKETMQ = SerializeType.JSON, SerializeType.ROCKETMQ


def roundtrip(cmd: RemotingCommand) -> RemotingCommand:
    frame = cmd.encode()
    (length,) = struct.unpack(">I", frame[:4])
    assert length == len(frame) - 4
    return decode_frame(frame[4:])


def frame_with_header(header: object, body: bytes = b"", serialize_type: int = 0) -> bytes:
    """A payload (after the length prefix) around an arbitrary JSON header."""
    raw = json.dumps(header).encode()
    return struct.pack(">I", serialize_type << 24 | len(raw)) + raw + body


def rmq_header(
    code: int,
    opaque: int = 0,
    flag: int = 0,
    remark: bytes = b"",
    fields: tuple[tuple[bytes, bytes], ...] = (),
    *,
    language: int = 0,
    ext_len: int | None = None,
) -> bytes:
    """A ROCKETMQ header put together by hand (RocketMQSerializable's layout)."""
    ext = b"".join(struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in fields)
    return (
        struct.pack(">hbhii", code, language, 395, opaque, flag)
        + struct.pack(">i", len(remark))
        + remark
        + struct.pack(">i", len(ext) if ext_len is None else ext_len)
        + ext
    )


def with_ext(raw_ext: bytes) -> bytes:
    """A ROCKETMQ header (code 10, opaque 77) whose extFields block is ``raw_ext``."""
    return rmq_header(10, 77)[:17] + struct.pack(">i", len(raw_ext)) + raw_ext


def rmq_payload(header: bytes, body: bytes = b"") -> bytes:
    """A payload (after the length prefix) around a ROCKETMQ header."""
    return struct.pack(">I", 1 << 24 | len(header)) + header + body


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
    assert (cmd.language, cmd.version) == ("JAVA", 395)  # kept for connection lists


@pytest.mark.parametrize(("byte", "name"), [(0, "JAVA"), (9, "GO"), (12, "RUST"), (99, "OTHER")])
def test_a_rocketmq_header_names_its_language_by_its_byte(byte, name):
    cmd = decode_frame(rmq_payload(rmq_header(34, 5, language=byte)))
    assert (cmd.language, cmd.version) == (name, 395)
    assert protocol._rocketmq_checked(rmq_header(34, 5, language=byte)) == cmd


def test_a_json_header_language_that_is_not_a_name_is_other():
    cmd = decode_frame(frame_with_header({"code": 34, "language": 3, "version": "x"}))
    assert (cmd.language, cmd.version) == ("OTHER", 0)


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"\x00\x00", "too short"),
        (struct.pack(">I", 10) + b"{}", "exceeds"),
        (struct.pack(">I", MAX_HEADER_SIZE + 1) + b" " * (MAX_HEADER_SIZE + 1), "over the limit"),
        (frame_with_header({"code": 1}, serialize_type=2), "serialize type 2"),
        (struct.pack(">I", 2) + b"\xff\xfe", "not UTF-8 JSON"),
        (struct.pack(">I", 3) + b"{x}", "not UTF-8 JSON"),
        (frame_with_header([1, 2]), "not an object"),
        (frame_with_header({"opaque": 1}), "'code'"),
        (frame_with_header({"code": "10"}), "'code'"),
        (frame_with_header({"code": True}), "'code'"),
        (frame_with_header({"code": 2**31}), "'code'"),
        (frame_with_header({"code": 1, "opaque": 1.5}), "'opaque'"),
        (frame_with_header({"code": 1, "flag": None}), "'flag'"),
        (struct.pack(">I", 1 << 24 | 12) + bytes(12), "needs 13 bytes, 12 are left"),
    ],
)
def test_malformed_frames_name_the_reason(payload, reason):
    with pytest.raises(RemotingFrameError, match=reason) as info:
        decode_frame(payload)
    assert not isinstance(info.value, RemotingHeaderError)  # nothing to answer it with


# -- numbers and booleans in extFields, the ROCKETMQ header ------------------------------------


def test_golden_json_query_consumer_offset_with_a_numeric_queue_id():
    """As a JavaScript client sends QUERY_CONSUMER_OFFSET(14): queueId is a JSON number."""
    header = (
        b'{"code":14,"language":"JAVA","version":395,"opaque":5,"flag":0,'
        b'"extFields":{"consumerGroup":"g","topic":"T","queueId":0},'
        b'"serializeTypeCurrentRPC":"JSON"}'
    )
    cmd = decode_frame(struct.pack(">I", len(header)) + header)
    assert (cmd.code, cmd.opaque, cmd.serialize_type) == (14, 5, JSON)
    assert cmd.ext_fields == {"consumerGroup": "g", "topic": "T", "queueId": "0"}
    assert cmd.ext_int("queueId") == 0


def test_golden_json_send_message_v2_with_numbers_and_booleans():
    header = (
        b'{"code":310,"flag":0,"language":"CPP","opaque":9,"serializeTypeCurrentRPC":"JSON",'
        b'"version":0,"extFields":{"a":"pg","b":"T","c":"TBW102","d":4,"e":0,"f":0,'
        b'"g":1700000000000,"h":0,"i":"KEYS\\u0001k1","j":0,"k":false,"m":true}}'
    )
    cmd = decode_frame(struct.pack(">I", len(header)) + header + b"body")
    assert cmd.ext_fields == {
        "a": "pg", "b": "T", "c": "TBW102", "d": "4", "e": "0", "f": "0",
        "g": "1700000000000", "h": "0", "i": "KEYS\x01k1", "j": "0", "k": "false", "m": "true",
    }  # fmt: skip
    assert cmd.body == b"body" and roundtrip(cmd) == cmd


def test_json_ext_values_read_as_fastjson_reads_them_into_a_string_map():
    ext = (
        b'{"int":-7,"big":123456789012345678901234567890,"f":1.5,"scaled":-2.50,"e":1e5,'
        b'"tiny":1E-7,"t":true,"n":null,"o":{"x":[1,true,null,0.5]},"a":[],"s":""}'
    )
    header = b'{"code":14,"opaque":1,"extFields":' + ext + b"}"
    cmd = decode_frame(struct.pack(">I", len(header)) + header)
    assert cmd.ext_fields == {
        "int": "-7",
        "big": "123456789012345678901234567890",
        "f": "1.5",
        "scaled": "-2.50",  # Java's BigDecimal.toString keeps the scale
        "e": "1E+5",
        "tiny": "1E-7",
        "t": "true",
        "o": '{"x":[1,true,null,0.5]}',  # a nested value: its JSON text
        "a": "[]",
        "s": "",
    }  # null: absent, as RocketMQ's header readers see a null map value


def test_golden_rocketmq_request_and_its_rocketmq_response():
    frame = bytes.fromhex(
        "00000033"  # length: 4 + 47
        "0100002f"  # serialize type ROCKETMQ, header length 47
        "000e"  # code 14 (QUERY_CONSUMER_OFFSET)
        "00"  # language JAVA
        "018b"  # version 395
        "00000005"  # opaque
        "00000000"  # flag
        "00000000"  # remark: none
        "0000001a"  # extFields: 26 bytes
        "0005" + b"topic".hex() + "00000001" + b"T".hex() + "0007" + b"queueId".hex() + "00000001"
        "30"  # "0"
    )
    cmd = decode_frame(frame[4:])
    assert (cmd.code, cmd.opaque, cmd.flag, cmd.remark) == (14, 5, 0, None)
    assert cmd.ext_fields == {"topic": "T", "queueId": "0"}
    assert cmd.serialize_type is ROCKETMQ
    resp = RemotingCommand.response_to(cmd, ext_fields={"offset": 0})
    assert resp.serialize_type is ROCKETMQ
    assert resp.encode() == bytes.fromhex(
        "00000026"  # length: 4 + 34
        "01000022"  # ROCKETMQ, header length 34
        "0000"  # code SUCCESS
        "03"  # language PYTHON
        "0000"  # version
        "00000005"  # opaque of the request
        "00000001"  # flag: response
        "00000000"  # remark: none
        "0000000d"  # extFields: 13 bytes
        "0006" + b"offset".hex() + "00000001" + b"0".hex()
    )
    json_request = decode_frame(frame_with_header({"code": 14}))
    assert RemotingCommand.response_to(json_request).encode()[4] == JSON  # answered in kind


def test_golden_rocketmq_send_message_v2_with_numbers_and_booleans():
    fields = ((b"a", b"pg"), (b"b", b"T"), (b"d", b"4"), (b"e", b"0"), (b"k", b"false"))
    cmd = decode_frame(rmq_payload(rmq_header(310, 9, 0, b"", fields, language=1), b"body"))
    assert cmd.ext_fields == {"a": "pg", "b": "T", "d": "4", "e": "0", "k": "false"}
    assert cmd.body == b"body" and roundtrip(cmd) == cmd


def test_rocketmq_round_trip_and_its_nulls():
    req = RemotingCommand.request(
        RequestCode.UPDATE_CONSUMER_OFFSET,
        {"consumerGroup": "grüppe", "queueId": 3, "ok": True, "none": None},
        "消息".encode(),
        serialize_type=ROCKETMQ,
    )
    assert roundtrip(req) == req
    assert req.encode()[4] == ROCKETMQ
    resp = RemotingCommand.response_to(req, ResponseCode.SYSTEM_BUSY, "busy «now»", {"x": 1})
    assert roundtrip(resp) == resp and resp.serialize_type is ROCKETMQ
    # length 0 is null in this encoding: an empty remark, key or value does not survive
    odd = RemotingCommand(10, remark="", ext_fields={"": "x", "k": ""}, serialize_type=ROCKETMQ)
    back = roundtrip(odd)
    assert (back.remark, back.ext_fields) == (None, {})
    oneway = RemotingCommand.request(RequestCode.HEART_BEAT, oneway=True, serialize_type=1)
    assert roundtrip(oneway).is_oneway and oneway.serialize_type is ROCKETMQ


def test_rocketmq_encoding_limits():
    with pytest.raises(RemotingFrameError, match="16 bits"):
        RemotingCommand(40000, serialize_type=ROCKETMQ).encode()
    with pytest.raises(RemotingFrameError, match="16-bit length"):
        RemotingCommand(10, ext_fields={"k" * 40000: "v"}, serialize_type=ROCKETMQ).encode()
    assert len(RemotingCommand(40000).encode()) > 0  # JSON has no such limit


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        (rmq_header(10, 77)[:15], "length of the remark needs 4 bytes, 2 are left"),
        (rmq_header(10, 77, remark=b"abc")[:-6], "the remark needs 3 bytes, 1 are left"),
        (rmq_header(10, 77)[:13] + struct.pack(">i", -1), "length of the remark is -1"),
        (rmq_header(10, 77, remark=b"\xff"), "the remark is not UTF-8"),
        (rmq_header(10, 77)[:-4], "length of extFields needs 4 bytes, 0 are left"),
        (rmq_header(10, 77, ext_len=-5), "length of extFields is -5"),
        (rmq_header(10, 77, ext_len=9), "extFields needs 9 bytes, 0 are left"),
        (rmq_header(10, 77) + b"xy", "2 bytes after extFields"),
        (with_ext(b"\x00"), "the length of an extFields key needs 2 bytes, 1 are left"),
        (with_ext(b"\x00\x01k\x00\x00\x00"), "the extFields value of 'k' needs 4 bytes"),
        (with_ext(b"\x00\x01k\x00\x00\x00\x02v"), "value of 'k' needs 2 bytes, 1 are left"),
        (with_ext(b"\x00\x01k\xff\xff\xff\xff"), "the extFields value of 'k' is -1"),
        (with_ext(b"\xff\xfe\x00\x00\x00\x00"), "the length of an extFields key is -2"),
        (rmq_header(10, 77, fields=((b"\xc3", b"v"),)), "an extFields key is not UTF-8"),
    ],
)
def test_malformed_rocketmq_headers_are_answerable(header, reason):
    with pytest.raises(RemotingHeaderError, match=reason) as info:
        decode_frame(rmq_payload(header))
    assert (info.value.request.opaque, info.value.request.code) == (77, 10)
    assert info.value.request.serialize_type is ROCKETMQ


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        ({"code": 1, "opaque": 8, "remark": 5}, "'remark'"),
        ({"code": 1, "opaque": 8, "extFields": ["a"]}, "'extFields' is \\['a'\\], not an ob"),
        ({"code": 1, "opaque": 8, "extFields": "a=b"}, "'extFields'"),
        ({"code": 1, "opaque": 8, "extFields": 3}, "'extFields'"),
    ],
)
def test_malformed_json_headers_past_the_opaque_are_answerable(header, reason):
    with pytest.raises(RemotingHeaderError, match=reason) as info:
        decode_frame(frame_with_header(header))
    assert info.value.request.opaque == 8 and info.value.request.serialize_type is JSON


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


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=256), st.binary(max_size=8))
def test_fuzz_arbitrary_rocketmq_headers_only_raise_frame_errors(header, body):
    try:
        cmd = decode_frame(rmq_payload(header, body))
    except RemotingFrameError:
        return
    assert cmd.serialize_type is ROCKETMQ and cmd.body == body
    assert roundtrip(cmd) == cmd


TEXT = st.text(min_size=1, max_size=8)
COMMANDS = st.builds(
    RemotingCommand,
    code=st.integers(-(2**15), 2**15 - 1),
    opaque=st.integers(-(2**31), 2**31 - 1),
    flag=st.integers(-(2**31), 2**31 - 1),
    remark=st.none() | TEXT,
    ext_fields=st.dictionaries(TEXT, TEXT, max_size=4),
    body=st.binary(max_size=16),
    serialize_type=st.sampled_from(SerializeType),
)


@settings(max_examples=300, deadline=None)
@given(COMMANDS)
def test_fuzz_commands_round_trip_in_both_encodings(cmd):
    assert roundtrip(cmd) == cmd


@settings(max_examples=400, deadline=None)
@given(COMMANDS, st.data())
def test_fuzz_damaged_rocketmq_headers_only_raise_frame_errors(cmd, data):
    """A valid ROCKETMQ header cut short or with one byte changed (the header length
    word kept honest): decoding either fails with a reason or yields a command that
    round-trips."""
    cmd.serialize_type = ROCKETMQ
    header = cmd.encode()[8 : 8 + len(cmd.encode()) - 8 - len(cmd.body)]
    if data.draw(st.booleans()):
        header = header[: data.draw(st.integers(0, len(header)))]
    elif header:
        at = data.draw(st.integers(0, len(header) - 1))
        header = header[:at] + bytes([data.draw(st.integers(0, 255))]) + header[at + 1 :]
    try:
        back = decode_frame(rmq_payload(header, cmd.body))
    except RemotingFrameError:
        return
    assert roundtrip(back) == back


@settings(max_examples=400, deadline=None)
@given(COMMANDS, st.data())
def test_fuzz_the_fast_rocketmq_reader_agrees_with_the_checked_one(cmd, data):
    """The one-loop reader of sound headers takes exactly the headers the field-by-field
    reader takes, and reads them alike: sound, cut short, with one byte changed or with
    bytes after the extFields."""
    cmd.serialize_type = ROCKETMQ
    header = cmd._rocketmq_header()
    damage = data.draw(st.sampled_from(["none", "cut", "change", "append"]))
    if damage == "cut":
        header = header[: data.draw(st.integers(0, len(header)))]
    elif damage == "change":
        at = data.draw(st.integers(0, len(header) - 1))
        header = header[:at] + bytes([data.draw(st.integers(0, 255))]) + header[at + 1 :]
    elif damage == "append":  # a well-formed pair, but outside the extFields block
        key, value = data.draw(st.binary(max_size=4)), data.draw(st.binary(max_size=4))
        header += struct.pack(">h", len(key)) + key + struct.pack(">i", len(value)) + value
    fast = protocol._rocketmq_sound(header)
    try:
        checked = protocol._rocketmq_checked(header)
    except RemotingFrameError:
        assert fast is None
        return
    assert fast == checked


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


@pytest.fixture(params=["read_frame", "FrameReader"])
def reader(request):
    """``reader(sock, max_frame)``: a function reading the next frame of ``sock``, by
    ``read_frame`` or by a ``FrameReader`` (the server's), which must behave alike."""
    if request.param == "read_frame":
        return lambda sock, max_frame=MAX_FRAME_SIZE: lambda: read_frame(sock, max_frame)
    return lambda sock, max_frame=MAX_FRAME_SIZE: FrameReader(sock, max_frame).read


@pytest.mark.parametrize("length", [MAX_FRAME_SIZE + 1, 2**31 - 1, 3, 0, -1])
def test_bad_length_prefix_rejected_before_reading(pair, reader, length):
    a, b = pair
    a.sendall(struct.pack(">i", length))  # no body follows
    start = time.monotonic()
    with pytest.raises(RemotingFrameError, match="frame length"):
        reader(b)()
    assert time.monotonic() - start < 1.0


def test_read_frame_respects_a_smaller_limit(pair, reader):
    a, b = pair
    a.sendall(RemotingCommand(10, body=b"x" * 100).encode())
    with pytest.raises(RemotingFrameError, match="outside"):
        reader(b, max_frame=64)()


def test_read_frame_eof_and_truncation(pair, reader):
    a, b = pair
    cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
    a.sendall(cmd.encode() + cmd.encode()[:10])
    a.shutdown(socket.SHUT_WR)
    read = reader(b)
    assert read() == cmd
    with pytest.raises(RemotingConnectError, match="middle of a frame"):
        read()


def test_read_frame_clean_eof_is_none(pair, reader):
    a, b = pair
    a.shutdown(socket.SHUT_WR)
    assert reader(b)() is None


def test_frame_reader_bounds_the_rest_of_a_frame(pair):
    a, b = pair
    a.sendall(RemotingCommand(10, body=b"x" * 100).encode()[:20])  # the rest never comes
    frames = FrameReader(b, frame_timeout=0.1)
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        frames.read()
    assert 0.05 < time.monotonic() - start < 1.0
    assert b.gettimeout() == 2.0  # the socket's own timeout is back


class ChunkedSocket:
    """A stream handed out in the given chunks, one per ``recv`` (as a socket may), then
    EOF: chunk boundaries anywhere, inside a length prefix or a header."""

    def __init__(self, data: bytes, cuts: list[int]) -> None:
        bounds = sorted({0, len(data), *(c for c in cuts if 0 < c < len(data))})
        self.chunks = [data[x:y] for x, y in itertools.pairwise(bounds)]

    def recv(self, n: int) -> bytes:
        if not self.chunks:
            return b""
        chunk = self.chunks.pop(0)
        if len(chunk) > n:
            chunk, rest = chunk[:n], chunk[n:]
            self.chunks.insert(0, rest)
        return chunk

    def gettimeout(self) -> float | None:
        return None

    def settimeout(self, _timeout: float | None) -> None:
        pass


@settings(max_examples=200, deadline=None)
@given(st.lists(COMMANDS, max_size=6), st.lists(st.integers(0, 2000), max_size=30))
def test_fuzz_frame_reader_reads_a_stream_cut_anywhere(cmds, cuts):
    frames = FrameReader(ChunkedSocket(b"".join(c.encode() for c in cmds), cuts))
    assert [frames.read() for _ in cmds] == [roundtrip(c) for c in cmds]
    assert frames.read() is None


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
