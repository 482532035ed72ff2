"""The producer: routes from the namesrv, one shared-memory ring per broker; sync, async
(pipelined), oneway, batch and bulk sends, with RocketMQ 4.9's queue selection, retries and
latency fault tolerance.

Sends append encoded records to the producer's ring of the chosen broker (in the caller's
thread); the broker's writer answers each record in the ring's completion area, in order.
A sync send waits for its answers in the caller's thread; ``send_async`` returns a
``Future`` at once and one completion thread per producer resolves the futures in ring
order, so many sends are in flight at a time.

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
import itertools
import logging
import os
import random
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from typing import Any

import numpy as np

from shmq.client.broker_link import BrokerLink
from shmq.client.fault import (
    LATENCY_MAX,
    NOT_AVAILABLE_DURATION,
    LatencyFaultTolerance,
    select_one_message_queue,
)
from shmq.client.ring_producer import RingProducer
from shmq.client.route import AUTO_CREATE_TOPIC_KEY, PERM_WRITE, BrokerQueues, RouteTable
from shmq.client.types import BulkSendResult, MessageQueue, SendResult, SendStatus
from shmq.codec import record as rec
from shmq.codec.jhash import java_hash
from shmq.errors import (
    ClientError,
    ConfigError,
    InvalidMessageError,
    InvalidTopicError,
    MessageTooLargeError,
    NoRouteError,
    RemotingError,
    SendError,
    SendTimeoutError,
    ShmqError,
)
from shmq.ipc import counters as cn
from shmq.ipc import ring
from shmq.ipc.procs import pid_alive
from shmq.message import (
    Message,
    body_arrays,
    build_properties,
    offset_msg_id,
    validate_topic,
)
from shmq.remoting.client import RemotingClient

log = logging.getLogger(__name__)

MessageQueueSelector = Callable[[list[MessageQueue], Message, Any], MessageQueue]

# How often a send waiting for an answer checks that the broker is still there.
LIVENESS_CHECK_S = 0.2
# Rejections worth another attempt (RocketMQ retries TOPIC_NOT_EXIST, SERVICE_NOT_AVAILABLE,
# SYSTEM_ERROR and NO_PERMISSION); a too-large body or an unsupported sysflag is final.
RETRYABLE_REASONS = frozenset(
    {
        ring.REASON_TOPIC_NOT_EXIST,
        ring.REASON_NO_PERMISSION,
        ring.REASON_QUEUE_ID,
        ring.REASON_SERVICE_NOT_AVAILABLE,
        ring.REASON_CORRUPT,
    }
)
# TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET (4.9): system topics no client may send to.
NOT_ALLOWED_SEND_TOPICS = frozenset(
    {
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
    }
)


class _AttemptError(SendError):
    """One attempt failed at a broker; ``retryable`` says whether another may succeed."""

    def __init__(self, message: str, *, retryable: bool, reason: int = ring.REASON_NONE) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.reason = reason


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, _AttemptError):
        return exc.retryable
    return isinstance(exc, SendTimeoutError | RemotingError)


def _fail_all(entries: Iterable[_Pending], exc: BaseException) -> None:
    """Fail every still-open future of ``entries`` with ``exc`` (settled ones stay)."""
    for entry in entries:
        _settle(entry.future, exc=exc)


def _settle(future: Future, result: Any = None, exc: BaseException | None = None) -> None:
    """Resolve ``future`` unless it already is (close() may race the completion thread)."""
    try:
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(result)
    except InvalidStateError:
        pass


# -- selectors --------------------------------------------------------------------------------


def select_by_hash(queues: list[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """RocketMQ's ``SelectMessageQueueByHash``: ``abs(hashCode(arg)) % len(queues)``, with
    Java's ``String.hashCode`` for a str ``arg`` (same key → same queue)."""
    h = java_hash(arg) if isinstance(arg, str) else hash(arg)
    return queues[abs(h) % len(queues)]


def select_by_random(queues: list[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """RocketMQ's ``SelectMessageQueueByRandom``."""
    return queues[random.randrange(len(queues))]


# -- internal state ---------------------------------------------------------------------------


@dataclass
class _PublishInfo:
    """RocketMQ's ``TopicPublishInfo``: the writable queues of a topic, sorted by broker
    name and queue id, and the brokers that hold them."""

    topic: str
    brokers: dict[str, BrokerQueues]
    queues: list[MessageQueue]
    queue_set: frozenset[MessageQueue]
    auto_create: bool  # from TBW102's route: the brokers create the topic on first send
    read_only: tuple[str, ...] = ()  # brokers of the route without write permission
    stale: bool = False


class _Batch:
    """Records of one topic encoded once (unique keys included) for every attempt: the
    ring's arguments but the per-attempt fields (queue id, born timestamp)."""

    __slots__ = ("bodies", "body_offs", "flags", "n", "props", "props_offs", "topic",
                 "topic_raw", "uniq")  # fmt: skip

    def __init__(self, topic: str, messages: Sequence[Message], uniq: list[str]) -> None:
        self.topic = topic
        self.topic_raw = np.frombuffer(validate_topic(topic), dtype=np.uint8)
        self.uniq = uniq
        n = self.n = len(messages)
        if n == 1:
            m = messages[0]
            props = m.encoded_properties(uniq[0])
            self.props = np.frombuffer(props, dtype=np.uint8)
            self.props_offs = np.array([0, len(props)], dtype=np.int64)
            self.bodies = np.frombuffer(m.body, dtype=np.uint8)
            self.body_offs = np.array([0, len(m.body)], dtype=np.int64)
            self.flags = m.flag
            return
        props = [m.encoded_properties(u) for m, u in zip(messages, uniq, strict=True)]
        self.props = np.frombuffer(b"".join(props), dtype=np.uint8)
        self.props_offs = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, props), np.int64, n), out=self.props_offs[1:])
        self.bodies = np.frombuffer(b"".join(m.body for m in messages), dtype=np.uint8)
        self.body_offs = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.fromiter((len(m.body) for m in messages), np.int64, n), out=self.body_offs[1:])
        self.flags = np.fromiter((m.flag for m in messages), np.int64, n)

    @classmethod
    def bulk(cls, topic: str, data: np.ndarray, offsets: np.ndarray, props: bytes) -> _Batch:
        """Bodies sharing one properties string, without unique keys (``send_bulk``)."""
        self = cls.__new__(cls)
        self.topic = topic
        self.topic_raw = np.frombuffer(validate_topic(topic), dtype=np.uint8)
        self.uniq = []
        self.n = offsets.shape[0] - 1
        self.bodies, self.body_offs = data, offsets
        self.props = np.frombuffer(props, dtype=np.uint8)
        self.props_offs = np.array([0, len(props)], dtype=np.int64)
        self.flags = 0
        return self

    def fields(self, queue_id: int, born_host: int) -> np.ndarray:
        if self.n == 1:  # one small array, built at once (the common case)
            row = [0] * rec.N_FIELDS
            row[rec.F_QUEUE_ID] = queue_id
            row[rec.F_FLAG] = self.flags
            row[rec.F_BORN_TS] = time.time_ns() // 1_000_000
            row[rec.F_BORN_HOST] = born_host
            row[rec.F_BODY_CRC] = -1
            return np.array([row], dtype=np.int64)
        fields = np.zeros((self.n, rec.N_FIELDS), dtype=np.int64)
        fields[:, rec.F_QUEUE_ID] = queue_id
        fields[:, rec.F_FLAG] = self.flags
        fields[:, rec.F_BORN_TS] = time.time_ns() // 1_000_000
        fields[:, rec.F_BORN_HOST] = born_host
        fields[:, rec.F_BODY_CRC] = -1
        return fields


class _Link:
    """A registration with one broker and its ring, shared by every send to that broker.

    ``lock`` orders appends, and the async pending queue with them. ``users`` counts the
    sync sends waiting on the ring; a link is closed once it is retired (replaced, failed,
    or the producer closed) and neither a sync send nor an async one uses it. Async
    answers are read by the completion thread only: ``drained_upto`` is the sequence below
    which it has copied every async answer, so appends never reuse a completion slot whose
    answer is still unread (``max_inflight``)."""

    def __init__(self, broker: BrokerLink, ring_producer: RingProducer) -> None:
        self.broker = broker
        self.ring = ring_producer
        self.broker_name = broker.broker_name
        self.address = broker.address
        self.counters = broker.counters.words
        self.mask = ring_producer.slots - 1
        # slack for appenders that pass the (unlocked) check at the same time
        self.max_inflight = ring_producer.slots - min(1024, ring_producer.slots // 4)
        self.lock = threading.Lock()
        self.pending: collections.deque[_Pending] = collections.deque()
        self.drained_upto = ring_producer.seq
        self.draining = False
        self.users = 0
        self.retired = False
        self.closed = False
        self.checked_at = time.monotonic()
        self.flush_timeout = broker.info.get("syncFlushTimeout", 5000) / 1000

    def gone_reason(self, check_pid: bool) -> str | None:
        """Why the broker can no longer answer (stopping, its process is gone, or it fenced
        this ring; a retired link registers again, with a new ring)."""
        if int(self.counters[cn.STATE]) == cn.STATE_STOPPING:
            return "the broker is stopping"
        fenced = self.ring.fence_reason()
        if fenced:
            return f"the broker fenced this producer's ring: {fenced}"
        if check_pid:
            pid = int(self.counters[cn.SUPERVISOR_PID])
            if pid > 0 and not pid_alive(pid):
                return f"the broker process {pid} is gone"
        return None

    def reason_text(self, reason: int) -> str:
        """A rejection's reason as the user reads it; SERVICE_NOT_AVAILABLE says why (a
        full disk, a failed flush) from the broker's store status words."""
        text = ring.REASONS.get(reason, f"reason {reason}")
        if reason == ring.REASON_SERVICE_NOT_AVAILABLE:
            return f"SERVICE_NOT_AVAILABLE: {cn.refuse_reason(self.counters) or text}"
        return text

    def unused(self) -> bool:
        """Retired, still open, and no send uses it (call with ``lock`` held)."""
        return self.retired and not self.closed and self.users <= 0 and not self.pending

    def close(self) -> None:
        try:
            self.ring.close()
        finally:
            self.broker.close()


class _Pending:
    """One async send in flight."""

    __slots__ = ("attempts", "batch", "broker", "deadline", "future", "link", "mq", "seq",
                 "size", "started")  # fmt: skip

    def __init__(self, future: Future, batch: _Batch, broker: BrokerQueues, mq: MessageQueue):
        self.future = future
        self.batch = batch
        self.broker = broker
        self.mq = mq
        self.attempts = 0
        self.link: _Link | None = None
        self.seq = 0
        self.size = 0
        self.deadline = 0.0
        self.started = 0.0


class _Retired(Exception):
    """The link was retired between looking it up and appending: look it up again."""


# -- the producer -----------------------------------------------------------------------------


class Producer:
    """Sends messages to the brokers of a namesrv cluster on this host (RocketMQ's
    ``DefaultMQProducer``).

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
    reached (see ``shmq.client.fault``). Routes of the topics used are refreshed every
    ``poll_name_server_interval`` seconds and after a failed attempt. Bodies must be
    1..``max_message_size`` bytes; a topic new to the cluster is created by the brokers
    with ``default_topic_queue_nums`` queues written to until its route is known.
    ``spin_us`` is how long a send spins on the broker's answer before parking (0 parks
    at once: less CPU, ~25 µs more latency per send).

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
        self.client = RemotingClient()
        self.routes = RouteTable(namesrv, self.client, refresh_s=self.poll_name_server_interval)
        self._infos: dict[str, _PublishInfo] = {}
        self._links: dict[str, _Link] = {}
        self._counter = itertools.count(random.randrange(1 << 31))
        self._lock = threading.Lock()
        self._connect_lock = threading.Lock()
        self._closed = False
        self._stop = threading.Event()
        self._uniq_prefix = _uniq_prefix()
        self._uniq_seq = itertools.count()
        self._refresher: threading.Thread | None = None
        # async completion
        self._all_links: tuple[_Link, ...] = ()  # every open link (for the completer)
        self._completer: threading.Thread | None = None
        self._wake = threading.Event()
        self._completer_idle = False
        self._closing = False
        self._stats = collections.Counter()

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
        return self._send_sync([msg], selector, arg, sharding_key)[0]

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
        if any(isinstance(m, Message) and m.delay_level for m in messages):
            raise ClientError("a delay level is not supported in a batch (TimeDelayLevel)")
        return self._send_sync(messages, selector, arg, sharding_key)

    def _send_sync(
        self,
        messages: Sequence[Message],
        selector: MessageQueueSelector | None,
        arg: Any,
        sharding_key: str | None,
    ) -> list[SendResult]:
        batch = self._prepare(messages, selector, sharding_key)
        info = self._publish_info(batch.topic)
        if selector is not None or sharding_key is not None:
            mq = self._select_by(info, messages[0], selector, arg, sharding_key)
            return self._send_selected(info, mq, lambda b, q, d: self._attempt(b, q, batch, d))
        return self._send_with_retries(
            batch.topic, lambda b, q, d: self._attempt(b, q, batch, d), _status_of_list
        )

    def _send_with_retries(self, topic: str, attempt, status_of) -> Any:
        """RocketMQ's ``sendDefaultImpl``: up to 1 + retries attempts, each on a queue of
        another broker than the last failed one where possible, all within one
        ``send_timeout``: a send that timed out is not sent again (it may have been stored)."""
        total = 1 + self.retry_times_when_send_failed
        deadline = time.monotonic() + self.send_timeout
        last_broker: str | None = None
        last_exc: BaseException | None = None
        last_result = None
        tried: list[str] = []
        for i in range(total):
            if i and time.monotonic() >= deadline:
                break
            info = self._publish_info(topic)
            mq = self._select(info, last_broker)
            broker = info.brokers[mq.broker_name]
            tried.append(mq.broker_name)
            started = time.monotonic()
            try:
                result = attempt(broker, mq, deadline)
            except ShmqError as exc:
                self._update_fault(mq.broker_name, started, isolation=True)
                if not _retryable(exc):
                    if type(exc) is SendError:  # from the ring: name where it was going
                        raise SendError(f"send to {mq} failed: {exc}") from exc
                    raise
                last_exc, last_broker = exc, mq.broker_name
                self._invalidate(topic)
                self._stats["failed_attempts"] += 1
                if i + 1 < total and not self._closed:
                    log.warning("send to %s failed (%s); retrying", mq, exc)
                    continue
                break
            self._update_fault(mq.broker_name, started, isolation=False)
            last_result = result
            if (
                status_of(result) is not SendStatus.SEND_OK
                and self.retry_another_broker_when_not_store_ok
                and i + 1 < total
            ):
                log.warning("send to %s: %s; retrying on another broker", mq, status_of(result))
                last_broker = mq.broker_name
                self._stats["not_store_ok_retries"] += 1
                continue
            return result
        if last_result is not None:  # RocketMQ returns the last result it got
            return last_result
        cls = SendTimeoutError if isinstance(last_exc, SendTimeoutError) else SendError
        raise cls(
            f"send to topic {topic} failed after {len(tried)} attempt(s) "
            f"(brokers tried: {', '.join(tried)}): {last_exc}"
        ) from last_exc

    def _send_selected(self, info: _PublishInfo, mq: MessageQueue, attempt) -> Any:
        """One attempt on the chosen queue (RocketMQ's ``sendSelectImpl``: no retry)."""
        started = time.monotonic()
        try:
            result = attempt(info.brokers[mq.broker_name], mq, started + self.send_timeout)
        except ShmqError as exc:
            self._update_fault(mq.broker_name, started, isolation=True)
            self._invalidate(mq.topic)
            if isinstance(exc, SendTimeoutError):
                raise SendTimeoutError(f"send to {mq} failed: {exc}") from exc
            if isinstance(exc, _AttemptError | RemotingError):
                raise SendError(f"send to {mq} failed: {exc}") from exc
            raise
        self._update_fault(mq.broker_name, started, isolation=False)
        return result

    def _attempt(
        self, broker: BrokerQueues, mq: MessageQueue, batch: _Batch, deadline: float
    ) -> list[SendResult]:
        """One sync attempt: append the batch to ``broker``'s ring, wait for the answers
        (and in SYNC_FLUSH for the flush) until ``deadline``; raises ``_AttemptError`` /
        ``SendTimeoutError``."""
        link, first, sizes = self._append(broker, mq, batch, deadline, hold=True)
        try:
            rows = self._wait_rows(link, mq, first, batch.n, deadline)
            return self._results(link, mq, rows, sizes, batch.uniq)
        except (SendTimeoutError, _AttemptError) as exc:
            if isinstance(exc, SendTimeoutError) or exc.reason == ring.REASON_NONE:
                self._retire(link)  # a new registration (new ring) for the next send
            raise
        finally:
            self._leave(link)

    def _append(
        self,
        broker: BrokerQueues,
        mq: MessageQueue,
        batch: _Batch,
        deadline: float,
        *,
        hold: bool = False,
        entry: _Pending | None = None,
    ) -> tuple[_Link, int, np.ndarray]:
        """Append ``batch`` for ``mq`` to the ring of ``broker`` (registering with it on
        first use); returns the link, the first record's sequence and the record sizes.
        ``hold``: a sync send that waits on the link (``_leave`` it after); ``entry``: an
        async send, queued for the completion thread in ring order."""
        for _ in range(3):
            link = self._link_for(broker)
            fields = batch.fields(mq.queue_id, link.broker.born_host)
            if entry is not None and entry.attempts == 0:
                self._wait_inflight(link, deadline)
            try:
                with link.lock:
                    if self._closed:  # close() waits for appends that got past this
                        raise ClientError("the producer is closed")
                    if link.retired:
                        raise _Retired
                    gone = link.gone_reason(False)
                    if gone:
                        raise self._gone_error(link, mq, gone)
                    ring_producer = link.ring
                    if entry is not None and not link.pending and not link.draining:
                        link.drained_upto = ring_producer.seq  # no async answer is unread
                    first, sizes = ring_producer.append(
                        batch.topic_raw, batch.bodies, batch.body_offs, batch.props,
                        batch.props_offs, fields, deadline,
                    )  # fmt: skip
                    if hold:
                        link.users += 1
                    if entry is not None:
                        entry.link, entry.seq, entry.size = link, first, int(sizes[0])
                        entry.deadline = deadline
                        link.pending.append(entry)
                    return link, first, sizes
            except _Retired:
                continue
            except SendTimeoutError:
                self._retire(link)  # the ring stayed full: the writer does not take records
                raise SendTimeoutError(
                    f"the ring of broker {link.broker_name} ({link.address}) stayed full for "
                    f"send_timeout {self.send_timeout:g} s (topic {mq.topic})"
                ) from None
            except _AttemptError:
                self._retire(link)
                raise
        raise _AttemptError(f"the link to broker {broker.broker_name} keeps being replaced",
                            retryable=True)  # fmt: skip

    def _wait_inflight(self, link: _Link, deadline: float) -> None:
        """Block while ``max_inflight`` async answers of ``link`` are still unread."""
        while (link.pending or link.draining) and (
            link.ring.seq - link.drained_upto >= link.max_inflight
        ):
            if time.monotonic() >= deadline:
                raise _AttemptError(
                    f"{link.max_inflight} async sends to broker {link.broker_name} were still "
                    f"unanswered after send_timeout {self.send_timeout:g} s",
                    retryable=False,
                )
            time.sleep(0.0002)

    def _wait_rows(
        self, link: _Link, mq: MessageQueue, first: int, n: int, deadline: float
    ) -> np.ndarray:
        """Wait for the answers of records ``first .. first+n-1`` (they come in order) and
        copy their completion rows; checks every ``LIVENESS_CHECK_S`` that the broker is
        still there."""
        ring_producer = link.ring
        last = first + n - 1
        while not ring_producer.answered(last):
            now = time.monotonic()
            try:
                ring_producer.wait_answer(last, min(deadline, now + LIVENESS_CHECK_S))
                break
            except SendTimeoutError:
                if ring_producer.answered(last):
                    break
                gone = link.gone_reason(True)
                if gone:
                    raise self._gone_error(link, mq, gone) from None
                if time.monotonic() >= deadline:
                    raise SendTimeoutError(
                        f"broker {link.broker_name} ({link.address}) did not answer the send "
                        f"to {mq.topic} within send_timeout {self.send_timeout:g} s"
                    ) from None
        start = first & link.mask
        if start + n <= link.mask + 1:
            return ring_producer.completions[start : start + n].copy()
        return ring_producer.completions[(first + np.arange(n)) & link.mask]

    def _results(
        self,
        link: _Link,
        mq: MessageQueue,
        rows: np.ndarray,
        sizes: np.ndarray,
        uniq: list[str],
    ) -> list[SendResult]:
        """SendResults from the writer's answers; in SYNC_FLUSH after the flush covering the
        last one (FLUSH_DISK_TIMEOUT when it takes longer than ``syncFlushTimeout``)."""
        self._raise_rejections(link, mq, rows)
        status = SendStatus.SEND_OK
        if link.broker.sync_flush:
            end = int(rows[-1, 2]) + int(sizes[-1])
            if not link.ring.wait_flushed(end, time.monotonic() + link.flush_timeout):
                status = SendStatus.FLUSH_DISK_TIMEOUT
        host = link.broker.store_host_bytes
        results = []
        for row, key in zip(rows.tolist(), uniq, strict=True):
            qid = row[0] >> 32
            queue = mq if qid == mq.queue_id else MessageQueue(mq.topic, mq.broker_name, qid)
            results.append(SendResult(status, key, offset_msg_id(host, row[2]), queue, row[1]))
        return results

    @staticmethod
    def _raise_rejections(link: _Link, mq: MessageQueue, rows: np.ndarray) -> None:
        status = rows[:, 0] & 0xFFFF
        rejected = status == ring.REJECTED
        if not rejected.any():
            return
        n, bad = rows.shape[0], int(rejected.sum())
        k = int(np.argmax(rejected))
        reason = (int(rows[k, 0]) >> 16) & 0xFFFF
        text = link.reason_text(reason)
        what = "the message" if n == 1 else f"{bad} of {n} messages"
        stored = "" if bad == n else f" ({n - bad} were stored)"
        raise _AttemptError(
            f"broker {link.broker_name} rejected {what} to topic {mq.topic}: {text}{stored}",
            retryable=bad == n and reason in RETRYABLE_REASONS,
            reason=reason,
        )

    def _gone_error(self, link: _Link, mq: MessageQueue, why: str) -> _AttemptError:
        return _AttemptError(
            f"broker {link.broker_name} ({link.address}) cannot take the send to {mq.topic}: {why}",
            retryable=True,
        )

    # -- bulk -------------------------------------------------------------------------------

    def send_bulk(
        self,
        topic: str,
        bodies: Sequence[bytes] | tuple[np.ndarray, np.ndarray],
        *,
        tags: str | None = None,
    ) -> BulkSendResult:
        """The fast path for bulk traffic: many bodies of one topic (a list of bytes, or a
        uint8 array with n + 1 int64 boundaries) to one queue, encoded by one kernel call
        per ring lap, with tags but no per-message keys or unique ids (their msg id is the
        offset msg id). Waits for every answer. Like ``send``, it retries elsewhere when
        the broker does not answer in time."""
        self._check_topic(topic)
        data, offsets = body_arrays(bodies)
        n = offsets.shape[0] - 1
        if n <= 0:
            raise ClientError("send_bulk needs at least one body")
        self._check_bulk_sizes(topic, offsets)
        if self._closed:
            raise ClientError("the producer is closed")
        bulk = _Batch.bulk(topic, data, offsets, build_properties(tags))
        return self._send_with_retries(
            topic, lambda b, q, d: self._attempt_bulk(b, q, bulk, d), _status_of_bulk
        )

    def _check_bulk_sizes(self, topic: str, offsets: np.ndarray) -> None:
        """Every body 1..max_message_size bytes, checked over the boundaries at once."""
        sizes = np.diff(offsets)
        bad = (sizes < 1) | (sizes > self.max_message_size)
        if bad.any():
            k = int(np.argmax(bad))
            size = int(sizes[k])
            if size < 0:
                raise InvalidMessageError(
                    f"bulk send to topic {topic}: body boundaries decrease at body {k} "
                    f"({int(offsets[k])} then {int(offsets[k + 1])})"
                )
            raise MessageTooLargeError(
                f"bulk send to topic {topic}: body {k} is {size} bytes ({int(bad.sum())} "
                f"bad of {sizes.shape[0]}); bodies must be 1..{self.max_message_size} bytes "
                f"(maxMessageSize)"
            )

    def _attempt_bulk(
        self, broker: BrokerQueues, mq: MessageQueue, bulk: _Batch, deadline: float
    ) -> BulkSendResult:
        link, first, sizes = self._append(broker, mq, bulk, deadline, hold=True)
        try:
            rows = self._wait_rows(link, mq, first, bulk.n, deadline)
            self._raise_rejections(link, mq, rows)
            send_status = SendStatus.SEND_OK
            if link.broker.sync_flush:
                end = int(rows[-1, 2]) + int(sizes[-1])
                if not link.ring.wait_flushed(end, time.monotonic() + link.flush_timeout):
                    send_status = SendStatus.FLUSH_DISK_TIMEOUT
            return BulkSendResult(send_status, mq, rows[:, 1].copy(), rows[:, 2].copy())
        except (SendTimeoutError, _AttemptError) as exc:
            if isinstance(exc, SendTimeoutError) or exc.reason == ring.REASON_NONE:
                self._retire(link)
            raise
        finally:
            self._leave(link)

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
        batch = self._prepare([msg], selector, sharding_key)
        info = self._publish_info(batch.topic)
        if selector is not None or sharding_key is not None:
            mq = self._select_by(info, msg, selector, arg, sharding_key)
        else:
            mq = self._select(info, None)
        try:
            self._append(info.brokers[mq.broker_name], mq, batch,
                         time.monotonic() + self.send_timeout)  # fmt: skip
        except (_AttemptError, SendTimeoutError, RemotingError) as exc:
            self._update_fault(mq.broker_name, time.monotonic(), isolation=True)
            self._invalidate(batch.topic)
            raise SendError(f"oneway send to {mq} failed: {exc}") from exc

    # -- async ------------------------------------------------------------------------------

    def send_async(
        self,
        msg: Message,
        callback: Callable[[Future], Any] | None = None,
        *,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        sharding_key: str | None = None,
    ) -> Future:
        """Send without waiting: the record is appended to the ring in this thread (which
        blocks only while the ring is full, at most ``send_timeout``) and the returned
        ``Future`` resolves to the ``SendResult`` once the broker answers, in ring order,
        from the producer's completion thread. A failed send is retried
        ``retry_times_when_send_async_failed`` times on the same broker; then the future
        holds the ``SendError`` / ``SendTimeoutError``. ``callback(future)``, if given, is
        called when the future is done (in the completion thread: keep it short); its
        errors are logged.

        Invalid messages and arguments raise here; routing and sending failures are
        reported through the future."""
        batch = self._prepare([msg], selector, sharding_key)
        future: Future = Future()
        future.set_running_or_notify_cancel()  # in flight: it cannot be cancelled
        if callback is not None:
            future.add_done_callback(_logged(callback))
        try:
            info = self._publish_info(batch.topic)
            if selector is not None or sharding_key is not None:
                mq = self._select_by(info, msg, selector, arg, sharding_key)
            else:
                mq = self._select(info, None)
        except ShmqError as exc:
            _settle(future, exc=exc)
            return future
        self._ensure_completer()
        self._submit(_Pending(future, batch, info.brokers[mq.broker_name], mq))
        return future

    def _submit(self, entry: _Pending) -> None:
        """Append ``entry`` to its broker's ring and queue it for the completion thread;
        on failure retry (same broker) or fail the future."""
        entry.started = time.monotonic()
        try:
            self._append(entry.broker, entry.mq, entry.batch,
                         entry.started + self.send_timeout, entry=entry)  # fmt: skip
        except ShmqError as exc:
            self._async_failed(entry, exc)
            return
        if self._completer_idle:
            self._wake.set()

    def _async_failed(self, entry: _Pending, exc: BaseException) -> None:
        """Retry ``entry`` on the same broker, or fail its future."""
        self._update_fault(entry.mq.broker_name, entry.started or time.monotonic(), True)
        if (
            _retryable(exc)
            and entry.attempts < self.retry_times_when_send_async_failed
            and not self._closing
        ):
            entry.attempts += 1
            self._stats["async_retries"] += 1
            self._invalidate(entry.mq.topic)
            info = self._infos.get(entry.mq.topic)
            if info is not None and entry.mq.broker_name in info.brokers:
                entry.broker = info.brokers[entry.mq.broker_name]  # its address may change
            log.debug("async send to %s failed (%s); retry %d", entry.mq, exc, entry.attempts)
            self._submit(entry)
            return
        self._stats["async_failed"] += 1
        attempts = entry.attempts + 1
        if isinstance(exc, ShmqError) and not _retryable(exc) and attempts == 1:
            _settle(entry.future, exc=exc)
            return
        cls = SendTimeoutError if isinstance(exc, SendTimeoutError) else SendError
        error = cls(f"async send to {entry.mq} failed after {attempts} attempt(s): {exc}")
        error.__cause__ = exc
        _settle(entry.future, exc=error)

    def _ensure_completer(self) -> None:
        if self._completer is not None:
            return
        with self._lock:
            if self._closed:
                raise ClientError("the producer is closed")
            if self._completer is None:
                self._completer = threading.Thread(
                    target=self._complete_loop, name=f"shmq-producer-{self.group}", daemon=True
                )
                self._completer.start()

    def _complete_loop(self) -> None:
        """Resolve async futures in ring order, for every broker with sends in flight."""
        turn = 0
        while True:
            active = [link for link in self._all_links if link.pending]
            if not active:
                if self._closing:
                    return
                self._wake.clear()
                self._completer_idle = True
                if not any(link.pending for link in self._all_links):
                    self._wake.wait(0.1)
                self._completer_idle = False
                continue
            done = 0
            for link in active:
                try:
                    done += self._drain(link)
                except Exception:  # never let the completion thread die
                    log.exception("producer %s: completing async sends failed", self.group)
            if done:
                continue
            link = active[turn % len(active)]
            turn += 1
            pending = link.pending
            if pending:
                head = pending[0]
                slice_s = 0.01 if len(active) == 1 else 0.002
                try:
                    link.ring.wait_answer(head.seq, min(head.deadline, time.monotonic() + slice_s))
                except SendTimeoutError:
                    pass
                except Exception:
                    log.exception("producer %s: waiting for answers failed", self.group)
            for link in active:
                try:
                    self._expire(link)
                except Exception:
                    log.exception("producer %s: expiring async sends failed", self.group)

    def _drain(self, link: _Link) -> int:
        """Resolve the async sends of ``link`` that the broker has answered."""
        pending = link.pending
        if not pending:  # (a link without async sends in flight may be closed any time)
            return 0
        seq_head = ring.load_seq_head(link.ring.words)
        if pending[0].seq >= seq_head:
            return 0
        link.draining = True
        batch = []
        while pending and pending[0].seq < seq_head:
            batch.append(pending.popleft())
        try:
            idx = np.fromiter((e.seq for e in batch), np.int64, len(batch)) & link.mask
            rows = link.ring.completions[idx]  # a copy: the slots may be reused from here on
            link.drained_upto = seq_head
            link.draining = False
            return self._resolve(link, batch, rows)
        except BaseException as exc:  # whatever failed, no future of the batch stays open
            link.draining = False
            _fail_all(batch, SendError(f"completing async sends to broker "
                                       f"{link.broker_name} failed: {exc!r}"))  # fmt: skip
            raise

    def _resolve(self, link: _Link, batch: list[_Pending], rows: np.ndarray) -> int:
        """Settle the futures of ``batch`` from their completion ``rows``."""
        status = rows[:, 0] & 0xFFFF
        ok = status != ring.REJECTED
        flushed = None
        flush_error: BaseException | None = None
        if link.broker.sync_flush and ok.any():
            ends = rows[:, 2] + np.fromiter((e.size for e in batch), np.int64, len(batch))
            try:
                if link.ring.wait_flushed(
                    int(ends[ok].max()), time.monotonic() + link.flush_timeout
                ):
                    flushed = np.ones(len(batch), dtype=bool)
                else:
                    flushed = ends <= int(link.counters[cn.FLUSHED_OFFSET])
            except SendError as exc:
                flush_error = exc
        host = link.broker.store_host_bytes
        broker_name = link.broker_name
        if link.retired:
            self._close_if_unused(link)
        now = time.monotonic()
        ok_list = ok.tolist()
        flushed_list = None if flushed is None else flushed.tolist()
        for entry, row, stored, i in zip(batch, rows.tolist(), ok_list, itertools.count()):
            if not stored:
                reason = (row[0] >> 16) & 0xFFFF
                exc = _AttemptError(
                    f"broker {broker_name} rejected the message to topic "
                    f"{entry.mq.topic}: {link.reason_text(reason)}",
                    retryable=reason in RETRYABLE_REASONS,
                    reason=reason,
                )
                self._async_failed(entry, exc)
                continue
            if flush_error is not None:
                _settle(entry.future, exc=flush_error)
                continue
            if self.send_latency_fault_enable:
                self.faults.update(broker_name, (now - entry.started) * 1000, False)
            status_i = (
                SendStatus.SEND_OK
                if flushed_list is None or flushed_list[i]
                else SendStatus.FLUSH_DISK_TIMEOUT
            )
            qid = row[0] >> 32
            mq = entry.mq
            queue = mq if qid == mq.queue_id else MessageQueue(mq.topic, mq.broker_name, qid)
            _settle(
                entry.future,
                SendResult(status_i, entry.batch.uniq[0], offset_msg_id(host, row[2]), queue,
                           row[1]),
            )  # fmt: skip
        return len(batch)

    def _expire(self, link: _Link) -> None:
        """Fail (or retry) the unanswered async sends of ``link`` whose broker is gone or
        whose send timeout passed."""
        pending = link.pending
        if not pending or link.ring.answered(pending[0].seq):
            return
        now = time.monotonic()
        gone = None
        if now - link.checked_at >= LIVENESS_CHECK_S or self._closing:
            link.checked_at = now
            gone = link.gone_reason(True)
        if gone is None and now < pending[0].deadline:
            return
        self._retire(link)  # later sends register anew
        expired = []
        while pending and (gone is not None or pending[0].deadline <= now):
            if link.ring.answered(pending[0].seq):
                break
            expired.append(pending.popleft())
        try:
            self._close_if_unused(link)
            for entry in expired:
                if gone is not None:
                    exc: ShmqError = self._gone_error(link, entry.mq, gone)
                else:
                    exc = SendTimeoutError(
                        f"broker {link.broker_name} ({link.address}) did not answer the send "
                        f"to {entry.mq.topic} within send_timeout {self.send_timeout:g} s"
                    )
                self._async_failed(entry, exc)
        except BaseException as exc:
            _fail_all(expired, SendError(f"failing expired async sends failed: {exc!r}"))
            raise

    # -- selection --------------------------------------------------------------------------

    def _next_index(self) -> int:
        return next(self._counter) & 0x7FFFFFFF

    def _select(self, info: _PublishInfo, last_broker: str | None) -> MessageQueue:
        if not info.queues:
            raise self._no_writable_queue(info)
        faults = self.faults if self.send_latency_fault_enable else None
        return select_one_message_queue(info.queues, last_broker, self._next_index, faults)

    @staticmethod
    def _no_writable_queue(info: _PublishInfo) -> SendError:
        return SendError(
            f"no broker accepts writes for topic {info.topic} (read-only on "
            f"{', '.join(info.read_only) or 'no broker'}; no write queue elsewhere)"
        )

    def _select_by(
        self,
        info: _PublishInfo,
        msg: Message,
        selector: MessageQueueSelector | None,
        arg: Any,
        sharding_key: str | None,
    ) -> MessageQueue:
        queues = info.queues
        if not queues:
            raise self._no_writable_queue(info)
        if sharding_key is not None:
            return queues[abs(java_hash(sharding_key)) % len(queues)]
        try:
            mq = selector(list(queues), msg, arg)  # type: ignore[misc]
        except Exception as exc:
            raise ClientError(
                f"the message queue selector failed for topic {info.topic}: {exc!r}"
            ) from exc
        try:
            known = mq in info.queue_set
        except TypeError:
            known = False
        if not known:
            raise ClientError(
                f"the message queue selector returned {mq!r}, which is not one of the "
                f"{len(queues)} writable queues of topic {info.topic}"
            )
        return mq

    # -- routes -----------------------------------------------------------------------------

    def _publish_info(self, topic: str) -> _PublishInfo:
        info = self._infos.get(topic)
        if info is not None and not info.stale:
            return info
        try:
            fresh = self._fetch_publish_info(topic)
        except ShmqError as exc:
            if info is None:
                raise
            log.info("route of %s not refreshed (%s); keeping the one known", topic, exc)
            info.stale = False
            return info
        self._infos[topic] = fresh
        self._ensure_refresher()
        return fresh

    def _fetch_publish_info(self, topic: str) -> _PublishInfo:
        self.routes.invalidate(topic)
        auto_create = False
        try:
            brokers = self.routes.brokers(topic)
        except NoRouteError as exc:
            try:
                default = self.routes.brokers(AUTO_CREATE_TOPIC_KEY)
            except NoRouteError:
                raise exc from None
            auto_create = True
            n = self.default_topic_queue_nums
            brokers = [
                BrokerQueues(b.broker_name, b.address, min(n, b.read_queue_nums),
                             min(n, b.write_queue_nums), b.perm)
                for b in default
            ]  # fmt: skip
        writable = {b.broker_name: b for b in brokers if b.perm & PERM_WRITE}
        queues = [
            MessageQueue(topic, name, q)
            for name in sorted(writable)
            for q in range(writable[name].write_queue_nums)
        ]
        read_only = tuple(sorted(b.broker_name for b in brokers if not b.perm & PERM_WRITE))
        log.info("producer %s: route of %s: %d writable queues on %s%s", self.group, topic,
                 len(queues), ", ".join(f"{b.broker_name} ({b.address})" for b in writable.values())
                 or "no broker", " (auto-create)" if auto_create else "")  # fmt: skip
        return _PublishInfo(topic, writable, queues, frozenset(queues), auto_create, read_only)

    def _invalidate(self, topic: str) -> None:
        """Refresh the topic's route before the next send (after a failed attempt)."""
        info = self._infos.get(topic)
        if info is not None:
            info.stale = True
        self.routes.invalidate(topic)

    def _ensure_refresher(self) -> None:
        if self._refresher is not None or self._closed:
            return
        with self._lock:
            if self._refresher is None and not self._closed:
                self._refresher = threading.Thread(
                    target=self._refresh_loop, name=f"shmq-routes-{self.group}", daemon=True
                )
                self._refresher.start()

    def _refresh_loop(self) -> None:
        """Every ``poll_name_server_interval``: the routes of the topics used (RocketMQ's
        ``updateTopicRouteInfoFromNameServer``); a failed refresh keeps the known route."""
        while not self._stop.wait(self.poll_name_server_interval):
            for topic in list(self._infos):
                if self._stop.is_set():
                    return
                try:
                    self._infos[topic] = self._fetch_publish_info(topic)
                except ShmqError as exc:
                    log.debug("route of %s not refreshed: %s", topic, exc)
                except Exception:
                    log.exception("route refresh of %s failed", topic)

    # -- links ------------------------------------------------------------------------------

    def _link_for(self, broker: BrokerQueues) -> _Link:
        """The current link to ``broker``, registering with it on first use; raises a
        retryable ``_AttemptError`` when the broker cannot be reached."""
        name = broker.broker_name
        link = self._links.get(name)
        if link is not None and link.address == broker.address and not link.retired:
            return link
        if self._closed:
            raise ClientError("the producer is closed")
        with self._connect_lock:
            link = self._links.get(name)
            if link is not None and link.address == broker.address and not link.retired:
                return link
            try:
                broker_link = BrokerLink(self.client, broker.address, self.group, "producer")
            except ShmqError as exc:
                raise _AttemptError(
                    f"cannot register with broker {name} ({broker.address}): {exc}",
                    retryable=True,
                ) from exc
            try:
                ring_producer = RingProducer(
                    broker_link.info, broker_link.counters, broker_link.registry, self.spin_us,
                    self.default_topic_queue_nums,
                )  # fmt: skip
            except ShmqError as exc:
                broker_link.close()
                raise _AttemptError(
                    f"cannot attach the ring of broker {name} ({broker.address}): {exc}",
                    retryable=True,
                ) from exc
            link = _Link(broker_link, ring_producer)
            log.info("producer %s: registered with broker %s (%s): ring of %d KiB, born host %s",
                     self.group, name, broker.address, ring_producer.capacity >> 10,
                     broker_link.born_host_text)  # fmt: skip
            with self._lock:
                closed = self._closed
                if not closed:
                    old = self._links.get(name)
                    self._links[name] = link
                    self._all_links = (*self._all_links, link)
            if closed:
                link.close()
                raise ClientError("the producer is closed")
            if old is not None:
                self._retire(old)
            return link

    def _leave(self, link: _Link) -> None:
        """A sync send is done with ``link``."""
        with link.lock:
            link.users -= 1
        if link.retired:
            self._close_if_unused(link)

    def _retire(self, link: _Link) -> None:
        """No new sends on ``link``; it is closed once no send uses it."""
        with self._lock:
            if self._links.get(link.broker_name) is link:
                del self._links[link.broker_name]
        link.retired = True
        self._close_if_unused(link)

    def _close_if_unused(self, link: _Link) -> None:
        with link.lock:
            close = link.unused()
            if close:
                link.closed = True
        if not close:
            return
        with self._lock:
            self._all_links = tuple(other for other in self._all_links if other is not link)
        try:
            link.close()
        except Exception as exc:  # the broker may be gone: nothing to give back then
            log.debug("closing the link to %s: %s", link.broker_name, exc)

    def _update_fault(self, broker: str, started: float, isolation: bool) -> None:
        if self.send_latency_fault_enable:
            self.faults.update(broker, (time.monotonic() - started) * 1000, isolation)

    # -- checks -----------------------------------------------------------------------------

    def _check_topic(self, topic: str) -> None:
        validate_topic(topic)
        if topic in NOT_ALLOWED_SEND_TOPICS:
            raise InvalidTopicError(f"sending to the system topic {topic} is forbidden")
        if topic == AUTO_CREATE_TOPIC_KEY:
            raise InvalidTopicError(
                f"topic {topic} is the auto-create template (AUTO_CREATE_TOPIC_KEY_TOPIC); "
                f"send to a topic of your own"
            )

    def _prepare(self, messages: Sequence[Message], selector: Any, sharding_key: Any) -> _Batch:
        """RocketMQ's ``Validators.checkMessage`` for every message, then encode them."""
        if selector is not None and sharding_key is not None:
            raise ClientError("give a selector or a sharding_key, not both")
        if selector is not None and not callable(selector):
            raise ClientError(f"selector must be callable, not {type(selector).__name__}")
        if sharding_key is not None and not isinstance(sharding_key, str):
            raise ClientError(f"sharding_key must be a str, not {type(sharding_key).__name__}")
        topic = None
        limit = self.max_message_size
        for m in messages:
            if not isinstance(m, Message):
                raise InvalidMessageError(f"expected a Message, not {type(m).__name__}")
            if topic is None:
                topic = m.topic
                self._check_topic(topic)
            elif m.topic != topic:
                raise ClientError(f"a batch holds messages of one topic only: {topic}, {m.topic}")
            body = m.body
            if not isinstance(body, bytes | bytearray | memoryview):
                raise InvalidMessageError(
                    f"message to topic {topic}: body must be bytes, not {type(body).__name__}"
                )
            size = len(body)
            if size == 0:
                raise MessageTooLargeError(
                    f"message to topic {topic}: the body is empty; bodies must be 1..{limit} "
                    f"bytes (maxMessageSize)"
                )
            if size > limit:
                raise MessageTooLargeError(
                    f"message to topic {topic}: the body is {size} bytes, above "
                    f"maxMessageSize {limit}"
                )
        if self._closed:
            raise ClientError("the producer is closed")
        uniq = [self._uniq_key() for _ in range(len(messages))]
        return _Batch(topic, messages, uniq)  # type: ignore[arg-type]

    # -- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        """Finish: outstanding async sends are answered or failed (within the send timeout
        plus the flush timeout), threads stop, registrations with the brokers end."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            links = list(self._all_links)
        for link in links:  # appends under way end; later ones see _closed
            with link.lock:
                pass
        self._stop.set()
        self._closing = True
        completer = self._completer
        if completer is not None:
            self._wake.set()
            completer.join(self.send_timeout + 10.0)
            if completer.is_alive():
                log.warning("producer %s: the completion thread did not stop", self.group)
        with self._lock:
            links = list(self._all_links)
        if completer is None or not completer.is_alive():
            for link in links:  # nothing reads these answers any more
                while link.pending:
                    entry = link.pending.popleft()
                    _settle(entry.future, exc=ClientError(
                        f"the producer was closed before broker {entry.mq.broker_name} "
                        f"answered the send to {entry.mq.topic}"
                    ))  # fmt: skip
        for link in links:
            self._retire(link)
        if self._refresher is not None:
            self._refresher.join(5.0)
        self.client.close()

    shutdown = close

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def stats(self) -> dict:
        """Brokers linked (the current link of each; a retired one while sends still use
        it), async sends in flight, latency faults, failures and retries so far."""
        with self._lock:
            links = {
                link.broker_name: {"address": link.address, "retired": link.retired,
                                   "in_flight_async": len(link.pending),
                                   "sync_waiting": link.users,
                                   "parks": link.ring.parking.parks,
                                   "missed_wakeups": link.ring.parking.missed_wakeups}
                for link in sorted(self._all_links, key=lambda link: not link.retired)
            }  # fmt: skip
        return {
            "group": self.group,
            "topics": sorted(self._infos),
            "brokers": links,
            "faults": {
                item.name: {
                    "latency_ms": item.current_latency,
                    "available": self.faults.is_available(item.name),
                }
                for item in self.faults.items()
            },
            **dict(self._stats),
        }

    def _uniq_key(self) -> str:
        """RocketMQ's ``MessageClientIDSetter`` layout: host, pid, a per-instance random
        part, milliseconds and a counter, 32 hex digits."""
        ms = (time.time_ns() // 1_000_000) & 0xFFFFFFFF
        return f"{self._uniq_prefix}{ms:08X}{next(self._uniq_seq) & 0xFFFF:04X}"


def _status_of_list(results: list[SendResult]) -> SendStatus:
    for r in results:
        if r.send_status is not SendStatus.SEND_OK:
            return r.send_status
    return SendStatus.SEND_OK


def _status_of_bulk(result: BulkSendResult) -> SendStatus:
    return result.send_status


def _logged(callback: Callable[[Future], Any]) -> Callable[[Future], None]:
    def call(future: Future) -> None:
        try:
            callback(future)
        except Exception:
            log.exception("send_async callback %r failed", callback)

    return call


def _uniq_prefix() -> str:
    try:
        ip = socket.inet_aton(socket.gethostbyname(socket.gethostname()))
    except OSError:
        ip = socket.inet_aton("127.0.0.1")
    return f"{ip.hex().upper()}{os.getpid() & 0xFFFF:04X}{random.getrandbits(32):08X}"
