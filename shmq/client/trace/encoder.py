"""RocketMQ's trace data format (``TraceDataEncoder``): trace contexts as the text of a
trace message's body, and back.

A record is its fields joined by CONTENT_SPLITOR (U+0001) and ended by FIELD_SPLITOR
(U+0002); one trace message holds the records of many contexts, concatenated. A missing
Java field is the text ``null``. Field order per type (spec §6):

- ``Pub``: type, timeStamp, regionId, groupName, topic, msgId, tags, keys, storeHost,
  bodyLength, costTime, msgType ordinal, offsetMsgId, success (14 fields)
- ``SubBefore`` (one record per message): type, timeStamp, regionId, groupName,
  requestId, msgId, retryTimes, keys
- ``SubAfter`` (one record per message): type, requestId, msgId, costTime, success, keys,
  contextCode, timeStamp, groupName
- ``EndTransaction``: type, timeStamp, regionId, groupName, topic, msgId, tags, keys,
  storeHost, msgType ordinal, transactionId, transactionState, fromTransactionCheck

The decoder reads what RocketMQ's clients of every version write (a 13-field Pub without
offsetMsgId, a 15-field one with the client host, a SubAfter without timeStamp and
groupName) and skips, rather than fails on, a record it cannot read: trace topics are
written by many clients, and one bad record must not hide the others.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field

CONTENT_SPLITOR = "\u0001"
FIELD_SPLITOR = "\u0002"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"  # TopicValidator.RMQ_SYS_TRACE_TOPIC
DEFAULT_REGION = "DefaultRegion"  # BrokerConfig.regionId's default
NULL = "null"  # how Java's StringBuilder writes a null field

_MAX_INT = (1 << 31) - 1
_MAX_LONG = (1 << 63) - 1


class TraceType(enum.Enum):
    """RocketMQ's ``TraceType`` (its name is the record's first field)."""

    Pub = "Pub"
    SubBefore = "SubBefore"
    SubAfter = "SubAfter"
    EndTransaction = "EndTransaction"


class MessageType(enum.IntEnum):
    """RocketMQ's ``MessageType``: the ordinal is written."""

    Normal_Msg = 0
    Trans_Msg_Half = 1
    Trans_msg_Commit = 2
    Delay_Msg = 3
    Order_Msg = 4


class ConsumeReturnType(enum.IntEnum):
    """RocketMQ's ``ConsumeReturnType``: a SubAfter's contextCode is its ordinal."""

    SUCCESS = 0
    TIME_OUT = 1
    EXCEPTION = 2
    RETURNNULL = 3
    FAILED = 4


@dataclass(slots=True)
class TraceBean:
    """One message of a trace context (RocketMQ's ``TraceBean``)."""

    msg_id: str = NULL
    topic: str = NULL
    tags: str = NULL
    keys: str = NULL
    store_host: str = NULL
    body_length: int = 0
    msg_type: int = MessageType.Normal_Msg
    offset_msg_id: str = NULL
    retry_times: int = 0
    transaction_id: str = NULL
    transaction_state: str = NULL
    from_transaction_check: bool = False
    client_host: str | None = None


@dataclass(slots=True)
class TraceContext:
    """One traced event of one or more messages (RocketMQ's ``TraceContext``)."""

    trace_type: TraceType
    group_name: str
    beans: list[TraceBean]
    time_stamp: int = field(default_factory=lambda: int(time.time() * 1000))
    region_id: str = DEFAULT_REGION
    request_id: str = NULL
    cost_time: int = 0
    success: bool = True
    context_code: int = 0

    def transfer(self) -> tuple[str, set[str]]:
        """Its records and the keys of the trace message that carries them (RocketMQ's
        ``TraceTransferBean``), for the dispatcher."""
        return encode(self), trans_keys(self)


def _text(value: object) -> str:
    """A field as Java writes it: booleans lower-case; a field cannot hold a separator, so
    one in user text (tags, keys) is replaced rather than allowed to split the record."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    text = str(value)
    if CONTENT_SPLITOR in text or FIELD_SPLITOR in text:
        text = text.replace(CONTENT_SPLITOR, " ").replace(FIELD_SPLITOR, " ")
    return text


def _record(fields: tuple) -> str:
    return CONTENT_SPLITOR.join(map(_text, fields)) + FIELD_SPLITOR


# a Pub record (spec §6): timeStamp, regionId, groupName, topic, msgId, tags, keys, storeHost,
# bodyLength, costTime, msgType ordinal, offsetMsgId, success ("true" / "false")
PUB_FORMAT = CONTENT_SPLITOR.join(["Pub", "%d", *["%s"] * 7, "%d", "%d", "%d", "%s", "%s"]) + \
    FIELD_SPLITOR  # fmt: skip


def pub_record(
    time_stamp: int,
    region_id: str,
    group: str,
    topic: str,
    msg_id: str,
    tags: str,
    keys: str,
    store_host: str,
    body_length: int,
    cost_time: int,
    msg_type: int,
    offset_msg_id: str,
    success: bool,
) -> str:
    """One Pub record of a context: ``PUB_FORMAT`` with user text (tags, keys) made safe; the
    other fields are names, numbers and ids that hold no separator. (A producer's own Pubs
    are formatted a whole batch at a time: ``send_hook.pub_records``.)"""
    return PUB_FORMAT % (time_stamp, region_id, group, topic, msg_id, _text(tags), _text(keys),
                         store_host, body_length, cost_time, msg_type, offset_msg_id,
                         "true" if success else "false")  # fmt: skip


def encode(ctx: TraceContext) -> str:
    """The records of ``ctx``, as ``TraceDataEncoder.encoderFromContextBean`` writes them."""
    t = ctx.trace_type
    if t is TraceType.Pub:
        b = ctx.beans[0]
        return pub_record(ctx.time_stamp, ctx.region_id, ctx.group_name, b.topic, b.msg_id,
                          b.tags, b.keys, b.store_host, b.body_length, ctx.cost_time,
                          b.msg_type, b.offset_msg_id, ctx.success)  # fmt: skip
    if t is TraceType.SubBefore:
        head = (t.value, ctx.time_stamp, ctx.region_id, ctx.group_name, ctx.request_id)
        return "".join(_record((*head, b.msg_id, b.retry_times, b.keys)) for b in ctx.beans)
    if t is TraceType.SubAfter:
        tail = (ctx.context_code, ctx.time_stamp, ctx.group_name)
        return "".join(
            _record((t.value, ctx.request_id, b.msg_id, ctx.cost_time, ctx.success, b.keys, *tail))
            for b in ctx.beans
        )
    b = ctx.beans[0]
    return _record((t.value, ctx.time_stamp, ctx.region_id, ctx.group_name, b.topic, b.msg_id,
                    b.tags, b.keys, b.store_host, int(b.msg_type), b.transaction_id,
                    b.transaction_state, b.from_transaction_check))  # fmt: skip


def trans_keys(ctx: TraceContext) -> set[str]:
    """The keys of the trace message that carries ``ctx`` (``TraceTransferBean.transKey``):
    every bean's msgId and user keys, so a query by key finds a message's records."""
    keys: set[str] = set()
    for b in ctx.beans:
        keys.add(b.msg_id)
        if b.keys and b.keys != NULL:
            keys.update(k for k in b.keys.split(" ") if k)
    return keys


class _Skip(Exception):
    """A record that cannot be read (too few fields, a number that is not one)."""


def _long(text: str, limit: int = _MAX_LONG) -> int:
    """Java's ``Long.parseLong`` / ``Integer.parseInt``: ASCII digits with one optional
    sign, within range."""
    digits = text[1:] if text[:1] in ("-", "+") else text
    if not digits or not digits.isascii() or not digits.isdigit():
        raise _Skip
    value = int(text)
    if not -limit - 1 <= value <= limit:
        raise _Skip
    return value


def _int(text: str) -> int:
    return _long(text, _MAX_INT)


def _bool(text: str) -> bool:
    """Java's ``Boolean.parseBoolean``."""
    return text.lower() == "true"


def _fields(record: str) -> list[str]:
    """Java's ``String.split``: trailing empty fields dropped."""
    line = record.split(CONTENT_SPLITOR)
    while line and not line[-1]:
        line.pop()
    return line


def decode(data: str) -> list[TraceContext]:
    """The trace contexts in a trace message's body, as
    ``TraceDataEncoder.decoderFromTraceDataString`` reads them; records of an unknown type
    or that cannot be read are skipped."""
    out: list[TraceContext] = []
    for record in data.split(FIELD_SPLITOR):
        line = _fields(record)
        try:
            ctx = _decode_line(line)
        except (_Skip, IndexError):
            continue
        if ctx is not None:
            out.append(ctx)
    return out


def decode_body(body: bytes) -> list[TraceContext]:
    """``decode`` of a trace message's UTF-8 body (bad bytes replaced, not fatal)."""
    return decode(body.decode("utf-8", errors="replace"))


def _decode_line(line: list[str]) -> TraceContext | None:
    kind = line[0] if line else ""
    if kind == "Pub":
        bean = TraceBean(topic=line[4], msg_id=line[5], tags=line[6], keys=line[7],
                         store_host=line[8], body_length=_int(line[9]),
                         msg_type=_msg_type(line[11]))  # fmt: skip
        ctx = TraceContext(TraceType.Pub, line[3], [bean], _long(line[1]), line[2],
                           cost_time=_int(line[10]))  # fmt: skip
        if len(line) == 13:
            ctx.success = _bool(line[12])
        elif len(line) >= 14:
            bean.offset_msg_id = line[12]
            ctx.success = _bool(line[13])
        else:
            raise _Skip
        if len(line) >= 15:
            bean.client_host = line[14]
        return ctx
    if kind == "SubBefore":
        bean = TraceBean(msg_id=line[5], retry_times=_int(line[6]), keys=line[7])
        return TraceContext(TraceType.SubBefore, line[3], [bean], _long(line[1]), line[2],
                            request_id=line[4])  # fmt: skip
    if kind == "SubAfter":
        bean = TraceBean(msg_id=line[2], keys=line[5])
        ctx = TraceContext(TraceType.SubAfter, NULL, [bean], 0, NULL, request_id=line[1],
                           cost_time=_int(line[3]), success=_bool(line[4]))  # fmt: skip
        if len(line) >= 7:
            ctx.context_code = _int(line[6])
        if len(line) >= 9:
            ctx.time_stamp = _long(line[7])
            ctx.group_name = line[8]
        return ctx
    if kind == "EndTransaction":
        bean = TraceBean(topic=line[4], msg_id=line[5], tags=line[6], keys=line[7],
                         store_host=line[8], msg_type=_msg_type(line[9]),
                         transaction_id=line[10], transaction_state=line[11],
                         from_transaction_check=_bool(line[12]))  # fmt: skip
        return TraceContext(TraceType.EndTransaction, line[3], [bean], _long(line[1]), line[2])
    return None


def _msg_type(text: str) -> int:
    value = _int(text)
    if not 0 <= value < len(MessageType):
        raise _Skip
    return value
