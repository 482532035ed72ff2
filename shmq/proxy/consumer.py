"""ReceiveMessage, AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue
(RocketMQ 5.3's ``ReceiveMessageActivity``, ``AckMessageActivity``,
``ChangeInvisibleDurationActivity``, ``ForwardMessageToDLQActivity`` and ``ConsumerProcessor``)
over the broker's POP: POP_MESSAGE on all the topic's queues (queue id -1), ACK_MESSAGE,
CHANGE_MESSAGE_INVISIBLETIME, and CONSUMER_SEND_MSG_BACK to the DLQ.

A popped message's receipt handle is the broker's ``extraInfo`` for it, rebuilt from the
POP response's header as RocketMQ's client rebuilds it, plus its CommitLog offset. Of the
popped messages, one whose tag the subscription does not take is acked at once, and one
delivered ``max_attempts`` times already goes to the DLQ, as RocketMQ's proxy filters them.

Every method blocks on the broker; the service runs them on its worker threads.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

from shmq.client.consumer.pop.messages import body_messages
from shmq.client.consumer.pop.receipt import PopHeader
from shmq.errors import FilterExpressionError, RemotingFrameError
from shmq.filter.sql92 import compile_sql
from shmq.message import MessageExt
from shmq.pop_receipt import InvalidReceiptError, Receipt, parse_receipt
from shmq.proxy.broker import BrokerClient
from shmq.proxy.messages import incoming
from shmq.proxy.proxy_config import MAX_MSG_NUMS_FOR_POP_REQUEST, ProxyConfig
from shmq.proxy.receipt_handle import EXPIRED, decode_handle, now_ms
from shmq.proxy.status import OK, Code, ProxyError, overall, remoting_code, status
from shmq.proxy.v2 import definition_pb2 as pb
from shmq.proxy.v2 import service_pb2 as spb
from shmq.proxy.validation import validate_group, validate_invisible_time, validate_topic
from shmq.remoting.codes import RequestCode
from shmq.remoting.codes import ResponseCode as Rc

log = logging.getLogger(__name__)

INIT_MODE_MAX = 1  # ConsumeInitMode.MAX
POP_TIMEOUT_MARGIN_S = 3.0  # a long poll's remoting timeout: its poll time and this


@dataclass
class Popped:
    """A POP's outcome for the stream: its status and the messages to deliver."""

    status: pb.Status
    messages: list[pb.Message] = field(default_factory=list)


def tags_of(expression: str) -> set[str] | None:
    """The tags a TAG expression takes (None: all, ``*`` or empty)."""
    tags = {t.strip() for t in expression.split("||")} - {""}
    return None if not tags or "*" in tags else tags


def _with_offset(msg: MessageExt) -> Receipt:
    """The message's receipt with its CommitLog offset (the proxy's ninth field)."""
    return replace(parse_receipt(msg.receipt_handle), commitlog_offset=msg.commit_log_offset)


def sql_expression(expression: str) -> str:
    """A subscription's SQL92 expression, checked here so that a bad one is
    ILLEGAL_FILTER_EXPRESSION with its position (the broker compiles it again, cached)."""
    try:
        compile_sql(expression)
    except FilterExpressionError as exc:
        raise ProxyError(Code.ILLEGAL_FILTER_EXPRESSION, str(exc)) from None
    return expression


class ConsumerActivity:
    """The consumer RPCs against one broker."""

    def __init__(self, broker: BrokerClient, cfg: ProxyConfig, broker_name: str) -> None:
        self.broker = broker
        self.cfg = cfg
        self.broker_name = broker_name

    # -- ReceiveMessage ---------------------------------------------------------------------

    def pop(self, request: spb.ReceiveMessageRequest, polling_ms: int, fifo: bool,
            max_attempts: int) -> Popped:  # fmt: skip
        """One POP for the request (already validated), filtered as RocketMQ's proxy does."""
        topic, group = request.message_queue.topic.name, request.group.name
        invisible_ms = (self.cfg.default_invisible_time_mills if request.auto_renew
                        else request.invisible_duration.ToMilliseconds())  # fmt: skip
        expression = request.filter_expression
        if expression.type == pb.SQL:  # the broker filters (with enablePropertyFilter)
            kind, exp, tags = "SQL92", sql_expression(expression.expression), None
        else:
            kind, exp = "TAG", expression.expression.strip() or "*"
            tags = tags_of(exp)
        fields = {
            "consumerGroup": group, "topic": topic, "queueId": -1,
            "maxMsgNums": max(1, min(request.batch_size, MAX_MSG_NUMS_FOR_POP_REQUEST)),
            "invisibleTime": invisible_ms, "pollTime": polling_ms, "bornTime": now_ms(),
            "initMode": INIT_MODE_MAX, "expType": kind, "exp": exp, "order": fifo,
        }  # fmt: skip
        if request.HasField("attempt_id"):
            fields["attemptId"] = request.attempt_id
        response = self.broker.invoke_pop(RequestCode.POP_MESSAGE, fields,
                                          polling_ms / 1000 + POP_TIMEOUT_MARGIN_S)  # fmt: skip
        if response.code == Rc.POLLING_FULL:
            return Popped(status(Code.TOO_MANY_REQUESTS, "polling full"))
        if response.code in (Rc.NO_MESSAGE, Rc.POLLING_TIMEOUT, Rc.PULL_NOT_FOUND):
            return Popped(status(Code.MESSAGE_NOT_FOUND, "no new message"))
        if response.code != Rc.SUCCESS:
            raise ProxyError(remoting_code(response.code), response.remark or "pop failed")
        found = self._handles(response, topic)
        if not found:
            return Popped(status(Code.MESSAGE_NOT_FOUND, "no new message"))
        delivered = []
        for msg, handle in found:
            if tags is not None and msg.tags not in tags:
                self._quietly(self.ack_one, group, topic, handle)
            elif msg.reconsume_times >= max_attempts:
                self._quietly(self.to_dlq, group, topic, handle, msg.msg_id, max_attempts)
            else:
                delivered.append(incoming(msg, handle.encode()))
        if not delivered:
            return Popped(status(Code.MESSAGE_NOT_FOUND, "no match message"))
        return Popped(OK, delivered)

    def _handles(self, response, topic: str) -> list[tuple[MessageExt, Receipt]]:
        """The popped messages, each with its receipt handle: the client's rebuild of
        ``POP_CK`` from the header (``shmq.client.consumer``'s, as any POP client's) and the
        message's CommitLog offset, as RocketMQ's proxy adds it."""
        try:
            header = PopHeader.parse(response.ext_fields)
            messages = body_messages(bytes(response.body or b""), header, self.broker_name, topic)
            return [
                (
                    msg,
                    replace(
                        parse_receipt(msg.receipt_handle), commitlog_offset=msg.commit_log_offset
                    ),
                )
                for msg in messages
            ]
        except (InvalidReceiptError, RemotingFrameError) as exc:
            raise ProxyError(
                Code.INTERNAL_SERVER_ERROR, f"the broker's POP response does not decode: {exc}"
            ) from None

    @staticmethod
    def _quietly(action, *args) -> None:
        """A filter's ack or DLQ forward: a failure leaves the message to come back."""
        try:
            action(*args)
        except ProxyError as exc:
            log.warning("%s of a filtered message failed: %s", action.__name__, exc.message)

    def nack(self, request: spb.ReceiveMessageRequest, messages: list[pb.Message],
             invisible_ms: int) -> None:  # fmt: skip
        """Messages popped but not delivered (their stream's reader stalled): visible again
        after ``invisible_ms``; a failure leaves them to their own invisible time."""
        topic, group = request.message_queue.topic.name, request.group.name
        for message in messages:
            try:
                handle = decode_handle(message.system_properties.receipt_handle)
                self._change_invisible_time(group, topic, handle, invisible_ms)
            except ProxyError as exc:
                log.info("a message its reader did not take stays invisible: %s", exc.message)

    # -- AckMessage -------------------------------------------------------------------------

    def ack(self, request: spb.AckMessageRequest) -> spb.AckMessageResponse:
        validate_topic(request.topic.name)
        validate_group(request.group.name)
        entries = []
        for entry in request.entries:
            try:
                handle = decode_handle(entry.receipt_handle)
                if handle.is_expired(now_ms()):
                    raise ProxyError(Code.INVALID_RECEIPT_HANDLE, EXPIRED)
                self.ack_one(request.group.name, request.topic.name, handle)
                entry_status = OK
            except ProxyError as exc:
                entry_status = exc.status()
            entries.append(spb.AckMessageResultEntry(message_id=entry.message_id,
                                                     receipt_handle=entry.receipt_handle,
                                                     status=entry_status))  # fmt: skip
        return spb.AckMessageResponse(
            status=overall([e.status.code for e in entries], "ack message result is empty"),
            entries=entries,
        )

    def ack_one(self, group: str, topic: str, handle: Receipt) -> None:
        response = self.broker.invoke(RequestCode.ACK_MESSAGE, {
            "consumerGroup": group, "topic": handle.real_topic(topic, group),
            "queueId": handle.queue_id, "extraInfo": handle.extra_info,
            "offset": handle.queue_offset,
        })  # fmt: skip
        if response.code != Rc.SUCCESS:
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, "ack failed: status is abnormal")

    # -- ChangeInvisibleDuration ------------------------------------------------------------

    def change_invisible_duration(
        self, request: spb.ChangeInvisibleDurationRequest
    ) -> spb.ChangeInvisibleDurationResponse:
        topic, group = request.topic.name, request.group.name
        validate_topic(topic)
        validate_group(group)
        invisible_ms = request.invisible_duration.ToMilliseconds()
        validate_invisible_time(invisible_ms, 0, self.cfg.max_invisible_time_mills)
        handle = decode_handle(request.receipt_handle)
        if handle.is_expired(now_ms()):
            raise ProxyError(Code.INVALID_RECEIPT_HANDLE, EXPIRED)
        response = self._change_invisible_time(group, topic, handle, invisible_ms)
        fields = response.ext_fields
        if response.code != Rc.SUCCESS or "popTime" not in fields:
            return spb.ChangeInvisibleDurationResponse(
                status=status(
                    Code.INTERNAL_SERVER_ERROR, "changeInvisibleDuration failed: status is abnormal"
                )
            )
        renewed = replace(
            handle.changed(int(fields["popTime"]), int(fields["invisibleTime"])),
            revive_qid=int(fields["reviveQid"]),
        )
        return spb.ChangeInvisibleDurationResponse(status=OK, receipt_handle=renewed.encode())

    def _change_invisible_time(self, group: str, topic: str, handle: Receipt,
                               invisible_ms: int):  # fmt: skip
        return self.broker.invoke(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, {
            "consumerGroup": group, "topic": handle.real_topic(topic, group),
            "queueId": handle.queue_id, "extraInfo": handle.extra_info,
            "offset": handle.queue_offset,
            "invisibleTime": invisible_ms,
        })  # fmt: skip

    # -- ForwardMessageToDeadLetterQueue ----------------------------------------------------

    def forward_to_dlq(
        self, request: spb.ForwardMessageToDeadLetterQueueRequest
    ) -> spb.ForwardMessageToDeadLetterQueueResponse:
        topic, group = request.topic.name, request.group.name
        validate_topic(topic)
        validate_group(group)
        handle = decode_handle(request.receipt_handle)
        self.to_dlq(group, topic, handle, request.message_id, request.max_delivery_attempts)
        return spb.ForwardMessageToDeadLetterQueueResponse(status=OK)

    def to_dlq(self, group: str, topic: str, handle: Receipt, message_id: str,
               max_attempts: int) -> None:  # fmt: skip
        """CONSUMER_SEND_MSG_BACK with delay level -1 (straight to ``%DLQ%<group>``), then
        the ack of the original."""
        if handle.commitlog_offset < 0:
            raise ProxyError(Code.INVALID_RECEIPT_HANDLE, "commit log offset is empty")
        response = self.broker.invoke(RequestCode.CONSUMER_SEND_MSG_BACK, {
            "offset": handle.commitlog_offset, "group": group, "delayLevel": -1,
            "originMsgId": message_id, "originTopic": handle.real_topic(topic, group),
            "unitMode": False, "maxReconsumeTimes": max_attempts,
        })  # fmt: skip
        if response.code != Rc.SUCCESS:
            raise ProxyError(remoting_code(response.code), response.remark or "send back failed")
        self.ack_one(group, topic, handle)
