"""A producer's sends over TCP: the transport for brokers whose store is not on this host.

The same sends as the ring path (``producer_link``), with RocketMQ's requests on one
pipelined connection per broker (``remoting.pipeline``): a sync send writes its request
and waits for the response; ``send_async`` hands its message over and returns, and the
connection's reader thread settles the future when the response comes; async sends of
plain messages to one queue are batched while its requests are in flight
(``tcp_batching``), so many sends are on the wire at once, in few requests, without a
thread per request; a oneway send is flagged oneway and not answered. A batch or bulk send
goes as SEND_BATCH_MESSAGE requests of at most ``CHUNK_MESSAGES`` messages and the
broker's message size, all written before the first answer is awaited.

Results, errors and retries are the ring path's: ``send_frames`` maps each response code
to a ``SendStatus`` or an ``AttemptError``; a lost connection or a timeout is retryable,
and the sync retries and fault avoidance stay in ``send_retry``. A failed async send is
retried on the same broker by this module's resend thread (the reader thread never writes).
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import numpy as np

from shmq.client.producer.answers import retryable, settle_failed
from shmq.client.producer.async_completion import SendFuture
from shmq.client.producer.records import ONE_MSG_ID, ONE_SYSFLAG
from shmq.client.route import BrokerQueues
from shmq.client.transport.send_frames import (
    CHUNK_MESSAGES,
    MAX_BATCH_BODY,
    STATUSES,
    SendTemplate,
    failure,
    result,
    send_error,
    timeout_error,
)
from shmq.client.transport.tcp_batching import AsyncBatches
from shmq.client.types import MessageQueue, SendStatus
from shmq.codec import batch_body, msg_ids
from shmq.codec.batch_body import ENTRY_FIXED, batch_body_size, write_entries
from shmq.codec.msg_ids import split_offset_ids
from shmq.errors import (
    AttemptError,
    ClientError,
    RemotingError,
    SendError,
    SendTimeoutError,
    ShmqError,
)
from shmq.remoting.pipeline import PipelinedChannel, Reply
from shmq.remoting.security.credentials import Credentials
from shmq.remoting.security.tls import TlsOptions

log = logging.getLogger(__name__)

# Async sends unanswered per broker (accumulated or in flight): beyond, ``send_async`` waits
# for answers (as a full ring makes it wait), so what is queued is answered within the send
# timeout; also the connection's limit of requests in flight.
MAX_IN_FLIGHT = 4096


class TcpSends:
    """The producer's TCP sends; ``fault(broker, started, isolation)`` records latencies,
    ``invalidate(topic)`` drops a route after a failure, ``route(mq)`` finds the broker of a
    queue again for an async retry; ``credentials`` sign each request and ``tls`` wraps the
    connections (the producer's control client's)."""

    def __init__(
        self,
        group: str,
        *,
        send_timeout: float,
        default_topic_queue_nums: int,
        max_message_size: int,
        retries: int,
        fault: Callable[[str, float, bool], None],
        invalidate: Callable[[str], None],
        route: Callable[[MessageQueue], BrokerQueues],
        stats: Any,
        credentials: Credentials | None = None,
        tls: TlsOptions | None = None,
    ) -> None:
        self.group = group
        self.credentials = credentials
        self.tls = tls
        self.send_timeout = send_timeout
        self.default_topic_queue_nums = default_topic_queue_nums
        self.max_batch_body = min(max_message_size, MAX_BATCH_BODY)
        self.retries = retries
        self.fault = fault
        self.invalidate = invalidate
        self.route = route
        self.stats = stats
        self.closing = False
        self._channels: dict[str, PipelinedChannel] = {}
        self._templates: dict[str, SendTemplate] = {}
        self._lock = threading.Lock()
        self._resends: queue.SimpleQueue = queue.SimpleQueue()
        self._resender: threading.Thread | None = None
        self._batches = AsyncBatches(self, MAX_IN_FLIGHT)

    # -- connections ------------------------------------------------------------------------

    def channel(self, broker: BrokerQueues) -> PipelinedChannel:
        """The connection to ``broker`` (a lost one is replaced); a retryable
        ``AttemptError`` when it cannot connect."""
        ch = self._channels.get(broker.address)
        if ch is not None and not ch.closed:
            return ch
        if self.closing:
            raise ClientError("the producer is closed")
        with self._lock:
            ch = self._channels.get(broker.address)
            if ch is None or ch.closed:
                batch_body.warm_up()  # once: the first batch then goes out at once
                msg_ids.warm_up()  # and its answer is read at once
                try:
                    ch = PipelinedChannel(broker.address, connect_timeout=self.send_timeout,
                                          max_in_flight=MAX_IN_FLIGHT, tls=self.tls)  # fmt: skip
                except RemotingError as exc:
                    raise AttemptError(f"cannot reach broker {broker.broker_name}: {exc}",
                                       retryable=True) from exc  # fmt: skip
                self._channels[broker.address] = ch
                log.info("producer %s: TCP data path to broker %s (%s)", self.group,
                         broker.broker_name, broker.address)  # fmt: skip
            return ch

    def template(self, topic: str) -> SendTemplate:
        tpl = self._templates.get(topic)
        if tpl is None:
            tpl = self._templates[topic] = SendTemplate(
                self.group, topic, self.default_topic_queue_nums, self.credentials
            )
        return tpl

    # -- sends ------------------------------------------------------------------------------

    def send_one(
        self, broker: BrokerQueues, mq: MessageQueue, one: tuple, deadline: float,
        reply_message: bool = False,
    ) -> Any:  # fmt: skip
        """A sync send of one record (a reply message's, which the broker pushes to its
        requester, with ``reply_message``): its ``SendResult``."""
        tpl = self.template(mq.topic)
        reply = self._call(broker, mq, lambda op: tpl.one_frame(op, mq, one, reply=reply_message),
                           deadline)  # fmt: skip
        status = STATUSES.get(reply.code)
        if status is None:
            raise failure(reply.code, reply.remark, mq, broker.broker_name)
        return _answered(status, one, mq, reply)

    def send_async(
        self, broker: BrokerQueues, mq: MessageQueue, one: tuple, future: SendFuture,
        started: float,
    ) -> None:  # fmt: skip
        """Send one record without waiting; ``future`` is settled from the response (or by
        the retries); raises when the request cannot be written. A plain record is batched
        with the queue's other async sends (``tcp_batching``); a delayed, half, retried or
        compressed one (a batch has one sysFlag), which RocketMQ never batches, goes alone."""
        if one[0] is not None and not one[ONE_SYSFLAG]:
            self._batches.append(broker, mq, one, future, started)
            return
        ch = self.channel(broker)
        op = ch.next_opaque()
        frame = self.template(mq.topic).one_frame(op, mq, one)

        def done(reply: Reply | None, error: BaseException | None) -> None:
            if error is None:
                status = STATUSES.get(reply.code)
                if status is not None:
                    self.fault(mq.broker_name, started, False)
                    try:
                        future.settle(_answered(status, one, mq, reply))
                    except (KeyError, ValueError) as exc:
                        future.settle(exc=SendError(f"bad answer from {broker.address}: {exc!r}"))
                    return
                error = failure(reply.code, reply.remark, mq, broker.broker_name)
            self.failed(mq, one, future, started, send_error(error, broker, mq))

        ch.send(op, frame, done, started + self.send_timeout)

    def send_oneway(self, broker: BrokerQueues, mq: MessageQueue, one: tuple) -> None:
        """A plain record joins its queue's batch as an async send whose answer nobody reads
        (a oneway request per message would cost the broker a request each); a delayed,
        half or retried one goes alone, flagged oneway."""
        if one[0] is not None:
            self._batches.append(broker, mq, one, SendFuture(), time.monotonic())
            return
        ch = self.channel(broker)
        frame = self.template(mq.topic).one_frame(0, mq, one, oneway=True)
        ch.send_oneway(frame, time.monotonic() + self.send_timeout)

    def send_batch(
        self, broker: BrokerQueues, mq: MessageQueue, batch: Any
    ) -> tuple[SendStatus, np.ndarray, bytes]:
        """A sync batch or bulk send (``send_records.RecordBatch``): its status, answers as
        the ring path's int64 ``(n, 4)`` rows (queue id << 32, queue offset, CommitLog
        offset) and the store host. Every chunk's request is written before the answers
        are awaited; a failure after a chunk was stored is final (not retryable)."""
        bounds = self._chunks(batch)
        tpl = self.template(mq.topic)
        flags = np.atleast_1d(np.asarray(batch.flags, dtype=np.int64))
        born = time.time_ns() // 1_000_000
        waiters = []
        for start, end in itertools.pairwise(bounds):
            size = batch_body_size(batch.body_offs, batch.props_offs, start, end)
            buf, at = tpl.batch_frame(mq.queue_id, born, size, batch.sysflag)
            write_entries(batch.bodies, batch.body_offs, batch.props, batch.props_offs, flags,
                          start, end, buf[at:])  # fmt: skip
            tpl.sign_batch(buf, at)

            def frame(op: int, buf: np.ndarray = buf) -> memoryview:
                tpl.set_opaque(buf, op)
                return buf.data

            waiters.append(self._start(broker, frame, time.monotonic() + self.send_timeout))
        rows = np.zeros((batch.n, 4), dtype=np.int64)
        rows[:, 0] = mq.queue_id << 32
        status, host = SendStatus.SEND_OK, b""
        for k, (start, end) in enumerate(itertools.pairwise(bounds)):
            try:
                reply = self._wait(waiters[k], broker, mq)
                code_status = STATUSES.get(reply.code)
                if code_status is None:
                    raise failure(reply.code, reply.remark, mq, broker.broker_name)
            except (AttemptError, SendTimeoutError) as exc:
                if k == 0:
                    raise
                raise AttemptError(f"{exc} ({start} of {batch.n} messages were stored)",
                                   retryable=False) from exc  # fmt: skip
            if code_status is not SendStatus.SEND_OK and status is SendStatus.SEND_OK:
                status = code_status
            host, phys = split_offset_ids(reply.ext["msgId"])
            if phys.shape[0] != end - start:
                raise SendError(f"broker {broker.broker_name} answered {phys.shape[0]} ids "
                                f"for a batch of {end - start}")  # fmt: skip
            rows[start:end, 1] = int(reply.ext["queueOffset"]) + np.arange(end - start)
            rows[start:end, 2] = phys
        return status, rows, host

    def _chunks(self, batch: Any) -> list[int]:
        """Message indices where the requests of ``batch`` begin (and its end)."""
        lens = np.diff(batch.body_offs) + ENTRY_FIXED
        if batch.props_offs.shape[0] == 2:
            lens += int(batch.props_offs[1] - batch.props_offs[0])
        else:
            lens += np.diff(batch.props_offs)
        ends = np.cumsum(lens)
        bounds, start, base = [0], 0, 0
        while start < batch.n:
            end = int(np.searchsorted(ends, base + self.max_batch_body, side="right"))
            end = max(start + 1, min(end, start + CHUNK_MESSAGES))
            bounds.append(end)
            base = int(ends[end - 1])
            start = end
        return bounds

    # -- requests and answers ---------------------------------------------------------------

    def _start(
        self, broker: BrokerQueues, frame: Callable[[int], bytes | memoryview], deadline: float
    ) -> tuple[PipelinedChannel, int, SendFuture, float]:
        ch = self.channel(broker)
        op = ch.next_opaque()
        waiter = SendFuture()
        try:
            ch.send(op, frame(op), waiter.settle, deadline)
        except RemotingError as exc:
            raise AttemptError(f"cannot send to broker {broker.broker_name}: {exc}",
                               retryable=True) from exc  # fmt: skip
        return ch, op, waiter, deadline

    def _wait(self, started: tuple, broker: BrokerQueues, mq: MessageQueue) -> Reply:
        ch, op, waiter, deadline = started
        try:
            return waiter.result(max(0.0, deadline - time.monotonic()) + 0.5)
        except FutureTimeout:
            ch.forget(op)
            raise timeout_error(broker, mq, self.send_timeout) from None
        except RemotingError as exc:
            raise send_error(exc, broker, mq) from exc

    def _call(
        self, broker: BrokerQueues, mq: MessageQueue, frame: Callable[[int], bytes],
        deadline: float,
    ) -> Reply:  # fmt: skip
        return self._wait(self._start(broker, frame, deadline), broker, mq)

    # -- async failures ---------------------------------------------------------------------

    def failed(
        self, mq: MessageQueue, one: tuple, future: SendFuture, started: float, exc: ShmqError
    ) -> None:
        """Retry a failed async send on the same broker (from the resend thread), or fail
        its future (RocketMQ's ``onExceptionImpl``)."""
        exc = send_error(exc, None, mq)
        self.fault(mq.broker_name, started, True)
        if retryable(exc) and future.attempts < self.retries and not self.closing:
            future.attempts += 1
            self.stats["async_retries"] += 1
            self.invalidate(mq.topic)
            self._resends.put((mq, one, future))
            self._ensure_resender()
            return
        self.stats["async_failed"] += 1
        settle_failed(future, mq, exc)

    def _ensure_resender(self) -> None:
        with self._lock:
            if self._resender is None:
                self._resender = threading.Thread(
                    target=self._resend_loop, name=f"shmq-tcp-resend-{self.group}", daemon=True
                )
                self._resender.start()

    def _resend_loop(self) -> None:
        while True:
            item = self._resends.get()
            if item is None:
                return
            mq, one, future = item
            started = time.monotonic()
            try:
                self.send_async(self.route(mq), mq, one, future, started)
            except ShmqError as exc:
                self.failed(mq, one, future, started, exc)

    # -- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        """Wait (up to ``send_timeout``) for the answers of sends in flight, then close."""
        self.closing = True
        deadline = time.monotonic() + self.send_timeout
        self._batches.close(deadline)
        with self._lock:
            channels = list(self._channels.values())
            self._channels.clear()
            resender, self._resender = self._resender, None
        for ch in channels:
            while ch.in_flight and not ch.closed and time.monotonic() < deadline:
                time.sleep(0.001)
            ch.close()
        if resender is not None:
            self._resends.put(None)
            resender.join(1.0)
        while not self._resends.empty():  # retries that came too late
            item = self._resends.get_nowait()
            if item is not None:
                item[2].settle(exc=ClientError(f"the producer was closed before the send to "
                                               f"{item[0]} was retried"))  # fmt: skip

    def stats_of(self) -> dict[str, dict[str, Any]]:
        return {addr: {"transport": "tcp", "in_flight": ch.in_flight, "closed": ch.closed}
                for addr, ch in list(self._channels.items())}  # fmt: skip


def _answered(status: SendStatus, one: tuple, mq: MessageQueue, reply: Reply) -> Any:
    return result(status, one[ONE_MSG_ID].decode(), mq, reply.ext, one[0] is None)
