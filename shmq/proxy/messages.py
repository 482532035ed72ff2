"""Messages between their gRPC form and the broker's (RocketMQ 5.3's ``SendMessageActivity``
property building and ``GrpcConverter.buildMessage``).

A message to send becomes the remoting send's properties and sysflag, checked as RocketMQ's
proxy checks them. A stored message (a POP's record) becomes a gRPC ``Message`` with its
system properties filled from the record and its receipt handle.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from shmq.body_compression import COMPRESSED_FLAG
from shmq.codec import record as rec
from shmq.message import MessageExt
from shmq.properties import RESERVED_PROPERTY_NAMES
from shmq.proxy import validation as v
from shmq.proxy.proxy_config import ProxyConfig
from shmq.proxy.status import Code, ProxyError
from shmq.proxy.v2 import definition_pb2 as pb

TRANSACTION_PREPARED = rec.SYSFLAG_TRANSACTION_PREPARED
# 5.x's MessageConst names besides 4.x's (RESERVED_PROPERTY_NAMES): never user properties
_SYSTEM_NAMES = RESERVED_PROPERTY_NAMES | {
    "POP_CK", "1ST_POP_TIME", "POP_CK_OFFSET", "DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID",
    "CONSUME_CONTEXT_TYPE", "__STARTDELIVERTIME", "EXTEND_UNIQ_INFO", "RECONSUME_TIME",
}  # fmt: skip


@dataclass(frozen=True)
class Outgoing:
    """One message as the broker's send takes it."""

    properties: dict[str, str]
    sysflag: int
    body: bytes
    message_id: str

    def encoded_properties(self) -> str:
        """RocketMQ's ``messageProperties2String``: ``name\\x01value\\x02`` pairs."""
        return "".join(f"{k}\x01{val}\x02" for k, val in self.properties.items())


def message_type(properties: dict[str, str]) -> str:
    """RocketMQ's ``TopicMessageType.parseFromMessageProperty``."""
    if properties.get("TRAN_MSG") == "true":
        return "TRANSACTION"
    if any(k in properties for k in ("DELAY", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC",
                                     "TIMER_DELAY_MS")):  # fmt: skip
        return "DELAY"
    return "FIFO" if "__SHARDINGKEY" in properties else "NORMAL"


def outgoing(message: pb.Message, producer_group: str, peer: str, cfg: ProxyConfig) -> Outgoing:
    """The broker's form of ``message`` (``buildMessage``); ``ProxyError`` with RocketMQ's
    code for the first thing wrong with it."""
    body = message.body
    if cfg.enable_message_body_empty_check and not body:
        raise ProxyError(Code.MESSAGE_BODY_EMPTY, "message body cannot be empty")
    if cfg.max_message_size > 0 and len(body) > cfg.max_message_size:
        raise ProxyError(Code.MESSAGE_BODY_TOO_LARGE,
                         f"message body cannot exceed the max {cfg.max_message_size}")  # fmt: skip
    sp = message.system_properties
    user = dict(message.user_properties)
    size = v.validate_user_properties(user, cfg.user_property_max_num)
    props = dict(user)
    v.validate_tag(sp.tag)
    if sp.tag:
        props["TAGS"] = sp.tag
    size += v.utf8_size(sp.tag)
    for key in sp.keys:
        v.validate_key(key)
        size += v.utf8_size(key)
    if sp.keys:
        props["KEYS"] = " ".join(sp.keys)
    if size > cfg.max_user_property_size:
        raise ProxyError(
            Code.MESSAGE_PROPERTIES_TOO_LARGE,
            f"the total size of user property is too large, max is {cfg.max_user_property_size}",
        )
    if not sp.message_id.strip():
        raise ProxyError(Code.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
    if v.has_control(sp.message_id) or " " in sp.message_id:
        raise ProxyError(Code.ILLEGAL_MESSAGE_ID, "message id cannot contain control character")
    props["UNIQ_KEY"] = sp.message_id
    sysflag = COMPRESSED_FLAG if sp.body_encoding == pb.GZIP else 0
    if sp.message_type == pb.TRANSACTION:
        sysflag |= TRANSACTION_PREPARED
        props["TRAN_MSG"] = "true"
        if sp.HasField("orphaned_transaction_recovery_duration"):
            seconds = sp.orphaned_transaction_recovery_duration.seconds
            limit = cfg.max_transaction_recovery_second
            if limit > 0 and seconds > limit:
                raise ProxyError(Code.BAD_REQUEST, "the max transaction recovery time of "
                                 f"message is too large, max is {limit}")  # fmt: skip
            props["CHECK_IMMUNITY_TIME_IN_SECONDS"] = str(seconds)
    if sp.HasField("delivery_timestamp"):
        deliver_ms = v.timestamp_ms(sp.delivery_timestamp, Code.ILLEGAL_DELIVERY_TIME)
        limit = cfg.max_delay_time_mills
        if limit > 0 and deliver_ms - time.time_ns() // 1_000_000 > limit:
            raise ProxyError(
                Code.ILLEGAL_DELIVERY_TIME,
                f"the max delay time of message is too large, max is {limit}",
            )
        props["TIMER_DELIVER_MS"] = str(deliver_ms)
    props["RECONSUME_TIME"] = str(sp.delivery_attempt)
    props["PGROUP"] = producer_group
    if sp.message_group:
        v.validate_message_group(sp.message_group, cfg.max_message_group_size)
        props["__SHARDINGKEY"] = sp.message_group
    for name, value in (("TRACE_CONTEXT", sp.trace_context), ("__BORNHOST", sp.born_host or peer)):
        if value.strip():
            if v.has_control(value):
                raise ProxyError(Code.BAD_REQUEST, f"{name} cannot contain control character")
            props[name] = value
    if sp.HasField("born_timestamp"):
        props["BORN_TIMESTAMP"] = str(v.timestamp_ms(sp.born_timestamp, Code.BAD_REQUEST))
    return Outgoing(props, sysflag, body, sp.message_id)


def _timestamp(ms: int) -> Timestamp:
    stamp = Timestamp()
    stamp.FromMilliseconds(ms)
    return stamp


def incoming(msg: MessageExt, receipt_handle: str | None) -> pb.Message:
    """The gRPC form of a stored message (``GrpcConverter.buildMessage``)."""
    props = msg.properties
    body = msg.stored_body  # a compressed one as stored, flagged GZIP, as RocketMQ's proxy
    sp = pb.SystemProperties(
        keys=msg.keys,
        message_id=msg.uniq_key or msg.offset_msg_id,
        body_digest=pb.Digest(type=pb.MD5, checksum=hashlib.md5(body).hexdigest().upper()),
        body_encoding=pb.GZIP if msg.sysflag & COMPRESSED_FLAG else pb.IDENTITY,
        message_type=pb.MessageType.Value(message_type(props)),
        born_timestamp=_timestamp(msg.born_timestamp),
        born_host=props.get("__BORNHOST") or msg.born_host.rsplit(":", 1)[0],
        store_timestamp=_timestamp(msg.store_timestamp),
        store_host=msg.store_host,
        queue_id=msg.queue_id,
        queue_offset=msg.queue_offset,
        delivery_attempt=msg.reconsume_times + 1,
    )
    if msg.tags is not None:
        sp.tag = msg.tags
    if receipt_handle is not None:
        sp.receipt_handle = receipt_handle
    deliver = props.get("TIMER_DELIVER_MS")
    if deliver and deliver.isdigit():
        sp.delivery_timestamp.CopyFrom(_timestamp(int(deliver)))
    for name, attr in (("__SHARDINGKEY", "message_group"), ("TRACE_CONTEXT", "trace_context")):
        if props.get(name):
            setattr(sp, attr, props[name])
    immunity = props.get("CHECK_IMMUNITY_TIME_IN_SECONDS")
    if immunity and immunity.isdigit():
        sp.orphaned_transaction_recovery_duration.CopyFrom(Duration(seconds=int(immunity)))
    if "DLQ_ORIGIN_TOPIC" in props:
        sp.dead_letter_queue.CopyFrom(
            pb.DeadLetterQueue(
                topic=props["DLQ_ORIGIN_TOPIC"], message_id=props.get("DLQ_ORIGIN_MESSAGE_ID", "")
            )
        )
    user = {k: val for k, val in props.items() if k not in _SYSTEM_NAMES}
    return pb.Message(topic=pb.Resource(name=msg.topic), user_properties=user,
                      system_properties=sp, body=body)  # fmt: skip
