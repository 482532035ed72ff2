"""The producer's trace hooks (RocketMQ's ``SendMessageTraceHookImpl`` and
``EndTransactionTraceHookImpl``): a Pub context per message a send stored, an
EndTransaction context per transaction a ``TransactionProducer`` ended.

``install`` puts traced versions of the producer's send methods on the instance, so a
producer without trace runs its class's methods untouched: tracing costs nothing unless on.
As in RocketMQ, a send that raised (no ``SendResult``) and a oneway send are not traced,
nor a send to the trace topic itself; a Pub's timeStamp is when the send began and its
costTime how long it took (a batch's divided among its messages).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from shmq.client.trace.dispatcher import AsyncTraceDispatcher
from shmq.client.trace.encoder import (
    DEFAULT_REGION,
    NULL,
    MessageType,
    TraceBean,
    TraceContext,
    TraceType,
    pub_record,
)
from shmq.client.types import SendResult, SendStatus
from shmq.errors import ShmqError
from shmq.message import Message, parse_offset_msg_id


def keys_text(keys: Sequence[str]) -> str:
    """A message's keys as RocketMQ's ``getKeys`` (space separated; null when none)."""
    return " ".join(keys) if keys else NULL


_HOSTS: dict[str, str] = {}  # the store-host part of offset msg ids, decoded (few brokers)
_MAX_HOSTS = 1024


def store_host_of(offset_msg_id: str) -> str:
    """The address of the broker that stored a message, from its offset message id (its
    store host, then the CommitLog offset in 16 hex digits)."""
    host = _HOSTS.get(offset_msg_id[:-16])
    if host is None:
        try:
            host = parse_offset_msg_id(offset_msg_id)[0]
        except ShmqError:
            return NULL
        if len(_HOSTS) < _MAX_HOSTS:
            _HOSTS[offset_msg_id[:-16]] = host
    return host


def _msg_type(msg: Message) -> MessageType:
    return MessageType.Delay_Msg if msg.delay_level or msg.deliver_time_ms else \
        MessageType.Normal_Msg  # fmt: skip


class SendMessageTraceHook:
    """Traces a producer of ``group`` to ``dispatcher``."""

    def __init__(self, group: str, dispatcher: AsyncTraceDispatcher) -> None:
        self.group = group
        self.dispatcher = dispatcher
        self.trace_topic = dispatcher.trace_topic

    def install(self, producer: Any) -> None:
        """Trace ``producer``'s sync, async and batch sends, and its transactions when it
        is a ``TransactionProducer``."""
        producer.send = self._traced_send(producer.send)
        producer.send_async = self._traced_send_async(producer.send_async)
        producer.send_batch = self._traced_send_batch(producer.send_batch)
        if hasattr(producer, "send_message_in_transaction"):
            producer.send_message_in_transaction = self._traced_transaction(
                producer.send_message_in_transaction
            )

    def shutdown(self) -> None:
        self.dispatcher.shutdown()

    # -- the wrappers ---------------------------------------------------------------------------

    def _traced_send(self, send: Callable[..., SendResult]) -> Callable[..., SendResult]:
        @functools.wraps(send)
        def traced(msg: Message, **options: Any) -> SendResult:
            started = time.time()
            result = send(msg, **options)
            self.pub(msg, result, started)
            return result

        return traced

    def _traced_send_async(self, send_async: Callable[..., Future]) -> Callable[..., Future]:
        @functools.wraps(send_async)
        def traced(msg: Message, callback: Any = None, **options: Any) -> Future:
            started = time.time()
            future = send_async(msg, callback, **options)
            future.add_done_callback(lambda f: self._settled(msg, f, started))
            return future

        return traced

    def _traced_send_batch(self, send_batch: Callable[..., list]) -> Callable[..., list]:
        @functools.wraps(send_batch)
        def traced(messages: Sequence[Message], **options: Any) -> list[SendResult]:
            started = time.time()
            results = send_batch(messages, **options)
            share = len(results) or 1
            for msg, result in zip(messages, results, strict=False):
                self.pub(msg, result, started, share=share)
            return results

        return traced

    def _traced_transaction(self, send: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(send)
        def traced(msg: Message, arg: Any = None) -> Any:
            started = time.time()
            result = send(msg, arg)
            self.pub(msg, result, started, MessageType.Trans_Msg_Half)
            self.end_transaction(msg, result.msg_id, store_host_of(result.offset_msg_id),
                                 result.local_transaction_state.value, False)  # fmt: skip
            return result

        return traced

    # -- the contexts ---------------------------------------------------------------------------

    def _settled(self, msg: Message, future: Future, started: float) -> None:
        if future.exception() is None:
            self.pub(msg, future.result(), started)

    def pub(
        self,
        msg: Message,
        result: SendResult,
        started: float,
        msg_type: MessageType | None = None,
        share: int = 1,
    ) -> None:
        """Queue the Pub of ``msg``, sent at ``started`` (epoch seconds) with ``result``."""
        if msg.topic != self.trace_topic and isinstance(msg, Message):
            cost = int((time.time() - started) * 1000) // share
            self.dispatcher.append(_Pub(self.group, msg, result, started, cost, msg_type))

    def end_transaction(
        self, msg: Any, msg_id: str, store_host: str, state: str, from_check: bool
    ) -> None:
        """An EndTransaction context: ``msg`` (a ``Message``, or the half message a
        check-back carries) ended with ``state`` (a ``LocalTransactionState`` name)."""
        bean = TraceBean(
            msg_id=msg_id,
            topic=msg.topic,
            tags=msg.tags or NULL,
            keys=keys_text(msg.keys),
            store_host=store_host,
            msg_type=MessageType.Trans_msg_Commit,
            transaction_id=msg_id,
            transaction_state=state,
            from_transaction_check=from_check,
        )
        self.dispatcher.append(TraceContext(TraceType.EndTransaction, self.group, [bean]))


class _Pub:
    """A stored message's Pub context, encoded in the dispatcher's thread: a producer traces
    every message, so its sending and completion threads only queue this."""

    __slots__ = ("cost", "group", "msg", "msg_type", "result", "started")

    def __init__(
        self,
        group: str,
        msg: Message,
        result: SendResult,
        started: float,
        cost: int,
        msg_type: MessageType | None,
    ) -> None:
        self.group = group
        self.msg = msg
        self.result = result
        self.started = started
        self.cost = cost
        self.msg_type = msg_type

    def transfer(self) -> tuple[str, set[str]]:
        msg, result = self.msg, self.result
        offset_msg_id = result.offset_msg_id
        msg_type = _msg_type(msg) if self.msg_type is None else self.msg_type
        data = pub_record(int(self.started * 1000), DEFAULT_REGION, self.group, msg.topic,
                          result.msg_id, msg.tags or NULL, keys_text(msg.keys),
                          store_host_of(offset_msg_id), len(msg.body), self.cost, msg_type,
                          offset_msg_id, result.send_status is SendStatus.SEND_OK)  # fmt: skip
        return data, {result.msg_id, *msg.keys}
