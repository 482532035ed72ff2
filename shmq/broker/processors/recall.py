"""RECALL_MESSAGE(370): a producer takes back a timer message before its delivery time
(RocketMQ 5.3's ``RecallMessageProcessor``).

The request names the topic and the recall handle its send was answered with
(``shmq.recall_handle``). The broker checks what RocketMQ's checks, in its order and with its
codes and remarks: recalls enabled (``recallMessageEnable``, off by default: NO_PERMISSION),
a master (SLAVE_NOT_AVAILABLE), writable unless ``allowRecallWhenBrokerNotWriteable``
(SERVICE_NOT_AVAILABLE), the topic exists (TOPIC_NOT_EXIST); the handle decodes, names the
request's topic and this broker, and its time is still ahead but within ``timerMaxDelaySec``
(ILLEGAL_OPERATION). It does not look the message up, as RocketMQ does not: a handle's time
that has passed is what says the message was delivered.

It then stores a delete marker (``delay_topics.timer_delete_properties``) in the timer topic
through a ring of the broker's own (``ring_puts``), for the message's own time
(``TIMER_OUT_MS``, the handle's timestamp minus RocketMQ's "consider of floor" one: shmq's
timers are not floored, so that is the message's time and slot exactly). The schedule agent
puts it on the wheel, and the slot drops the message when its time comes
(``broker.schedule.timers``). The response names the recalled message's unique key
(``msgId``); every response carries ``MSG_REGION``, as RocketMQ's.
"""

from __future__ import annotations

import re
import threading
import time
import zlib
from collections.abc import Mapping
from typing import ClassVar

from shmq.broker.context import BrokerContext
from shmq.broker.processors.processor import Processor
from shmq.broker.ring_puts import broker_ring, put_records
from shmq.codec import record as rec
from shmq.codec.record_pack import record_struct, tail
from shmq.config import parse_host
from shmq.delay_topics import TIMER_TOPIC, timer_delete_properties
from shmq.ipc import ring
from shmq.message import pack_host
from shmq.recall_handle import InvalidRecallHandleError, RecallHandle
from shmq.remoting.custom_header import STR, Spec, decode_header
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode, ResponseError
from shmq.remoting.server import Connection

Rc = ResponseCode

RECALL_MESSAGE_TAG = "_RECALL_TAG_"  # RocketMQ's tag of a delete marker
MARKER_BODY = b"0"  # RocketMQ's body of a delete marker
REGION_FIELDS = {"MSG_REGION": "DefaultRegion"}  # RocketMQ's regionId default
UNAVAILABLE = "recall failed, broker service not available"
_LONG = re.compile(r"[+-]?[0-9]+")
# RecallMessageRequestHeader
RECALL_HEADER: Spec = {
    "producerGroup": (STR, False),
    "topic": (STR, True),
    "recallHandle": (STR, True),
}


class RecallMessageProcessor(Processor):
    """Checks a recall and appends its delete marker (through a ring of the broker's own)."""

    CODES: ClassVar[Mapping[int, str]] = {RequestCode.RECALL_MESSAGE: "recall_message"}

    def __init__(self, ctx: BrokerContext) -> None:
        super().__init__(ctx)
        self.ring = broker_ring(ctx, "shmq-recall")
        self.lock = threading.Lock()  # one appender per ring
        self.store_host = pack_host(*parse_host(ctx.config.store.store_host))

    def close(self) -> None:
        self.ring.close()

    def recall_message(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        try:
            header = decode_header(request, RECALL_HEADER)
            handle, timestamp = self._checked(header["topic"], header["recallHandle"])
            self._append(handle, timestamp - 1, header["producerGroup"], conn)
        except ResponseError as exc:
            return RemotingCommand.response_to(request, exc.code, exc.remark, REGION_FIELDS)
        fields = {**REGION_FIELDS, "msgId": handle.message_id}
        return RemotingCommand.response_to(request, Rc.SUCCESS, None, fields)

    def _checked(self, topic: str, recall_handle: str) -> tuple[RecallHandle, int]:
        """The handle and its timestamp, once the broker and the handle pass RocketMQ's
        checks."""
        cfg = self.ctx.config
        if not cfg.recall_message_enable:
            raise ResponseError(Rc.NO_PERMISSION, "recall failed, operation is forbidden")
        if cfg.broker_role == "SLAVE":
            raise ResponseError(Rc.SLAVE_NOT_AVAILABLE, UNAVAILABLE)
        if not cfg.broker_permission & 2 and not cfg.allow_recall_when_broker_not_writeable:
            raise ResponseError(Rc.SERVICE_NOT_AVAILABLE, UNAVAILABLE)
        if self.ctx.topics.get(topic) is None:
            raise ResponseError(Rc.TOPIC_NOT_EXIST, f"recall failed, the topic[{topic}] not exist")
        try:
            handle = RecallHandle.decode(recall_handle)
        except InvalidRecallHandleError as exc:
            raise ResponseError(Rc.ILLEGAL_OPERATION, str(exc)) from None
        if handle.topic != topic:
            raise ResponseError(Rc.ILLEGAL_OPERATION, "recall failed, topic not match")
        if handle.broker_name != cfg.broker_name:
            raise ResponseError(Rc.ILLEGAL_OPERATION, UNAVAILABLE)
        timestamp = _to_long(handle.timestamp)
        time_left = timestamp - time.time_ns() // 1_000_000
        if not 0 < time_left < cfg.store.timer_max_delay_sec * 1000:
            raise ResponseError(Rc.ILLEGAL_OPERATION, "recall failed, timestamp invalid")
        return handle, timestamp

    def _append(
        self, handle: RecallHandle, deliver_ms: int, group: str | None, conn: Connection
    ) -> None:
        """Store the delete marker for ``deliver_ms``; a refusal of the writer is
        RocketMQ's SYSTEM_ERROR."""
        now_ms = time.time_ns() // 1_000_000
        host, _, port = conn.peer.rpartition(":")
        props = timer_delete_properties(handle.topic, handle.message_id, deliver_ms)
        props += f"TAGS\x01{RECALL_MESSAGE_TAG}\x02BORN_TIMESTAMP\x01{now_ms}\x02".encode()
        if group:
            props += f"PGROUP\x01{group}\x02".encode()
        record = _record(props, now_ms, pack_host(host, int(port)), self.store_host)
        (answer,) = put_records(self.ring, self.lock, [record], "recall")
        if answer.status == ring.REJECTED:
            raise ResponseError(Rc.SYSTEM_ERROR, "recall failed, execute error")


def _record(props: bytes, now_ms: int, born_host: int, store_host: int) -> bytes:
    """A delete marker's record: the timer topic's queue 0, RocketMQ's body."""
    tail_bytes, magic = tail(TIMER_TOPIC.encode(), props)
    size = rec.HEADER_BODY_START + len(MARKER_BODY) + len(tail_bytes)
    out = bytearray(size)
    crc = zlib.crc32(MARKER_BODY) & 0x7FFFFFFF
    record_struct(len(MARKER_BODY), len(tail_bytes)).pack_into(
        out, 0, size, magic, crc, 0, 0, 0, 0, 0, now_ms, born_host, 0, store_host, 0, 0,
        len(MARKER_BODY), MARKER_BODY, tail_bytes,
    )  # fmt: skip
    return bytes(out)


def _to_long(text: str) -> int:
    """Apache Commons' ``NumberUtils.toLong(text, -1)``: what Java's ``Long.parseLong``
    takes (ASCII digits here), else -1."""
    if not _LONG.fullmatch(text):
        return -1
    value = int(text)
    return value if -(1 << 63) <= value < 1 << 63 else -1
