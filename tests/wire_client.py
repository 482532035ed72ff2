"""An independent RocketMQ 4.x wire client for tests, written from RocketMQ's protocol (the
``RemotingCommand`` frame, both header encodings, the send / pull request headers and the
batch body) with ``struct`` and ``json`` only, as a Java client lays the bytes out.

Nothing here imports ``shmq``: tests use it to check that the broker speaks RocketMQ's
protocol, not merely that shmq's encoder and decoder agree with each other.

Frame: ``int32 length | int32 (serializeType << 24 | headerLength) | header | body``.
JSON header: ``{"code","language","version","opaque","flag","remark","extFields",
"serializeTypeCurrentRPC"}``. ROCKETMQ header: ``int16 code | int8 language | int16 version
| int32 opaque | int32 flag | int32 remarkLen | remark | int32 extLen | {int16 keyLen | key |
int32 valLen | val}*``. Flag bit 0: response; bit 1: oneway.
"""

from __future__ import annotations

import json
import socket
import struct
from dataclasses import dataclass, field

from spec_decoder import decode_record

JSON, ROCKETMQ = 0, 1
RESPONSE, ONEWAY = 1, 2
JAVA, VERSION_4_9_4 = 0, 395  # LanguageCode.JAVA, MQVersion V4_9_4 ordinal (any value works)

SEND_MESSAGE, PULL_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE = 10, 11, 310, 320
QUERY_CONSUMER_OFFSET, UPDATE_CONSUMER_OFFSET = 14, 15
SUCCESS, SYSTEM_ERROR, SYSTEM_BUSY, REQUEST_CODE_NOT_SUPPORTED = 0, 1, 2, 3
MESSAGE_ILLEGAL, NO_PERMISSION, TOPIC_NOT_EXIST = 13, 16, 17
PULL_NOT_FOUND, PULL_RETRY_IMMEDIATELY, PULL_OFFSET_MOVED = 19, 20, 21
# PullSysFlag bits
COMMIT_OFFSET, SUSPEND, SUBSCRIPTION = 1, 2, 4


@dataclass
class Frame:
    code: int
    opaque: int
    flag: int = 0
    remark: str | None = None
    ext: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    serialize: int = JSON
    version: int = VERSION_4_9_4  # the client version the header names


def encode(frame: Frame, *, raw_ext: dict | None = None) -> bytes:
    """The whole frame. ``raw_ext`` (JSON only): extFields values as given (numbers and
    booleans stay JSON numbers and booleans, as clients in other languages send them)."""
    if frame.serialize == ROCKETMQ:
        remark = (frame.remark or "").encode()
        ext = b"".join(
            struct.pack(">h", len(k.encode())) + k.encode() + struct.pack(">i", len(v.encode()))
            + v.encode()
            for k, v in frame.ext.items()
        )  # fmt: skip
        header = (
            struct.pack(">hbhii", frame.code, JAVA, frame.version, frame.opaque, frame.flag)
            + struct.pack(">i", len(remark)) + remark + struct.pack(">i", len(ext)) + ext
        )  # fmt: skip
    else:
        obj = {"code": frame.code, "language": "JAVA", "version": frame.version,
               "opaque": frame.opaque, "flag": frame.flag}  # fmt: skip
        if frame.remark is not None:
            obj["remark"] = frame.remark
        obj["extFields"] = raw_ext if raw_ext is not None else frame.ext
        obj["serializeTypeCurrentRPC"] = "JSON"
        header = json.dumps(obj, separators=(",", ":")).encode()
    return (
        struct.pack(">ii", 4 + len(header) + len(frame.body), frame.serialize << 24 | len(header))
        + header
        + frame.body
    )


def decode(payload: bytes) -> Frame:
    """A frame from the bytes after its length prefix."""
    (mark,) = struct.unpack_from(">i", payload)
    kind, n = mark >> 24, mark & 0xFFFFFF
    header, body = payload[4 : 4 + n], payload[4 + n :]
    if kind == JSON:
        obj = json.loads(header)
        return Frame(obj["code"], obj["opaque"], obj["flag"], obj.get("remark"),
                     obj.get("extFields") or {}, body, JSON)  # fmt: skip
    assert kind == ROCKETMQ, kind
    code, _lang, _version, opaque, flag, remark_len = struct.unpack_from(">hbhiii", header)
    p = 17
    remark = header[p : p + remark_len].decode() if remark_len else None
    p += remark_len
    (ext_len,) = struct.unpack_from(">i", header, p)
    p += 4
    end = p + ext_len
    ext = {}
    while p < end:
        (kl,) = struct.unpack_from(">h", header, p)
        key = header[p + 2 : p + 2 + kl].decode()
        p += 2 + kl
        (vl,) = struct.unpack_from(">i", header, p)
        ext[key] = header[p + 4 : p + 4 + vl].decode()
        p += 4 + vl
    assert p == len(header)
    return Frame(code, opaque, flag, remark, ext, body, ROCKETMQ)


class WireClient:
    """One connection; requests are matched to responses by opaque (responses to held
    pulls may come back out of order)."""

    def __init__(self, address: str, serialize: int = JSON, timeout: float = 10.0,
                 version: int = VERSION_4_9_4) -> None:  # fmt: skip
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.serialize = serialize
        self.version = version
        self.opaque = 100
        self.early: dict[int, Frame] = {}
        self.pushed: list[Frame] = []

    def send(self, code: int, ext: dict[str, str], body: bytes = b"", *, oneway: bool = False,
             raw_ext: dict | None = None) -> int:  # fmt: skip
        self.opaque += 1
        frame = Frame(code, self.opaque, ONEWAY if oneway else 0, None, ext, body, self.serialize,
                      self.version)  # fmt: skip
        self.sock.sendall(encode(frame, raw_ext=raw_ext))
        return self.opaque

    def receive(self, opaque: int) -> Frame:
        while opaque not in self.early:
            frame = self.read()
            if frame.flag & RESPONSE:
                self.early[frame.opaque] = frame
            else:  # the broker's own request (NOTIFY_CONSUMER_IDS_CHANGED)
                self.pushed.append(frame)
        return self.early.pop(opaque)

    def read(self) -> Frame:
        (length,) = struct.unpack(">i", self._exactly(4))
        return decode(self._exactly(length))

    def call(self, code: int, ext: dict[str, str], body: bytes = b"", **kw) -> Frame:
        frame = self.receive(self.send(code, ext, body, **kw))
        assert frame.serialize == self.serialize  # answered in the request's encoding
        return frame

    def _exactly(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            buf += chunk
        return buf

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def properties(pairs: dict[str, str]) -> str:
    """``messageProperties2String``: every pair ends with 0x02."""
    return "".join(f"{k}\x01{v}\x02" for k, v in pairs.items())


def send_header_v2(group: str, topic: str, queue_id: int, props: dict[str, str], *,
                   born_ms: int = 1_700_000_000_000, sys_flag: int = 0, flag: int = 0,
                   batch: bool = False, reconsume: int | None = None,
                   max_reconsume: int | None = None) -> dict[str, str]:  # fmt: skip
    """SendMessageRequestHeaderV2 as the Java client fills it."""
    ext = {"a": group, "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id),
           "f": str(sys_flag), "g": str(born_ms), "h": str(flag), "i": properties(props),
           "j": str(reconsume or 0), "k": "false", "m": "true" if batch else "false"}  # fmt: skip
    if max_reconsume is not None:
        ext["l"] = str(max_reconsume)
    return ext


def batch_body(messages: list[tuple[int, bytes, dict[str, str]]]) -> bytes:
    """``MessageDecoder.encodeMessages``: per message TOTALSIZE, MAGICCODE 0, BODYCRC 0, FLAG,
    BODYLENGTH, BODY, int16 PROPERTIESLENGTH, PROPERTIES."""
    out = b""
    for flag, body, props in messages:
        raw = properties(props).encode()
        total = 4 + 4 + 4 + 4 + 4 + len(body) + 2 + len(raw)
        out += struct.pack(">iiiii", total, 0, 0, flag, len(body)) + body
        out += struct.pack(">h", len(raw)) + raw
    return out


def offset_header(group: str, topic: str, queue_id: int, offset: int) -> dict[str, str]:
    """UpdateConsumerOffsetRequestHeader."""
    return {"consumerGroup": group, "topic": topic, "queueId": str(queue_id),
            "commitOffset": str(offset)}  # fmt: skip


def pull_header(group: str, topic: str, queue_id: int, offset: int, *, max_nums: int = 32,
                sys_flag: int = SUSPEND | SUBSCRIPTION, commit_offset: int = 0,
                suspend_ms: int = 15000, subscription: str = "*") -> dict[str, str]:  # fmt: skip
    """PullMessageRequestHeader as the Java client fills it."""
    return {"consumerGroup": group, "topic": topic, "queueId": str(queue_id),
            "queueOffset": str(offset), "maxMsgNums": str(max_nums), "sysFlag": str(sys_flag),
            "commitOffset": str(commit_offset), "suspendTimeoutMillis": str(suspend_ms),
            "subscription": subscription, "subVersion": "0", "expressionType": "TAG"}  # fmt: skip


def pulled_records(body: bytes) -> list[dict]:
    """The records of a pull body, each checked by the spec decoder (length formula, CRC,
    PHYSICALOFFSET)."""
    out, p = [], 0
    while p < len(body):
        (phys,) = struct.unpack_from(">q", body, p + 28)
        record = decode_record(body, p, base=phys - p)
        assert record is not None, f"record {len(out)} of the pull body does not decode"
        out.append(record)
        p += record["size"]
    return out


def fastjson_loads(body: bytes):
    """A body as fastjson (mqadmin's parser) reads it: JSON, plus map keys that are bare
    numbers (``Map<Long, String>``) or objects (``Map<MessageQueue, X>``); an object key
    comes back as a sorted tuple of its ``(name, value)`` pairs."""
    text = body.decode("utf-8")
    value, end = _fj_value(text, 0)
    assert not text[end:].strip(), f"extra text after the body: {text[end:]!r}"
    return value


_JSON_DECODER = json.JSONDecoder()


def _fj_skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def _fj_value(text: str, i: int):
    i = _fj_skip(text, i)
    if text[i] == "{":
        out: dict = {}
        i = _fj_skip(text, i + 1)
        if text[i] == "}":
            return out, i + 1
        while True:
            i = _fj_skip(text, i)
            key, i = _fj_value(text, i)
            if isinstance(key, dict):
                key = tuple(sorted(key.items()))
            assert isinstance(key, str | int | tuple), f"bad map key {key!r}"
            i = _fj_skip(text, i)
            assert text[i] == ":", f"expected ':' at {i}: {text[i : i + 20]!r}"
            out[key], i = _fj_value(text, i + 1)
            i = _fj_skip(text, i)
            if text[i] == ",":
                i += 1
                continue
            assert text[i] == "}", f"expected '}}' at {i}: {text[i : i + 20]!r}"
            return out, i + 1
    if text[i] == "[":
        items: list = []
        i = _fj_skip(text, i + 1)
        if text[i] == "]":
            return items, i + 1
        while True:
            item, i = _fj_value(text, i)
            items.append(item)
            i = _fj_skip(text, i)
            if text[i] == ",":
                i += 1
                continue
            assert text[i] == "]", f"expected ']' at {i}: {text[i : i + 20]!r}"
            return items, i + 1
    return _JSON_DECODER.raw_decode(text, i)
