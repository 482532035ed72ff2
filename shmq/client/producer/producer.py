"""The producer (RocketMQ's ``DefaultMQProducer``): sync, async, oneway, batch and bulk sends
through a shared-memory ring per broker.

A send appends its record to the ring of the chosen broker in the caller's thread; the
broker's writer answers each record in the ring's completion area, in order. A sync send
waits for its answer (spinning briefly, then parked until the writer posts); ``send_async``
returns a ``Future`` at once and the producer's completion thread settles the futures in
ring order, so many sends are in flight; ``send_oneway`` does not wait at all.

The parts, one module each: ``publish_info`` (routes per topic), ``selectors``,
``send_retry`` (queue selection, retries, latency fault tolerance), ``producer_link`` (the
registration and ring per broker), ``send_records`` (messages as records),
``async_completion`` (futures and the completion thread), ``answers`` (results and errors)
and ``message_checks``.

Example::

    with Producer("OrderProducers", "127.0.0.1:9876") as producer:
        result = producer.send(Message("Orders", b"order 42 paid", tags="Paid"))
        print(result.send_status, result.msg_id, result.queue_offset)
        producer.send(Message("Orders", b"order 42 shipped"), sharding_key="order-42")
        future = producer.send_async(Message("Orders", b"order 43 paid"))
        print(future.result().message_queue)
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry

from shmq.body_compression import (
    CompressionType,
    compress_bodies,
    compression_sysflag,
)
from shmq.body_compression import compress as compress_body
from shmq.client.metrics import ClientMetrics, client_id
from shmq.client.producer import answers
from shmq.client.producer.async_completion import AsyncCompletion, SendFuture
from shmq.client.producer.checks import (
    check_batch,
    check_bulk_sizes,
    check_compression,
    check_message,
    check_selection,
    check_topic,
)
from shmq.client.producer.fault import LATENCY_MAX, NOT_AVAILABLE_DURATION, LatencyFaultTolerance
from shmq.client.producer.link import ProducerLink, ProducerLinks
from shmq.client.producer.publish_info import PublishInfoTable
from shmq.client.producer.records import (
    ONE_MSG_ID,
    ONE_SIZE,
    RecordBatch,
    TopicRecords,
    UniqKeys,
    one_record,
)
from shmq.client.producer.request_reply import ReplyMessage, RequestReply
from shmq.client.producer.retry import SendRetry
from shmq.client.producer.selectors import (
    MessageQueueSelector,
    select_by,
    select_by_hash,
    select_by_random,
)
from shmq.client.route import BrokerQueues, RouteTable
from shmq.client.trace.dispatcher import (
    MAX_MSG_SIZE,
    SEND_TIMEOUT_S,
    AsyncTraceDispatcher,
    trace_group_name,
)
from shmq.client.trace.encoder import TRACE_TOPIC
from shmq.client.trace.send_hook import SendMessageTraceHook
from shmq.client.transport.chooser import TransportChooser
from shmq.client.transport.tcp_send import TcpSends
from shmq.client.types import BulkSendResult, MessageQueue, SendResult, SendStatus
from shmq.errors import (
    AttemptError,
    ClientError,
    ConfigError,
    RemotingError,
    SendError,
    SendTimeoutError,
    ShmqError,
)
from shmq.ipc import ring
from shmq.message import Message, body_arrays
from shmq.properties import build_properties
from shmq.remoting.client import RemotingClient
from shmq.remoting.security.credentials import Credentials
from shmq.remoting.security.tls import TlsOptions

__all__ = ["MessageQueueSelector", "Producer", "select_by_hash", "select_by_random"]

log = logging.getLogger(__name__)


class Producer(RequestReply):
    """Sends messages to the brokers of a namesrv cluster on this host.

    Queue selection is round robin over the writable queues of every broker in the topic's
    route, from a counter that starts at a random value; ``selector=`` (with ``arg=``) or
    ``sharding_key=`` pick the queue instead (same key → same queue), and then a failed send
    is not retried elsewhere, as in RocketMQ (order matters).

    Options (RocketMQ's defaults): ``send_timeout`` (``sendMsgTimeout``, 3 s) bounds each
    attempt; a sync send makes ``retry_times_when_send_failed`` (2) more attempts, on
    another broker when there is one, after a timeout, an unreachable or stopping broker,
    or a retryable rejection; a result other than SEND_OK (FLUSH_DISK_TIMEOUT) is retried
    only with ``retry_another_broker_when_not_store_ok``; an async send is retried
    ``retry_times_when_send_async_failed`` (2) times on the same broker; oneway is never
    retried. ``send_latency_fault_enable`` avoids brokers that were slow or failed, for
    the ``not_available_duration`` (ms) of the largest ``latency_max`` (ms) the send
    reached (see ``shmq.client.producer.fault``). Routes of the topics used are refreshed every
    ``poll_name_server_interval`` seconds and after a failed attempt. Bodies must be
    1..``max_message_size`` bytes; a topic new to the cluster is created by the brokers
    with ``default_topic_queue_nums`` queues written to until its route is known.
    ``spin_us`` is how long a send spins on the broker's answer before parking (0 parks
    at once: less CPU, ~25 µs more latency per send). ``transport``: ``"auto"`` sends
    through a broker's shared-memory ring when its store is on this host and over TCP
    (RocketMQ's send requests, ``tcp_send``; async sends to one queue are batched while its
    requests are in flight, ``tcp_batching``) otherwise; ``"shm"`` or ``"tcp"`` force one.
    ``credentials`` (``(access_key, secret_key)``) signs every request, to the namesrvs
    too, for brokers with ACL on; ``tls`` (True, or a ``TlsOptions``) connects with TLS.
    ``enable_msg_trace`` writes RocketMQ's message trace (a Pub record per stored message,
    an EndTransaction record per ended transaction) to ``trace_topic`` in the background
    (``shmq.client.trace``); off, it costs nothing. ``metrics`` (True: the process's default
    ``prometheus_client`` registry, or a ``CollectorRegistry``) records RocketMQ 5's
    ``rocketmq_send_cost_time`` of ``send`` and ``send_async`` (``shmq.client.metrics``).

    Compressed bodies (RocketMQ's ``compressMsgBodyOverHowmuch``, ``compressLevel``,
    ``compressType``): ``send``, ``send_async``, ``send_oneway`` and a request or reply
    store a body of ``compress_msg_body_over_howmuch`` (4096) bytes or more compressed with
    ``compress_type`` (``"ZLIB"``; ``"LZ4"`` and ``"ZSTD"`` need ``shmq[compression]``) at
    ``compress_level`` (5), its sysFlag saying so, as RocketMQ's producer does; consumers
    get the original body back. ``send_batch`` never compresses (nor does RocketMQ's),
    ``send_bulk`` only with ``compress=True``. A threshold above ``max_message_size``
    turns compression off.

    Example::

        with Producer("OrderProducers", "127.0.0.1:9876") as producer:
            result = producer.send(Message("Orders", b"order 42 paid", tags="Paid"))
            futures = [producer.send_async(Message("Orders", f"m{i}")) for i in range(100)]
            offsets = [f.result().queue_offset for f in futures]
    """

    def __init__(
        self,
        group: str,
        namesrv: str = "127.0.0.1:9876",
        *,
        send_timeout: float = 3.0,
        retry_times_when_send_failed: int = 2,
        retry_times_when_send_async_failed: int = 2,
        retry_another_broker_when_not_store_ok: bool = False,
        send_latency_fault_enable: bool = False,
        latency_max: Sequence[int] = LATENCY_MAX,
        not_available_duration: Sequence[int] = NOT_AVAILABLE_DURATION,
        poll_name_server_interval: float = 30.0,
        max_message_size: int = 4 * 1024 * 1024,
        default_topic_queue_nums: int = 4,
        spin_us: int = 50,
        transport: str = "auto",
        credentials: Credentials | tuple[str, str] | None = None,
        tls: bool | TlsOptions | None = None,
        enable_msg_trace: bool = False,
        trace_topic: str | None = None,
        compress_msg_body_over_howmuch: int = 4096,
        compress_level: int = 5,
        compress_type: str = "ZLIB",
        metrics: bool | CollectorRegistry = False,
    ) -> None:
        if not send_timeout > 0:
            raise ConfigError(f"send_timeout must be > 0 seconds, not {send_timeout!r}")
        for name, value in (
            ("retry_times_when_send_failed", retry_times_when_send_failed),
            ("retry_times_when_send_async_failed", retry_times_when_send_async_failed),
        ):
            if not 0 <= value <= 100:
                raise ConfigError(f"{name} must be in [0, 100], not {value!r}")
        if not 0 < max_message_size < 1 << 31:
            raise ConfigError(f"max_message_size must be in [1, 2^31), not {max_message_size!r}")
        if not 1 <= default_topic_queue_nums <= 1024:
            raise ConfigError(
                f"default_topic_queue_nums must be in [1, 1024], not {default_topic_queue_nums!r}"
            )
        if not poll_name_server_interval > 0:
            raise ConfigError(
                f"poll_name_server_interval must be > 0 seconds, not {poll_name_server_interval!r}"
            )
        # RocketMQ 5's client metrics (``shmq.client.metrics``), None when off
        self._metrics = ClientMetrics.of(metrics)
        self._metrics_client = client_id(group)
        self.compress_type = CompressionType.of(compress_type)
        check_compression(self.compress_type, compress_msg_body_over_howmuch, compress_level)
        self.compress_msg_body_over_howmuch = compress_msg_body_over_howmuch
        self.compress_level = compress_level
        self._compressed_sysflag = compression_sysflag(self.compress_type)
        self.group = group
        self.namesrv = namesrv
        self.send_timeout = float(send_timeout)
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.retry_times_when_send_async_failed = retry_times_when_send_async_failed
        self.retry_another_broker_when_not_store_ok = retry_another_broker_when_not_store_ok
        self.send_latency_fault_enable = send_latency_fault_enable
        self.faults = LatencyFaultTolerance(latency_max, not_available_duration)
        self.poll_name_server_interval = float(poll_name_server_interval)
        self.max_message_size = max_message_size
        self.default_topic_queue_nums = default_topic_queue_nums
        self.spin_us = spin_us
        self.client = RemotingClient(credentials=credentials, tls=tls)
        self.routes = RouteTable(namesrv, self.client, refresh_s=self.poll_name_server_interval)
        self._transport = TransportChooser(self.client, transport)
        self._stats: collections.Counter = collections.Counter()
        self._infos = PublishInfoTable(
            self.routes, group, default_topic_queue_nums, self.poll_name_server_interval
        )
        self._links = ProducerLinks(
            self.client, group, spin_us, default_topic_queue_nums, self.send_timeout
        )
        self._retry = SendRetry(
            self._infos,
            self.faults,
            send_timeout=self.send_timeout,
            retry_times_when_send_failed=retry_times_when_send_failed,
            retry_another_broker_when_not_store_ok=retry_another_broker_when_not_store_ok,
            send_latency_fault_enable=send_latency_fault_enable,
            stats=self._stats,
        )
        self._completion = AsyncCompletion(
            group,
            self._links,
            send_timeout=self.send_timeout,
            retries=retry_times_when_send_async_failed,
            resend=self._resend,
            invalidate=self._infos.invalidate,
            fault=self._retry.update_fault,
            stats=self._stats,
        )
        self._tcp = TcpSends(
            group,
            send_timeout=self.send_timeout,
            default_topic_queue_nums=default_topic_queue_nums,
            max_message_size=max_message_size,
            retries=retry_times_when_send_async_failed,
            fault=self._retry.update_fault,
            invalidate=self._infos.invalidate,
            route=self._broker_of,
            stats=self._stats,
            credentials=self.client.credentials,
            tls=self.client.tls,
        )
        self._topics: dict[str, TopicRecords] = {}
        self._uniq = UniqKeys()
        self._closed = False
        RequestReply.__init__(self)
        self._trace: SendMessageTraceHook | None = None
        if enable_msg_trace:
            dispatcher = trace_dispatcher(group, "PRODUCE", namesrv, trace_topic, transport,
                                          self.client.credentials, self.client.tls)  # fmt: skip
            self._trace = SendMessageTraceHook(group, dispatcher)
            self._trace.install(self)

    # -- sync sends -------------------------------------------------------------------------

    def send(
        self,
        msg: Message,
        *,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        sharding_key: str | None = None,
    ) -> SendResult:
        """Send one message and wait for the broker's answer (sync send).

        ``selector(queues, msg, arg)`` or ``sharding_key`` choose the queue (no retry on
        another queue then). Raises ``InvalidMessageError`` (before anything is sent),
        ``NoRouteError``, or ``SendError`` / ``SendTimeoutError`` after the retries."""
        if self._metrics is None:
            return self._send(msg, selector, arg, sharding_key)
        started = time.perf_counter()
        try:
            result = self._send(msg, selector, arg, sharding_key)
        except ShmqError:
            self._metrics.sent(msg.topic, self._metrics_client, started, False)
            raise
        self._metrics.sent(msg.topic, self._metrics_client, started, True)
        return result

    def _send(
        self, msg: Message, selector: MessageQueueSelector | None, arg: Any, sharding_key: Any
    ) -> SendResult:
        if type(msg) is ReplyMessage:
            return self._send_reply(msg)
        one = self._record(msg, selector, sharding_key)
        if selector is None and sharding_key is None:
            return self.send_record(msg.topic, one)

        def attempt(broker: BrokerQueues, mq: MessageQueue, deadline: float) -> SendResult:
            return self._attempt_one(broker, mq, one, deadline)

        info = self._infos.get(msg.topic)
        mq = select_by(info, msg, selector, arg, sharding_key)
        return self._retry.send_selected(info, mq, attempt)

    def send_record(self, topic: str, one: tuple) -> SendResult:
        """Sync send, with the retries, of a record prepared by ``send_records`` for
        ``topic`` (``send`` of a message, or a consumer's resend to its retry topic)."""
        self._check_open()

        def attempt(broker: BrokerQueues, mq: MessageQueue, deadline: float) -> SendResult:
            return self._attempt_one(broker, mq, one, deadline)

        return self._retry.send_with_retries(topic, attempt, _status_of_one)

    def send_batch(
        self,
        messages: Sequence[Message],
        *,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        sharding_key: str | None = None,
    ) -> list[SendResult]:
        """Send messages of one topic to one queue in one ring write, waiting for all
        answers: many messages in flight at once (RocketMQ's batch send; no delay level).
        The selector sees the first message."""
        if not messages:
            return []
        if any(isinstance(m, Message) and (m.delay_level or m.deliver_time_ms) for m in messages):
            raise ClientError("a delay level or timer is not supported in a batch (TimeDelayLevel)")
        check_selection(selector, sharding_key)
        topic = check_batch(messages, self.max_message_size)
        self._check_open()
        batch = RecordBatch(topic, check_topic(topic), messages, self._uniq.keys(len(messages)))
        info = self._infos.get(topic)

        def attempt(broker: BrokerQueues, mq: MessageQueue, deadline: float) -> list[SendResult]:
            return self._attempt_batch(broker, mq, batch, deadline)

        if selector is not None or sharding_key is not None:
            mq = select_by(info, messages[0], selector, arg, sharding_key)
            return self._retry.send_selected(info, mq, attempt)
        return self._retry.send_with_retries(topic, attempt, _status_of_list)

    def _attempt_one(
        self, broker: BrokerQueues, mq: MessageQueue, one: tuple, deadline: float
    ) -> SendResult:
        """One sync attempt of one record; raises ``AttemptError`` / ``SendTimeoutError``."""
        if self._transport.tcp(broker.address):
            return self._tcp.send_one(broker, mq, one, deadline)
        link, seq, size = self._links.append_one(broker, mq, one, deadline, hold=True)
        try:
            answer = self._links.wait_answer(link, mq, seq, seq, deadline)
            error = answers.rejection(link, mq, [answer[0]])
            if error is not None:
                raise error
            status = answers.flush_status(link, answer[2] + size)
            msg_id = one[ONE_MSG_ID].decode()
            return answers.result(status, msg_id, mq, answer, link.store_host, one[0] is None)
        except (SendTimeoutError, AttemptError) as exc:
            self._after_failed_attempt(link, exc)
            raise
        finally:
            self._links.leave(link)

    def _attempt_batch(
        self, broker: BrokerQueues, mq: MessageQueue, batch: RecordBatch, deadline: float
    ) -> list[SendResult]:
        status, rows, host = self._batch_answers(broker, mq, batch)
        return [answers.result(status, msg_id, mq, w, host)
                for msg_id, w in zip(batch.uniq, rows[:, :3].tolist(), strict=True)]  # fmt: skip

    def _batch_answers(
        self, broker: BrokerQueues, mq: MessageQueue, batch: RecordBatch
    ) -> tuple[SendStatus, np.ndarray, bytes]:
        """One sync attempt of a batch or bulk send: its status (after the flush in
        SYNC_FLUSH), the answers as int64 ``(n, 4)`` rows and the broker's store host."""
        if self._transport.tcp(broker.address):
            return self._tcp.send_batch(broker, mq, batch)
        link, rows, sizes = self._links.send_batch(broker, mq, batch)
        try:
            error = answers.rejection(link, mq, rows[:, 0].tolist())
            if error is not None:
                raise error
            status = answers.flush_status(link, int(rows[-1, 2] + sizes[-1]))
            return status, rows, link.store_host
        except (SendTimeoutError, AttemptError) as exc:
            self._after_failed_attempt(link, exc)
            raise
        finally:
            self._links.leave(link)

    def _after_failed_attempt(self, link: ProducerLink, exc: ShmqError) -> None:
        """A timeout or a broken ring: the next send registers anew, with a new ring."""
        if isinstance(exc, SendTimeoutError) or exc.reason == ring.REASON_NONE:
            self._links.retire(link)

    # -- bulk -------------------------------------------------------------------------------

    def send_bulk(
        self,
        topic: str,
        bodies: Sequence[bytes] | tuple[np.ndarray, np.ndarray],
        *,
        tags: str | None = None,
        compress: bool = False,
    ) -> BulkSendResult:
        """The fast path for bulk traffic: many bodies of one topic (a list of bytes, or a
        uint8 array with n + 1 int64 boundaries) to one queue, encoded by one kernel call
        per ring lap, with tags but no per-message keys or unique ids (their msg id is the
        offset msg id). Waits for every answer. Like ``send``, it retries elsewhere when
        the broker does not answer in time. ``compress``: store every body compressed
        (``compress_type``, ``compress_level``; one sysFlag for all, whatever their size)."""
        raw = check_topic(topic)
        data, offsets = body_arrays(bodies)
        n = offsets.shape[0] - 1
        if n <= 0:
            raise ClientError("send_bulk needs at least one body")
        check_bulk_sizes(topic, offsets, self.max_message_size)
        self._check_open()
        sysflag = 0
        if compress:
            data, offsets = compress_bodies(data, offsets, self.compress_type,
                                            self.compress_level)  # fmt: skip
            sysflag = self._compressed_sysflag
        bulk = RecordBatch.bulk(topic, raw, data, offsets, build_properties(tags), sysflag)
        return self._retry.send_with_retries(
            topic, lambda b, q, d: self._attempt_bulk(b, q, bulk, d), _status_of_bulk
        )

    def _attempt_bulk(
        self, broker: BrokerQueues, mq: MessageQueue, bulk: RecordBatch, deadline: float
    ) -> BulkSendResult:
        status, rows, _ = self._batch_answers(broker, mq, bulk)
        return BulkSendResult(status, mq, rows[:, 1].copy(), rows[:, 2].copy())

    # -- oneway -----------------------------------------------------------------------------

    def send_oneway(
        self,
        msg: Message,
        *,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        sharding_key: str | None = None,
    ) -> None:
        """Hand one message to the broker's ring without waiting for the answer (RocketMQ's
        oneway send: no result, no retry). Returns once the record is in the ring."""
        one = self._record(msg, selector, sharding_key)
        mq, broker, tcp = self._route(msg, selector, arg, sharding_key)
        try:
            if tcp:
                self._tcp.send_oneway(broker, mq, one)
                return
            self._links.append_one(broker, mq, one, time.monotonic() + self.send_timeout)
        except (AttemptError, SendTimeoutError, RemotingError) as exc:
            self._retry.update_fault(mq.broker_name, time.monotonic(), isolation=True)
            self._infos.invalidate(msg.topic)
            raise SendError(f"oneway send to {mq} failed: {exc}") from exc

    # -- async ------------------------------------------------------------------------------

    def send_async(
        self,
        msg: Message,
        callback: Callable[[SendResult], Any]
        | Callable[[SendResult | BaseException], Any]
        | None = None,
        *,
        on_exception: Callable[[BaseException], Any] | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        sharding_key: str | None = None,
    ) -> Future:
        """Send without waiting: the record is appended to the ring in this thread (which
        blocks only while the ring is full, at most ``send_timeout``) and the returned
        ``Future`` resolves to the ``SendResult`` once the broker answers, in ring order,
        from the producer's completion thread. A failed send is retried
        ``retry_times_when_send_async_failed`` times on the same broker; then the future
        holds the ``SendError`` / ``SendTimeoutError`` (or ``NoRouteError``, …).

        RocketMQ's ``SendCallback``: ``callback(send_result)`` is its ``onSuccess``, and
        ``on_exception(exc)`` its ``onException``. Without ``on_exception`` the exception
        goes to ``callback`` too (so ``callback=print`` prints either, and a failure is
        never dropped unseen): test ``isinstance(x, BaseException)``. They run once the
        send is settled, in the thread that settles it: the producer's completion or
        connection thread (keep them short: other answers wait), or this thread when the
        send fails before it is sent. What they raise is logged.

        Invalid messages and arguments raise here; routing and sending failures are
        reported through the future and the callbacks."""
        one = self._record(msg, selector, sharding_key)
        # traced, the future queues the Pub of the message when it settles with a result
        future = SendFuture() if self._trace is None else self._trace.future(msg)
        if self._metrics is not None:
            future.add_done_callback(self._metrics.send_callback(
                msg.topic, self._metrics_client, time.perf_counter()))  # fmt: skip
        if callback is not None or on_exception is not None:
            future.add_done_callback(_send_callback(callback, on_exception))
        started = time.monotonic()
        try:
            mq, broker, tcp = self._route(msg, selector, arg, sharding_key)
        except ShmqError as exc:
            future.settle(exc=exc)
            return future
        if tcp:
            try:
                self._tcp.send_async(broker, mq, one, future, started)
            except ShmqError as exc:
                self._tcp.failed(mq, one, future, started, exc)
            return future
        completion = self._completion
        if not completion.started:
            completion.ensure_started()
        try:
            self._links.append_one(broker, mq, one, started + self.send_timeout, future=future,
                                   started=started)  # fmt: skip
        except ShmqError as exc:
            completion.failed((0, one[ONE_SIZE], future, mq, one[ONE_MSG_ID], one, started), exc)
            return future
        if completion.idle:
            completion.wake()
        return future

    def _resend(self, entry: tuple) -> None:
        """The completion thread retries a failed async send on the same broker (its route
        may have a new address)."""
        _, _, _, mq, _, one, _ = entry
        broker = self._broker_of(mq)
        started = time.monotonic()
        self._links.append_one(broker, mq, one, started + self.send_timeout, future=entry[2],
                               started=started)  # fmt: skip

    # -- selection and records --------------------------------------------------------------

    def _broker_of(self, mq: MessageQueue) -> BrokerQueues:
        """The broker of ``mq`` in its topic's current route (an async retry's target)."""
        broker = self._infos.get(mq.topic).brokers.get(mq.broker_name)
        if broker is None:
            raise AttemptError(f"broker {mq.broker_name} left the route of {mq.topic}",
                               retryable=False)  # fmt: skip
        return broker

    def _record(self, msg: Message, selector: Any, sharding_key: Any) -> tuple:
        """``msg`` checked and encoded for the ring (``send_records.one_record``; a new topic
        is checked once)."""
        if selector is not None or sharding_key is not None:
            check_selection(selector, sharding_key)
        topic = self._topics.get(msg.topic) if type(msg) is Message else None
        body = getattr(msg, "body", None)
        if topic is None or type(body) is not bytes or not 0 < len(body) <= self.max_message_size:
            check_message(msg, self.max_message_size)
            if topic is None:
                topic = self._topics[msg.topic] = TopicRecords(msg.topic, check_topic(msg.topic))
            body = bytes(body)
        if self._closed:
            raise ClientError("the producer is closed")
        if len(body) >= self.compress_msg_body_over_howmuch:
            body = compress_body(body, self.compress_type, self.compress_level)
            return one_record(topic, msg, body, self._uniq, self._compressed_sysflag)
        return one_record(topic, msg, body, self._uniq)

    def _route(
        self,
        msg: Message,
        selector: MessageQueueSelector | None,
        arg: Any,
        sharding_key: str | None,
    ) -> tuple[MessageQueue, BrokerQueues, bool]:
        """The queue for ``msg``, its broker (round robin without a selector), and whether
        the broker's data path is TCP."""
        info = self._infos.infos.get(msg.topic)
        if info is None or info.stale:
            info = self._infos.get(msg.topic)
        queues = info.queues
        if selector is not None or sharding_key is not None:
            mq = select_by(info, msg, selector, arg, sharding_key)
        elif queues and not self.send_latency_fault_enable:
            mq = queues[self._retry.next_index() % len(queues)]
        else:
            mq = self._retry.select(info, None)
        broker = info.brokers[mq.broker_name]
        tcp = self._transport.known.get(broker.address)
        if tcp is None:
            tcp = self._transport.tcp(broker.address)
        return mq, broker, tcp

    # -- lifecycle --------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ClientError("the producer is closed")

    def close(self) -> None:
        """Finish: outstanding async sends are answered or failed (within the send timeout
        plus the flush timeout), records of oneway sends are taken by the broker (within
        the send timeout), threads stop, registrations with the brokers end."""
        if self._closed:
            return
        self._closed = True
        self._retry.closed = True
        self._close_presence()
        links = self._links.close()
        for link in links:  # appends under way end; later ones see _closed
            with link.lock:
                pass
        if not self._completion.stop():
            log.warning("producer %s: the completion thread did not stop", self.group)
        else:
            for link in self._links.all:  # nothing reads these answers any more
                while link.pending:
                    entry = link.pending.popleft()
                    entry[2].settle(exc=ClientError(
                        f"the producer was closed before broker {entry[3].broker_name} "
                        f"answered the send to {entry[3].topic}"
                    ))  # fmt: skip
        self._tcp.close()
        deadline = time.monotonic() + self.send_timeout
        for link in list(self._links.all):
            self._links.drain(link, deadline)  # oneway records still in the ring
            self._links.retire(link)
        self._infos.close()
        self.client.close()
        if self._trace is not None:  # after the last send settled: its trace is queued
            self._trace.shutdown()

    shutdown = close

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def stats(self) -> dict:
        """Brokers linked (the current link of each; a retired one while sends still use
        it), async sends in flight, parks and missed wake-ups, latency faults, failures and
        retries so far, and with trace on its trace messages (``trace``)."""
        return {
            "group": self.group,
            "topics": sorted(self._infos.infos),
            "brokers": {**self._links.stats(), **self._tcp.stats_of()},
            "faults": {
                item.name: {
                    "latency_ms": item.current_latency,
                    "available": self.faults.is_available(item.name),
                }
                for item in self.faults.items()
            },
            **dict(self._stats),
            **({"trace": self._trace.dispatcher.stats()} if self._trace is not None else {}),
        }


def trace_dispatcher(
    group: str,
    kind: str,
    namesrv: str,
    trace_topic: str | None,
    transport: str,
    credentials: Credentials | None,
    tls: TlsOptions | None,
) -> AsyncTraceDispatcher:
    """The trace dispatcher of a ``kind`` (PRODUCE or CONSUME) client of ``group``, with a
    producer of its own (RocketMQ's trace producer: 5 s send timeout, 128000-byte messages)
    sending to ``trace_topic`` (default ``RMQ_SYS_TRACE_TOPIC``)."""
    producer = Producer(trace_group_name(group, kind), namesrv, send_timeout=SEND_TIMEOUT_S,
                        max_message_size=MAX_MSG_SIZE, transport=transport,
                        credentials=credentials, tls=tls)  # fmt: skip
    return AsyncTraceDispatcher(trace_topic or TRACE_TOPIC, producer)


def _status_of_one(result: SendResult) -> SendStatus:
    return result.send_status


def _status_of_list(results: list[SendResult]) -> SendStatus:
    for r in results:
        if r.send_status is not SendStatus.SEND_OK:
            return r.send_status
    return SendStatus.SEND_OK


def _status_of_bulk(result: BulkSendResult) -> SendStatus:
    return result.send_status


def _send_callback(
    callback: Callable[[Any], Any] | None, on_exception: Callable[[BaseException], Any] | None
) -> Callable[[Future], None]:
    """The future's done-callback that hands ``send_async``'s callbacks the result or the
    exception itself, as RocketMQ's ``SendCallback`` gets them (not the future). What they
    raise is logged: the completion thread that calls them must go on settling sends."""
    failure = on_exception or callback

    def call(future: Future) -> None:
        exc = future.exception()
        target = callback if exc is None else failure
        if target is None:
            return
        try:
            target(future.result() if exc is None else exc)
        except Exception:
            log.exception("send_async callback %r failed", target)

    return call
