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
from shmq.client.trace.dispatcher import AsyncTraceDispatcher
from shmq.client.trace.encoder import (
    CONTENT_SPLITOR,
    DEFAULT_REGION,
    NULL,
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


class _PubHeads(dict):
    """A Pub's regionId, groupName and topic fields as one text per topic, made once."""

    def __init__(self, group: str) -> None:
        super().__init__()
        self.group = group

    def __missing__(self, topic: str) -> str:
        head = CONTENT_SPLITOR.join((DEFAULT_REGION, self.group, topic))
        if len(self) < _MAX_TOPICS:
            self[topic] = head
        return head


_MAX_TOPICS = 4096  # topics whose head is kept (the broker's maxTopics)
_DELAY = int(MessageType.Delay_Msg)


class PubFuture(SendFuture):
    """The future of a traced send: settled with a result, it notes when and puts itself on
    its hook's ``facts`` (the dispatcher formats its Pub from it), so a traced message costs
    its sender no callback, no object beyond its future and no text. It keeps the message's
    fields a Pub needs, not the message: a message (with its keys list and properties dict)
    kept alive until its Pub is formatted survives into the older garbage collector
    generations, and their collections then cost more than the formatting (measured in
    ``bench/trace_bench.py``'s producer: 3.4 µs of collection per traced message with the
    message kept, 1.0–1.5 µs without, 0.7–0.9 µs untraced). A batch's messages ``share``
    its time (costTime)."""

    share = 1
    settled = 0.0

    def __init__(self, facts: collections.deque, msg: Message, msg_type: int | None) -> None:
        SendFuture.__init__(self)
        self.facts = facts
        self.topic = msg.topic
        self.tags = msg.tags
        self.keys = msg.keys or None
        self.size = len(msg.body)
        self.msg_type = (_DELAY if msg._delay_level or msg._deliver_ms else 0) \
            if msg_type is None else int(msg_type)  # fmt: skip
        self.started = time.monotonic()

    def settle(self, result: Any = None, exc: BaseException | None = None) -> bool:
        if not SendFuture.settle(self, result, exc):
            return False
        if exc is None:
            self.settled = time.monotonic()
            self.facts.append(self)
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
        self.wake_at = dispatcher.wake_at
        self._heads = _PubHeads(group)
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

    def future(self, msg: Message, msg_type: int | None = None) -> SendFuture:
        """The future of a send of ``msg`` that begins now: a ``PubFuture`` unless the
        message goes to the trace topic or the dispatcher's queue is full."""
        waiting = len(self.facts)
        if (
            not isinstance(msg, Message)
            or msg.topic == self.trace_topic
            or (waiting >= self.wake_at and not self.dispatcher.admit(waiting))
        ):
            return SendFuture()
        return PubFuture(self.facts, msg, msg_type)

    def pub_records(self, facts: collections.deque, n: int) -> tuple[list[str], list[str]]:
        """The Pub records of the first ``n`` settled ``PubFuture``s on ``facts``, taken off
        it, and each one's trace message keys (its msg id and user keys, space separated as
        in the KEYS property: text, not a tuple, so no container per record adds to the
        garbage collector's work). One f-string per record over fields read once: the
        region, group and topic are one text per topic, the offset msg id the store host's
        head and the offset in hex (``PUB_FORMAT``'s text, byte for byte). Tags and keys go
        in as they are: the producer refused to send a message whose tags or keys hold a
        separator (``properties``), unlike the user text of a context
        (``encoder.pub_record``)."""
        epoch_ms = (time.time() - time.monotonic()) * 1000
        heads = self._heads
        ok = SendStatus.SEND_OK
        take = facts.popleft
        records: list[str] = []
        keys: list[str] = []
        add_record, add_keys = records.append, keys.append
        for _ in range(n):
            future = take()
            result = future._result
            offset_msg_id = result._offset_msg_id  # None until read: made from what it holds
            if offset_msg_id is None:
                head, store_host = _STORE_HOST[result._store_host]
                offset_msg_id = f"{head}{result._physical_offset:016X}"
            else:
                store_host = _HOST_ADDRESS[offset_msg_id[:-16]]
            msg_id = result.msg_id
            user_keys = future.keys
            started = future.started
            if user_keys:
                user_keys = " ".join(user_keys)
                add_keys(f"{msg_id} {user_keys}")
            else:
                user_keys = NULL
                add_keys(msg_id)
            add_record(
                f"Pub\x01{int(started * 1000 + epoch_ms)}\x01{heads[future.topic]}\x01{msg_id}"
                f"\x01{future.tags or NULL}\x01{user_keys}\x01{store_host}\x01{future.size}"
                f"\x01{int((future.settled - started) * 1000) // future.share}"
                f"\x01{future.msg_type}\x01{offset_msg_id}"
                f"\x01{'true' if result.send_status is ok else 'false'}\x02"
            )
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
