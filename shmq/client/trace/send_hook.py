"""The producer's trace hooks (RocketMQ's ``SendMessageTraceHookImpl`` and
``EndTransactionTraceHookImpl``): a Pub context per message a send stored, an
EndTransaction context per transaction a ``TransactionProducer`` ended.

``install`` puts traced versions of the producer's sync send methods on the instance, and
a traced producer's ``send_async`` asks ``future`` for its futures, so a producer without
trace runs its class's methods untouched: tracing costs nothing unless on. A traced message
costs its sender a ``PubFuture`` in place of a plain one and nothing else: its Pub record is
formatted in the dispatcher's thread, a run of them at a time, from what the future and its
``SendResult`` hold.
As in RocketMQ, a send that raised (no ``SendResult``) and a oneway send are not traced,
nor a send to the trace topic itself; a Pub's timeStamp is when the send began and its
costTime how long it took (a batch's divided among its messages).
"""

from __future__ import annotations

import collections
import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

from shmq.client.producer.async_completion import SendFuture
from shmq.client.trace.dispatcher import FACT_WIDTH, AsyncTraceDispatcher
from shmq.client.trace.encoder import (
    DEFAULT_REGION,
    NULL,
    PUB_FORMAT,
    MessageType,
    TraceBean,
    TraceContext,
    TraceType,
)
from shmq.client.types import SendResult, SendStatus
from shmq.errors import ShmqError
from shmq.message import Message, parse_offset_msg_id


def keys_text(keys: Sequence[str]) -> str:
    """A message's keys as RocketMQ's ``getKeys`` (space separated; null when none)."""
    return " ".join(keys) if keys else NULL


_MAX_HOSTS = 1024  # hosts remembered: a producer answers from few brokers


class _HostAddress(dict):
    """The store host (``ip:port``) of an offset message id's head, decoded once per host."""

    def __missing__(self, head: str) -> str:
        try:
            address = parse_offset_msg_id(head + "0" * 16)[0]
        except ShmqError:
            return NULL
        if len(self) < _MAX_HOSTS:
            self[head] = address
        return address


_HOST_ADDRESS = _HostAddress()


class _StoreHost(dict):
    """A store host's address bytes (what a broker's answer carries) as the head of an
    offset message id (upper-case hex) and as ``ip:port``, made once per host."""

    def __missing__(self, host: bytes) -> tuple[str, str]:
        head = host.hex().upper()
        known = (head, _HOST_ADDRESS[head])
        if len(self) < _MAX_HOSTS:
            self[host] = known
        return known


_STORE_HOST = _StoreHost()


def store_host_of(offset_msg_id: str) -> str:
    """The address of the broker that stored a message, from its offset message id (its
    store host, then the CommitLog offset in 16 hex digits)."""
    return _HOST_ADDRESS[offset_msg_id[:-16]]


class PubFuture(SendFuture):
    """The future of a traced send: settled with a result, it puts itself and the time on
    its hook's ``facts`` (the dispatcher formats its Pub from it), so a traced message costs
    its sender no callback, no object beyond its future and no text. A batch's messages
    ``share`` its time (costTime)."""

    share = 1

    def __init__(
        self, facts: collections.deque, msg: Message, msg_type: MessageType | None = None
    ) -> None:
        SendFuture.__init__(self)
        self.facts = facts
        self.msg = msg
        self.msg_type = msg_type
        self.started = time.monotonic()

    def settle(self, result: Any = None, exc: BaseException | None = None) -> bool:
        if not SendFuture.settle(self, result, exc):
            return False
        if exc is None:
            self.facts.extend((self, time.monotonic()))
        return True


class SendMessageTraceHook:
    """Traces a producer of ``group`` to ``dispatcher``.

    Each traced send has a ``PubFuture`` (``future``: the producer's ``send_async`` asks
    for one; the sync wrappers settle one themselves), which the dispatcher's thread turns
    into a Pub record a run at a time (``pub_records``)."""

    def __init__(self, group: str, dispatcher: AsyncTraceDispatcher) -> None:
        self.group = group
        self.dispatcher = dispatcher
        self.trace_topic = dispatcher.trace_topic
        self.facts = dispatcher.facts
        self.wake_at = dispatcher.wake_at * FACT_WIDTH
        dispatcher.encode_facts = self.pub_records

    def install(self, producer: Any) -> None:
        """Trace ``producer``'s sync and batch sends, and its transactions when it is a
        ``TransactionProducer`` (its ``send_async`` asks ``future`` for its futures)."""
        producer.send = self._traced_send(producer.send)
        producer.send_batch = self._traced_send_batch(producer.send_batch)
        if hasattr(producer, "send_message_in_transaction"):
            producer.send_message_in_transaction = self._traced_transaction(
                producer.send_message_in_transaction
            )

    def shutdown(self) -> None:
        self.dispatcher.shutdown()

    # -- the facts ------------------------------------------------------------------------------

    def future(self, msg: Message, msg_type: MessageType | None = None) -> SendFuture:
        """The future of a send of ``msg`` that begins now: a ``PubFuture`` unless the
        message goes to the trace topic or the dispatcher's queue is full."""
        waiting = len(self.facts)
        if (
            not isinstance(msg, Message)
            or msg.topic == self.trace_topic
            or (waiting >= self.wake_at and not self.dispatcher.admit(waiting // FACT_WIDTH))
        ):
            return SendFuture()
        return PubFuture(self.facts, msg, msg_type)

    def pub_records(
        self, facts: collections.deque, n: int
    ) -> tuple[list[str], list[tuple[str, ...]]]:
        """The Pub records of the first ``n`` settled ``PubFuture``s on ``facts`` (each
        followed by when it settled), taken off it, and each one's trace message keys (its
        msg id and user keys). Tags and keys go in as they are: the producer refused to send
        a message whose tags or keys hold a separator (``properties``), unlike the user text
        of a context (``encoder.pub_record``)."""
        epoch_ms = (time.time() - time.monotonic()) * 1000
        group, ok, region, delay = self.group, SendStatus.SEND_OK, DEFAULT_REGION, \
            MessageType.Delay_Msg  # fmt: skip
        take = facts.popleft
        records = []
        keys = []
        for _ in range(n):
            future = take()
            settled = take()
            msg, started, msg_type, result = future.msg, future.started, future.msg_type, \
                future._result  # fmt: skip
            offset_msg_id = result._offset_msg_id  # None until read: made from what it holds
            if offset_msg_id is None:
                head, store_host = _STORE_HOST[result._store_host]
                offset_msg_id = f"{head}{result._physical_offset:016X}"
            else:
                store_host = _HOST_ADDRESS[offset_msg_id[:-16]]
            if msg_type is None:
                msg_type = delay if msg.delay_level or msg.deliver_time_ms else 0
            user_keys = msg.keys
            records.append(PUB_FORMAT % (
                int(started * 1000 + epoch_ms), region, group, msg.topic, result.msg_id,
                msg.tags or NULL, " ".join(user_keys) if user_keys else NULL,
                store_host, len(msg.body),
                int((settled - started) * 1000) // future.share, msg_type, offset_msg_id,
                "true" if result.send_status is ok else "false",
            ))  # fmt: skip
            keys.append((result.msg_id, *user_keys) if user_keys else (result.msg_id,))
        return records, keys

    # -- the wrappers ---------------------------------------------------------------------------

    def _traced_send(self, send: Callable[..., SendResult]) -> Callable[..., SendResult]:
        @functools.wraps(send)
        def traced(msg: Message, **options: Any) -> SendResult:
            future = self.future(msg)
            result = send(msg, **options)
            future.settle(result)
            return result

        return traced

    def _traced_send_batch(self, send_batch: Callable[..., list]) -> Callable[..., list]:
        @functools.wraps(send_batch)
        def traced(messages: Sequence[Message], **options: Any) -> list[SendResult]:
            futures = [self.future(msg) for msg in messages]
            results = send_batch(messages, **options)
            for future, result in zip(futures, results, strict=False):
                if isinstance(future, PubFuture):  # its messages share the batch's time
                    future.share = len(results)
                future.settle(result)
            return results

        return traced

    def _traced_transaction(self, send: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(send)
        def traced(msg: Message, arg: Any = None) -> Any:
            future = self.future(msg, MessageType.Trans_Msg_Half)
            result = send(msg, arg)
            future.settle(result)
            self.end_transaction(msg, result.msg_id, store_host_of(result.offset_msg_id),
                                 result.local_transaction_state.value, False)  # fmt: skip
            return result

        return traced

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
