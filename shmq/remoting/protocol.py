"""RocketMQ's ``RemotingCommand`` wire format, so the control plane speaks RocketMQ's protocol.

Every control-plane message (namesrv and broker requests, their responses) is one frame::

    +----------------+-------------------------------+--------------+------------+
    | int32 BE       | int32 BE                      | header       | body       |
    | length (of all | serialize type << 24          |              | raw bytes  |
    | that follows)  | | header length (low 24 bits) |              |            |
    +----------------+-------------------------------+--------------+------------+

The header holds ``code``, ``language``, ``version``, ``opaque``, ``flag``, ``remark`` and
``extFields`` (a string map) in one of RocketMQ's two serialize types:

- ``JSON`` (0): UTF-8 JSON, the Java client's default. RocketMQ's broker reads it with
  fastjson into a ``HashMap<String, String>``, which takes any JSON value: clients in other
  languages send numbers and booleans (``"queueId":0``, ``"k":false``), so they are read as
  the strings fastjson makes of them (see ``_ext_value``).
- ``ROCKETMQ`` (1), RocketMQ's ``RocketMQSerializable``, big-endian::

      int16 code | byte language | int16 version | int32 opaque | int32 flag
      int32 remark length | remark (UTF-8)
      int32 extFields length | { int16 key length | key | int32 value length | value }*

  A length of 0 means null there, so an empty remark, key or value does not exist in it.

A response is written in its request's serialize type (``response_to``), as RocketMQ's
``serializeTypeCurrentRPC`` does; shmq's own requests use JSON. ``flag`` bit 0 marks a
response, bit 1 a oneway request; a response carries its request's ``opaque``.

Frames come from the network, so decoding trusts nothing: every malformed case raises
``RemotingFrameError`` with the reason, every length is checked before the bytes it covers
are read, and a length prefix above the frame limit is rejected before its body is read. A
frame that is malformed only after its code, opaque and flag were read raises the subclass
``RemotingHeaderError``: the frame's bounds are sound, so the server answers it with
SYSTEM_ERROR instead of closing the connection.
"""

from __future__ import annotations

import itertools
import json
import struct
import threading
from dataclasses import dataclass, field
from decimal import Decimal
from enum import IntEnum
from typing import Any

from shmq.errors import RemotingFrameError, RemotingHeaderError, ResponseError
from shmq.names import MAX_GROUP_LENGTH, MAX_TOPIC_LENGTH, name_problem
from shmq.remoting import fastjson
from shmq.remoting.codes import RequestCode as RequestCode  # re-exported: the codes' usual home
from shmq.remoting.codes import ResponseCode as ResponseCode
from shmq.remoting.codes import request_name, response_name

# RocketMQ's default frame limit (the com.rocketmq.remoting.frameMaxLength property).
MAX_FRAME_SIZE = 16 * 1024 * 1024
MAX_HEADER_SIZE = 256 * 1024  # a batch answer's msgId lists 4,096 ids of 33 bytes

FLAG_RESPONSE = 1 << 0
FLAG_ONEWAY = 1 << 1
# MQVersion.Version.V3_4_9's ordinal: a CONSUMER_SEND_MSG_BACK from a client of this version
# or later carries the consumer's own maxReconsumeTimes; an older client's is not read
VERSION_V3_4_9 = 121

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16_MIN, _INT16_MAX = -(2**15), 2**15 - 1
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
# the ROCKETMQ header's fixed part: code, language, version, opaque, flag
_ROCKETMQ_FIXED = struct.Struct(">hBhii")


class SerializeType(IntEnum):
    """How a frame's header is encoded (RocketMQ's ``SerializeType``): the high byte of the
    header-length word."""

    JSON = 0
    ROCKETMQ = 1


class LanguageCode(IntEnum):
    """RocketMQ's ``LanguageCode``: a JSON header names it, a ROCKETMQ header carries its
    byte. shmq writes PYTHON and, like RocketMQ, accepts any value from a peer (kept on
    the command for connection lists, not acted on)."""

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12


_LANGUAGES = {c.value: c.name for c in LanguageCode}
_LANGUAGE_CODES = {c.name: c.value for c in LanguageCode}
_opaques = itertools.count(1)
_opaque_lock = threading.Lock()


def next_opaque() -> int:
    with _opaque_lock:
        return next(_opaques) & _INT32_MAX  # Java int: wraps like RocketMQ's AtomicInteger


def _wire_str(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _wire_fields(fields: dict[str, Any] | None) -> dict[str, str]:
    """extFields as the wire has them: values converted with ``str`` (bools as ``true`` /
    ``false``); ``None`` values left out, as RocketMQ leaves out null header fields."""
    return {str(k): _wire_str(v) for k, v in (fields or {}).items() if v is not None}


@dataclass
class RemotingCommand:
    """One request or response. ``ext_fields`` values are always ``str`` (converted on
    construction); ``opaque`` pairs a response with its request; ``serialize_type`` is the
    header encoding it was read in and is written in."""

    code: int
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes | memoryview = b""  # a response's may be a view (of records gathered once)
    serialize_type: SerializeType = SerializeType.JSON
    # the client language and version the header names: shmq's own, PYTHON and 0, or a
    # peer's as read (connection lists report them)
    language: str = LanguageCode.PYTHON.name
    version: int = 0

    def __post_init__(self) -> None:
        self.ext_fields = _wire_fields(self.ext_fields)
        self.serialize_type = SerializeType(self.serialize_type)

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: dict[str, Any] | None = None,
        body: bytes = b"",
        *,
        oneway: bool = False,
        serialize_type: SerializeType = SerializeType.JSON,
    ) -> RemotingCommand:
        """A new request with a process-wide unique opaque."""
        flag = FLAG_ONEWAY if oneway else 0
        return cls(
            int(code), next_opaque(), flag, None, _wire_fields(ext_fields), body, serialize_type
        )

    @classmethod
    def response_to(
        cls,
        request: RemotingCommand,
        code: int = ResponseCode.SUCCESS,
        remark: str | None = None,
        ext_fields: dict[str, Any] | None = None,
        body: bytes | memoryview = b"",
    ) -> RemotingCommand:
        """The response to ``request``: same opaque, response flag set, and the request's
        serialize type (a client that writes ROCKETMQ headers reads them back)."""
        return cls(
            int(code),
            request.opaque,
            FLAG_RESPONSE,
            remark,
            _wire_fields(ext_fields),
            body,
            request.serialize_type,
        )

    @staticmethod
    def body_json(obj: Any) -> bytes:
        """``obj`` as a compact UTF-8 JSON body."""
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()

    def json_body(self) -> Any:
        """The body parsed as JSON, or as fastjson's dialect (``fastjson.loads``: object
        map keys, bare number keys); ``None`` for an empty body."""
        if not self.body:
            return None
        try:
            return fastjson.loads(self.body)
        except (ValueError, RecursionError) as exc:
            raise RemotingFrameError(f"body of {self._describe()} is not JSON: {exc}") from exc

    def _describe(self) -> str:
        if self.is_response:
            return f"response {response_name(self.code)} (opaque {self.opaque})"
        return request_name(self.code)

    def ext(self, name: str) -> str:
        """A required extFields value; missing answers SYSTEM_ERROR naming it (as RocketMQ
        does when a custom header field marked ``@CFNotNull`` is absent)."""
        value = self.ext_fields.get(name)
        if value is None:
            raise ResponseError(
                ResponseCode.SYSTEM_ERROR,
                f"the custom field <{name}> is null in {request_name(self.code)}",
            )
        return value

    def ext_topic(self, name: str = "topic") -> str:
        """A required topic name; one that breaks RocketMQ's rule answers SYSTEM_ERROR (as
        the broker's TopicValidator), so no handler builds a path or a table key from it."""
        return self._ext_name(name, "topic", MAX_TOPIC_LENGTH)

    def ext_group(self, name: str) -> str:
        """A required group name (RocketMQ's rule, at most 255 characters)."""
        return self._ext_name(name, "group", MAX_GROUP_LENGTH)

    def _ext_name(self, name: str, kind: str, limit: int) -> str:
        value = self.ext(name)
        problem = name_problem(kind, value, limit)
        if problem:
            raise ResponseError(
                ResponseCode.SYSTEM_ERROR, f"{problem} in {request_name(self.code)}"
            )
        return value

    def ext_int(self, name: str) -> int:
        """A required integer extFields value; missing or not an integer → SYSTEM_ERROR."""
        text = self.ext(name)
        try:
            return int(text)
        except ValueError:
            raise ResponseError(
                ResponseCode.SYSTEM_ERROR,
                f"the custom field <{name}> = {text!r} is not an integer"
                f" in {request_name(self.code)}",
            ) from None

    def encode(self) -> bytes:
        """The whole frame, including the 4-byte length prefix, with the header in
        ``serialize_type``."""
        if self.serialize_type is SerializeType.ROCKETMQ:
            header_bytes = self._rocketmq_header()
        else:
            header_bytes = self._json_header()
        if len(header_bytes) > MAX_HEADER_SIZE:
            raise RemotingFrameError(
                f"header of {request_name(self.code)} is {len(header_bytes)} bytes,"
                f" over the limit of {MAX_HEADER_SIZE}"
            )
        length = 4 + len(header_bytes) + len(self.body)
        return b"".join(
            (
                _UINT32.pack(length),
                _UINT32.pack(self.serialize_type << 24 | len(header_bytes)),
                header_bytes,
                self.body,
            )
        )

    def _json_header(self) -> bytes:
        header: dict[str, Any] = {
            "code": self.code,
            "language": self.language,
            "version": self.version,
            "opaque": self.opaque,
            "flag": self.flag,
        }
        if self.remark is not None:
            header["remark"] = self.remark
        if self.ext_fields:
            header["extFields"] = self.ext_fields
        header["serializeTypeCurrentRPC"] = SerializeType.JSON.name
        return json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()

    def _rocketmq_header(self) -> bytes:
        """RocketMQ's ``rocketMQProtocolEncode``: an empty remark, key or value is written
        with length 0, which the reader takes for null (as RocketMQ's encoder does)."""
        if not _INT16_MIN <= self.code <= _INT16_MAX:
            raise RemotingFrameError(f"code {self.code} does not fit the ROCKETMQ header's 16 bits")
        remark = (self.remark or "").encode()
        ext: list[bytes] = []
        for key, value in self.ext_fields.items():
            key_bytes, value_bytes = key.encode(), value.encode()
            if len(key_bytes) > _INT16_MAX:
                raise RemotingFrameError(
                    f"extFields key of {len(key_bytes)} bytes does not fit the ROCKETMQ"
                    f" header's 16-bit length"
                )
            ext += [_INT16.pack(len(key_bytes)), key_bytes]
            ext += [_INT32.pack(len(value_bytes)), value_bytes]
        ext_bytes = b"".join(ext)
        return b"".join(
            (
                _ROCKETMQ_FIXED.pack(
                    self.code,
                    _LANGUAGE_CODES.get(self.language, LanguageCode.OTHER),
                    self.version if _INT16_MIN <= self.version <= _INT16_MAX else 0,
                    self.opaque,
                    self.flag,
                ),
                _INT32.pack(len(remark)),
                remark,
                _INT32.pack(len(ext_bytes)),
                ext_bytes,
            )
        )


def _int_field(header: dict[str, Any], name: str, default: int | None = None) -> int:
    value = header.get(name, default)
    if type(value) is not int or not _INT32_MIN <= value <= _INT32_MAX:
        raise RemotingFrameError(f"header field {name!r} is {value!r}, not a 32-bit integer")
    return value


def _ext_value(name: str, value: object) -> str | None:
    """A JSON extFields value as fastjson reads it into RocketMQ's ``HashMap<String, String>``
    (its ``StringCodec``): a string as is, an integer as its digits, a fraction as Java's
    ``BigDecimal.toString`` (which ``Decimal`` prints alike, the header being parsed with
    ``parse_float=Decimal``), ``true`` / ``false``, an object or array as its JSON text
    (fastjson's key order is a hash map's, so nobody may rely on that text), and null as no
    value (``None``: the field is absent, as a null map value is to RocketMQ's readers)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | Decimal):
        return str(value)
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=float)
    except RecursionError:
        raise RemotingFrameError(f"extFields value of {name!r} is nested too deeply") from None


def _json_rest(header: dict[str, Any]) -> tuple[str | None, dict[str, str]]:
    """The remark and extFields of a JSON header."""
    remark = header.get("remark")
    if remark is not None and not isinstance(remark, str):
        raise RemotingFrameError(f"header field 'remark' is {remark!r}, not a string")
    ext_fields = header.get("extFields")
    if ext_fields is None:
        return remark, {}
    if not isinstance(ext_fields, dict):
        # fastjson fails the header here and RocketMQ closes the connection; the frame's
        # bounds are sound, so shmq answers it instead
        raise RemotingFrameError(f"header field 'extFields' is {ext_fields!r}, not an object")
    fields = {}
    for name, value in ext_fields.items():
        text = _ext_value(name, value)
        if text is not None:
            fields[name] = text
    return remark, fields


# one decoder for every header (``json.loads`` with options builds a decoder per call)
_HEADER_JSON = json.JSONDecoder(parse_float=Decimal, parse_constant=Decimal)


def _decode_json(header_bytes: bytes, body: bytes) -> RemotingCommand:
    try:
        header = _HEADER_JSON.decode(header_bytes.decode())
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise RemotingFrameError(f"header is not UTF-8 JSON: {exc}") from exc
    if not isinstance(header, dict):
        raise RemotingFrameError(f"header is a JSON {type(header).__name__}, not an object")
    cmd = RemotingCommand(
        _int_field(header, "code"), _int_field(header, "opaque", 0), _int_field(header, "flag", 0)
    )
    language = header.get("language")
    cmd.language = language if isinstance(language, str) else LanguageCode.OTHER.name
    version = header.get("version")
    cmd.version = version if type(version) is int else 0
    try:
        cmd.remark, cmd.ext_fields = _json_rest(header)
    except RemotingFrameError as exc:
        raise RemotingHeaderError(str(exc), cmd) from None
    cmd.body = body
    return cmd


class _Cursor:
    """Reads a ROCKETMQ header front to back; every length is checked against the bytes
    left before anything is read."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def left(self) -> int:
        return len(self.data) - self.pos

    def take(self, n: int, what: str) -> bytes:
        if n > self.left():
            raise RemotingFrameError(
                f"ROCKETMQ header: {what} needs {n} bytes, {self.left()} are left"
            )
        self.pos += n
        return self.data[self.pos - n : self.pos]

    def length(self, fmt: struct.Struct, what: str) -> int:
        (n,) = fmt.unpack(self.take(fmt.size, f"the length of {what}"))
        if n < 0:
            raise RemotingFrameError(f"ROCKETMQ header: the length of {what} is {n}")
        return n

    def text(self, fmt: struct.Struct, what: str) -> str | None:
        """A length-prefixed UTF-8 string; length 0 is null (RocketMQ's ``readStr``)."""
        raw = self.take(self.length(fmt, what), what)
        try:
            return raw.decode() if raw else None
        except UnicodeDecodeError as exc:
            raise RemotingFrameError(f"ROCKETMQ header: {what} is not UTF-8: {exc}") from None


def _decode_rocketmq(header_bytes: bytes, body: bytes) -> RemotingCommand:
    """RocketMQ's ``rocketMQProtocolDecode``, stricter where RocketMQ reads past a field's
    end: each string must lie within its block and the extFields block must end the
    header.

    Every request over TCP passes here, so a sound header is read by one tight loop
    (``_rocketmq_sound``); only a header it finds unsound is read again field by field,
    to name what is wrong."""
    cmd = _rocketmq_sound(header_bytes)
    if cmd is None:
        cmd = _rocketmq_checked(header_bytes)
    cmd.body = body
    return cmd


def _rocketmq_sound(data: bytes) -> RemotingCommand | None:
    """The command of a sound ROCKETMQ header, or None when anything in it is unsound."""
    end = len(data)
    try:
        code, language, version, opaque, flag = _ROCKETMQ_FIXED.unpack_from(data)
        p = _ROCKETMQ_FIXED.size
        (n,) = _INT32.unpack_from(data, p)
        p += 4
        if n < 0 or p + n > end:
            return None
        remark = data[p : p + n].decode() if n else None
        p += n
        (n,) = _INT32.unpack_from(data, p)
        p += 4
        if n < 0 or p + n != end:
            return None
        fields = {}
        unpack16, unpack32 = _INT16.unpack_from, _INT32.unpack_from
        while p < end:
            (n,) = unpack16(data, p)
            p += 2
            if n < 0 or p + n > end:
                return None
            key = data[p : p + n].decode() if n else None
            p += n
            (n,) = unpack32(data, p)
            p += 4
            if n < 0 or p + n > end:
                return None
            value = data[p : p + n].decode() if n else None
            p += n
            if key is not None and value is not None:  # null keys and values are unusable
                fields[key] = value
    except (struct.error, UnicodeDecodeError):
        return None
    cmd = RemotingCommand(code, opaque, flag, serialize_type=SerializeType.ROCKETMQ)
    cmd.remark = remark
    cmd.ext_fields = fields
    cmd.language, cmd.version = _language_name(language), version
    return cmd


def _language_name(code: int) -> str:
    return _LANGUAGES.get(code, LanguageCode.OTHER.name)


def _rocketmq_checked(header_bytes: bytes) -> RemotingCommand:
    """Reads the header field by field and raises naming the first unsound one."""
    cursor = _Cursor(header_bytes)
    fixed = cursor.take(_ROCKETMQ_FIXED.size, "the code, language, version, opaque and flag")
    code, language, version, opaque, flag = _ROCKETMQ_FIXED.unpack(fixed)
    cmd = RemotingCommand(code, opaque, flag, serialize_type=SerializeType.ROCKETMQ)
    cmd.language, cmd.version = _language_name(language), version
    try:
        cmd.remark = cursor.text(_INT32, "the remark")
        ext = _Cursor(cursor.take(cursor.length(_INT32, "extFields"), "extFields"))
        if cursor.left():
            raise RemotingFrameError(f"ROCKETMQ header: {cursor.left()} bytes after extFields")
        while ext.left():
            key = ext.text(_INT16, "an extFields key")
            value = ext.text(_INT32, f"the extFields value of {key!r}")
            if key is not None and value is not None:  # null keys and values are unusable
                cmd.ext_fields[key] = value
    except RemotingFrameError as exc:
        raise RemotingHeaderError(str(exc), cmd) from None
    return cmd


def decode_frame(payload: bytes) -> RemotingCommand:
    """Decode one frame's ``payload`` (the bytes after the length prefix)."""
    if len(payload) < 4:
        raise RemotingFrameError(f"frame of {len(payload)} bytes is too short (minimum 4)")
    (mark,) = _UINT32.unpack_from(payload)
    try:
        serialize_type = SerializeType(mark >> 24)
    except ValueError:
        raise RemotingFrameError(
            f"unsupported serialize type {mark >> 24} (JSON=0 and ROCKETMQ=1 are known)"
        ) from None
    header_len = mark & 0xFFFFFF
    if header_len > MAX_HEADER_SIZE:
        raise RemotingFrameError(
            f"header length {header_len} is over the limit of {MAX_HEADER_SIZE}"
        )
    if header_len > len(payload) - 4:
        raise RemotingFrameError(
            f"header length {header_len} exceeds the {len(payload) - 4} bytes left in the frame"
        )
    header, body = bytes(payload[4 : 4 + header_len]), bytes(payload[4 + header_len :])
    if serialize_type is SerializeType.ROCKETMQ:
        return _decode_rocketmq(header, body)
    return _decode_json(header, body)


def check_response(resp: RemotingCommand) -> RemotingCommand:
    """``resp`` if it is SUCCESS, else ``ResponseError(code, remark or the code's name)``."""
    if resp.code != ResponseCode.SUCCESS:
        raise ResponseError(resp.code, resp.remark or response_name(resp.code))
    return resp
