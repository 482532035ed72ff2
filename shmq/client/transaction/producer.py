"""The transaction producer (RocketMQ's ``TransactionMQProducer``): a message sent only if a
local transaction commits.

``send_message_in_transaction(msg, arg)`` sends ``msg`` as a half message (sync, stored in
the broker's half topic, invisible to consumers), then runs the listener's
``execute_local_transaction(msg, arg)`` and tells the broker that stored the half its
outcome with a oneway ``END_TRANSACTION``: COMMIT delivers the message, ROLLBACK drops it,
UNKNOW (or an exception, or a lost request) leaves it to the broker, which asks a live
producer of the group (``check_local_transaction``) after ``transactionTimeOut``.

Check-backs arrive on the group's connections to the brokers (``producer_presence``) and
are answered one at a time by a thread of the producer, at most
``check_request_hold_max`` queued (more are dropped: the broker asks again).

Example::

    class Payments:
        def execute_local_transaction(self, msg, arg):
            db.pay(arg)
            return shmq.LocalTransactionState.COMMIT_MESSAGE

        def check_local_transaction(self, msg):
            paid = db.paid(msg.properties["order"])
            return shmq.LocalTransactionState.COMMIT_MESSAGE if paid else (
                shmq.LocalTransactionState.ROLLBACK_MESSAGE)

    with shmq.TransactionProducer("PayProducers", namesrv, listener=Payments()) as producer:
        result = producer.send_message_in_transaction(
            shmq.Message("Payments", b"order 42 paid", properties={"order": "42"}), arg=42)
        print(result.local_transaction_state, result.transaction_id)
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from shmq import half_messages as hm
from shmq.client.producer.checks import check_bulk_sizes, check_topic
from shmq.client.producer.producer import Producer
from shmq.client.producer.records import RecordBatch, half_record
from shmq.client.route import BrokerQueues
from shmq.client.transaction.end_frames import EndFrames
from shmq.client.transaction.types import (
    LocalTransactionState,
    TransactionListener,
    TransactionSendResult,
)
from shmq.client.types import BulkSendResult, MessageQueue, SendResult, SendStatus
from shmq.codec.record_message import record_message
from shmq.errors import ConfigError, InvalidMessageError, RemotingError
from shmq.message import Message, body_arrays, parse_offset_msg_id
from shmq.properties import build_properties
from shmq.remoting.protocol import RemotingCommand, RequestCode

__all__ = ["TransactionProducer"]

log = logging.getLogger(__name__)

_HALF_RAW = hm.HALF_TOPIC.encode()

_KIND = {
    LocalTransactionState.COMMIT_MESSAGE: hm.TRANSACTION_COMMIT_TYPE,
    LocalTransactionState.ROLLBACK_MESSAGE: hm.TRANSACTION_ROLLBACK_TYPE,
    LocalTransactionState.UNKNOW: hm.TRANSACTION_NOT_TYPE,
}


class TransactionProducer(Producer):
    """A ``Producer`` (every send of it works as usual) that also sends messages in
    transactions; see the module. ``listener`` implements ``TransactionListener``.

    Options besides the ``Producer``'s: ``heartbeat_interval`` (seconds between the group's
    heartbeats to every broker, RocketMQ's ``heartbeatBrokerInterval``, 30 s) and
    ``check_request_hold_max`` (check-backs queued at most, 2000).

    Example::

        producer = TransactionProducer("PayProducers", "127.0.0.1:9876", listener=Payments())
        result = producer.send_message_in_transaction(Message("Payments", b"paid"), arg=42)
        print(result.local_transaction_state)  # COMMIT_MESSAGE: consumers get it once
        producer.close()
    """

    def __init__(
        self,
        group: str,
        namesrv: str = "127.0.0.1:9876",
        *,
        listener: TransactionListener,
        heartbeat_interval: float = 30.0,
        check_request_hold_max: int = 2000,
        **options: Any,
    ) -> None:
        for name in ("execute_local_transaction", "check_local_transaction"):
            if not callable(getattr(listener, name, None)):
                raise ConfigError(f"the transaction listener has no {name}(...) method")
        if not heartbeat_interval > 0:
            raise ConfigError(f"heartbeat_interval must be > 0 seconds, not {heartbeat_interval!r}")
        if not check_request_hold_max >= 1:
            raise ConfigError(
                f"check_request_hold_max must be >= 1, not {check_request_hold_max!r}"
            )
        super().__init__(group, namesrv, **options)
        self.listener = listener
        self._end_frames = EndFrames(group, self.client.credentials)
        self._checks: queue.Queue = queue.Queue(check_request_hold_max)
        self._checks_stop = threading.Event()
        self._checker = threading.Thread(target=self._check_loop, name="shmq-transaction-check",
                                         daemon=True)  # fmt: skip
        self._checker.start()
        self._presence_started(heartbeat_interval)

    # -- sending ------------------------------------------------------------------------------

    def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        """Send ``msg`` as a half message, run the local transaction, end it (see the
        module). Raises what a sync ``send`` raises when the half message cannot be stored
        (then the local transaction is not run); a failed end is logged and left to the
        check-back."""
        if not isinstance(msg, Message):
            raise InvalidMessageError(f"a transactional message is a Message, not {msg!r}")
        half, mq = self._send_half(msg)
        msg.transaction_id = half.msg_id
        state = LocalTransactionState.ROLLBACK_MESSAGE  # not stored as it should be
        if half.send_status is SendStatus.SEND_OK:
            state = self._execute(msg, arg)
        result = TransactionSendResult(half, mq, state)
        try:
            self._end(mq, result, state)
        except RemotingError as exc:
            log.warning("producer %s: END_TRANSACTION of %s (%s) not sent, the broker will "
                        "check back: %s", self.group, result.msg_id, state.value, exc)  # fmt: skip
        return result

    def _send_half(self, msg: Message) -> tuple[SendResult, MessageQueue]:
        """Store ``msg`` as one half message (sync, with the retries): the result and the
        real queue it goes to once committed."""
        if msg.delay_level or msg.deliver_time_ms:
            raise InvalidMessageError(
                "a transactional message cannot have a delay_level or a deliver_time_ms"
            )
        one = half_record(self._record(msg, None, None), msg, self.group)
        chosen: list[MessageQueue] = []

        def attempt(broker: BrokerQueues, mq: MessageQueue, deadline: float) -> SendResult:
            chosen.append(mq)
            return self._attempt_one(broker, mq, one, deadline)

        half = self._retry.send_with_retries(msg.topic, attempt, lambda r: r.send_status)
        return half, chosen[-1]

    def send_half(self, msg: Message) -> SendResult:
        """Store ``msg`` as a half message and leave its transaction open: someone else
        ends it later (END_TRANSACTION naming the result's queue offset and CommitLog
        offset), or the broker checks it back. For a sink whose commit is decided
        elsewhere (the Spark sink's driver); ``message_queue`` is the real queue."""
        return self._send_half(msg)[0]

    def send_half_bulk(
        self,
        topic: str,
        bodies: Sequence[bytes] | tuple[np.ndarray, np.ndarray],
        *,
        tags: str | None = None,
        properties: dict[str, str] | None = None,
    ) -> BulkSendResult:
        """``send_bulk``'s fast path for half messages: many bodies of ``topic`` (one queue,
        shared tags and properties, no unique keys) stored as half messages in one ring
        write, each its own open transaction, as ``send_half`` leaves it. The result's
        ``message_queue`` is the real queue; its offsets are the half messages' (what
        END_TRANSACTION names). Only over shared memory (a broker on this host)."""
        check_topic(topic)
        data, offsets = body_arrays(bodies)
        if offsets.shape[0] < 2:
            raise InvalidMessageError("send_half_bulk needs at least one body")
        check_bulk_sizes(topic, offsets, self.max_message_size)
        self._check_open()
        user = build_properties(tags, None, properties)

        def attempt(broker: BrokerQueues, mq: MessageQueue, deadline: float) -> BulkSendResult:
            if self._transport.tcp(broker.address):
                raise ConfigError(f"half messages in bulk go over shared memory only; broker "
                                  f"{broker.address} is reached over TCP")  # fmt: skip
            props = user + hm.half_properties(topic, mq.queue_id, self.group)
            bulk = RecordBatch.bulk(hm.HALF_TOPIC, _HALF_RAW, data, offsets, props)
            half_mq = MessageQueue(hm.HALF_TOPIC, mq.broker_name, hm.HALF_QUEUE_ID)
            status, rows, _ = self._batch_answers(broker, half_mq, bulk)
            return BulkSendResult(status, mq, rows[:, 1].copy(), rows[:, 2].copy())

        return self._retry.send_with_retries(topic, attempt, lambda r: r.send_status)

    def broker_address(self, mq: MessageQueue) -> str:
        """The address of the broker serving ``mq`` in its topic's current route (where
        END_TRANSACTION for a half message sent to ``mq`` goes)."""
        return self._broker_of(mq).address

    def _execute(self, msg: Message, arg: Any) -> LocalTransactionState:
        try:
            state = self.listener.execute_local_transaction(msg, arg)
        except Exception:
            log.exception("producer %s: execute_local_transaction failed: UNKNOW", self.group)
            return LocalTransactionState.UNKNOW
        if not isinstance(state, LocalTransactionState):
            log.warning("producer %s: execute_local_transaction returned %r, not a "
                        "LocalTransactionState: UNKNOW", self.group, state)  # fmt: skip
            return LocalTransactionState.UNKNOW
        return state

    def _end(self, mq: MessageQueue, half: SendResult, state: LocalTransactionState) -> None:
        """The oneway ``END_TRANSACTION`` to the broker that stored ``half``."""
        info = self._infos.get(mq.topic)
        broker = info.brokers.get(mq.broker_name)
        if broker is None:
            raise RemotingError(f"broker {mq.broker_name} left the route of {mq.topic}")
        _, offset = parse_offset_msg_id(half.offset_msg_id)
        self._send_end(broker.address, half.queue_offset, offset, state, half.msg_id, False)

    def _send_end(
        self,
        addr: str,
        queue_offset: int,
        commit_log_offset: int,
        state: LocalTransactionState,
        msg_id: str,
        from_check: bool,
    ) -> None:
        frame = self._end_frames.frame(queue_offset, commit_log_offset, _KIND[state], msg_id,
                                       from_check)  # fmt: skip
        self._presence.send_soon(addr, frame)

    # -- check-backs ----------------------------------------------------------------------------

    def _on_broker_request(self, addr: str, request: RemotingCommand) -> RemotingCommand | None:
        """A broker's request (on a connection's reader thread: queue a check-back, return)."""
        if request.code != RequestCode.CHECK_TRANSACTION_STATE:
            return super()._on_broker_request(addr, request)
        try:
            self._checks.put_nowait((addr, request))
        except queue.Full:
            log.warning("producer %s: %d check-backs queued, one from %s dropped (the broker "
                        "asks again)", self.group, self._checks.maxsize, addr)  # fmt: skip

    def _check_loop(self) -> None:
        while not self._checks_stop.is_set():
            try:
                item = self._checks.get(timeout=0.2)
            except queue.Empty:
                continue
            try:
                self._check(*item)
            except Exception:
                log.exception("producer %s: answering a check-back failed", self.group)

    def _check(self, addr: str, request: RemotingCommand) -> None:
        msg = record_message(request.body)
        if msg is None:
            log.warning("producer %s: a check-back from %s holds no message", self.group, addr)
            return
        group = msg.properties.get(hm.PGROUP)
        if group != self.group:
            log.warning("producer %s: a check-back from %s is for group %r", self.group, addr,
                        group)  # fmt: skip
            return
        try:
            state = self.listener.check_local_transaction(msg)
        except Exception:
            log.exception("producer %s: check_local_transaction failed: UNKNOW", self.group)
            state = LocalTransactionState.UNKNOW
        if not isinstance(state, LocalTransactionState):
            log.warning("producer %s: check_local_transaction returned %r: UNKNOW", self.group,
                        state)  # fmt: skip
            state = LocalTransactionState.UNKNOW
        fields = request.ext_fields
        self._send_end(addr, int(fields.get("tranStateTableOffset", msg.queue_offset)),
                       int(fields.get("commitLogOffset", msg.physical_offset)), state,
                       msg.msg_id, True)  # fmt: skip
        if self._trace is not None:
            self._trace.end_transaction(msg, msg.msg_id, msg.store_host, state.value, True)

    # -- lifecycle ------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop answering check-backs, unregister the group from the brokers, close."""
        if self._closed:
            return
        self._checks_stop.set()
        self._checker.join(5)
        super().close()

    shutdown = close

    def __enter__(self) -> TransactionProducer:
        return self
