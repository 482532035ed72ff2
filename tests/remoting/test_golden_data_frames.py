"""Golden frames of RocketMQ's data codes (issue 17, and issue 18's numbers and booleans):
requests laid out byte by byte as RocketMQ clients send them, in both header encodings, and
the exact bytes of the broker's answers."""

from __future__ import annotations

import struct

from shmq.broker.processors.pull import PULL_HEADER
from shmq.broker.processors.send import REGION_FIELDS
from shmq.broker.processors.send_header import SendHeader
from shmq.remoting.custom_header import decode_header
from shmq.remoting.protocol import RemotingCommand, SerializeType, decode_frame


def ext_block(pairs: list[tuple[bytes, bytes]]) -> bytes:
    return b"".join(struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in pairs)


# SEND_MESSAGE_V2 from a Java client (language JAVA, version 395), ROCKETMQ header, body "Hi"
V2_FIELDS = [(b"a", b"pg"), (b"b", b"T"), (b"c", b"TBW102"), (b"d", b"4"), (b"e", b"1"),
             (b"f", b"0"), (b"g", b"1700000000000"), (b"h", b"0"),
             (b"i", b"TAGS\x01A\x02UNIQ_KEY\x01" + b"0" * 32 + b"\x02"), (b"j", b"0"),
             (b"k", b"false"), (b"m", b"false")]  # fmt: skip
V2_EXT = ext_block(V2_FIELDS)
V2_HEADER = (
    bytes.fromhex("013600018b0000002a0000000000000000") + struct.pack(">i", len(V2_EXT)) + V2_EXT
)
GOLDEN_SEND_V2 = (
    struct.pack(">I", 4 + len(V2_HEADER) + 2)
    + struct.pack(">I", 1 << 24 | len(V2_HEADER))
    + V2_HEADER
    + b"Hi"
)

# PULL_MESSAGE as a Go / JavaScript client sends it: JSON header, numbers as JSON numbers
PULL_JSON = (
    b'{"code":11,"language":"GO","version":317,"opaque":7,"flag":0,"extFields":'
    b'{"consumerGroup":"g","topic":"T","queueId":1,"queueOffset":0,"maxMsgNums":32,'
    b'"sysFlag":6,"commitOffset":0,"suspendTimeoutMillis":15000,"subscription":"*",'
    b'"subVersion":1700000000000,"expressionType":"TAG"},"serializeTypeCurrentRPC":"JSON"}'
)
GOLDEN_PULL_JSON = struct.pack(">II", 4 + len(PULL_JSON), len(PULL_JSON)) + PULL_JSON


def test_golden_rocketmq_send_message_v2_decodes_to_4_9s_header():
    cmd = decode_frame(GOLDEN_SEND_V2[4:])
    assert (cmd.code, cmd.opaque, cmd.flag) == (310, 42, 0)
    assert cmd.serialize_type is SerializeType.ROCKETMQ
    assert cmd.body == b"Hi"
    h = SendHeader.parse(cmd)
    assert (h.producerGroup, h.topic, h.queueId, h.bornTimestamp) == ("pg", "T", 1, 1700000000000)
    assert h.properties.startswith("TAGS\x01A\x02") and h.batch is False and h.unitMode is False


def test_golden_json_pull_with_numbers_decodes_to_4_9s_header():
    cmd = decode_frame(GOLDEN_PULL_JSON[4:])
    h = decode_header(cmd, PULL_HEADER)
    assert h == {"consumerGroup": "g", "topic": "T", "queueId": 1, "queueOffset": 0,
                 "maxMsgNums": 32, "sysFlag": 6, "commitOffset": 0,
                 "suspendTimeoutMillis": 15000, "subscription": "*",
                 "subVersion": 1700000000000, "expressionType": "TAG"}  # fmt: skip


def test_golden_send_response_in_the_requests_rocketmq_encoding():
    request = decode_frame(GOLDEN_SEND_V2[4:])
    msg_id = "7F00000100002A9F0000000000000000"
    fields = {"msgId": msg_id, "queueId": 1, "queueOffset": 0} | REGION_FIELDS
    frame = RemotingCommand.response_to(request, 0, None, fields).encode()
    ext = ext_block([(b"msgId", msg_id.encode()), (b"queueId", b"1"), (b"queueOffset", b"0"),
                     (b"MSG_REGION", b"DefaultRegion"), (b"TRACE_ON", b"true")])  # fmt: skip
    header = (
        bytes.fromhex(
            "0000"  # SUCCESS
            "03"  # language PYTHON
            "0000"  # version
            "0000002a"  # the request's opaque
            "00000001"  # flag: response
            "00000000"  # no remark
        )
        + struct.pack(">i", len(ext))
        + ext
    )
    assert frame == struct.pack(">II", 4 + len(header), 1 << 24 | len(header)) + header


def test_golden_pull_not_found_response_in_json():
    request = decode_frame(GOLDEN_PULL_JSON[4:])
    fields = {"suggestWhichBrokerId": 0, "nextBeginOffset": 0, "minOffset": 0, "maxOffset": 0}
    frame = RemotingCommand.response_to(request, 19, "NO_MESSAGE_IN_QUEUE", fields).encode()
    header = (
        b'{"code":19,"language":"PYTHON","version":0,"opaque":7,"flag":1,'
        b'"remark":"NO_MESSAGE_IN_QUEUE","extFields":{"suggestWhichBrokerId":"0",'
        b'"nextBeginOffset":"0","minOffset":"0","maxOffset":"0"},'
        b'"serializeTypeCurrentRPC":"JSON"}'
    )
    assert frame == struct.pack(">II", 4 + len(header), len(header)) + header
