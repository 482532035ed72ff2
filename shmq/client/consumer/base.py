"""What push and pull consumers share: subscriptions, the client instance, the offset store,
rebalancing, and the service thread that runs the periodic tasks.

The service thread wakes for whichever is due first: a rebalance (every
``rebalance_interval``, 20 s, and at once when the broker reports that the group changed),
a heartbeat (``heartbeat_interval``, 30 s), persisting offsets
(``persist_consumer_offset_interval``, 5 s), and the subclass's own ``_tick``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future

from shmq.client.consumer.allocate import AllocateMessageQueueStrategy, allocation_strategy
from shmq.client.consumer.offset_store import (
    LocalFileOffsetStore,
    OffsetStore,
    RemoteBrokerOffsetStore,
)
from shmq.client.consumer.process_queue import ProcessQueue
from shmq.client.consumer.rebalance import (
    Rebalance,
    default_consume_timestamp,
    parse_consume_timestamp,
)
from shmq.client.consumer.running_info import running_info
from shmq.client.consumer.subscription import Subscription
from shmq.client.instance import ClientInstance
from shmq.client.producer.producer import trace_dispatcher
from shmq.client.selector import MessageSelector
from shmq.client.trace.consume_hook import ConsumeMessageTraceHook
from shmq.client.transport.chooser import check_transport
from shmq.client.types import ConsumeFromWhere, MessageModel, MessageQueue
from shmq.errors import ClientError, ConfigError, RemotingError, ShmqError
from shmq.message import validate_topic
from shmq.remoting.protocol import RemotingCommand
from shmq.remoting.security.credentials import Credentials
from shmq.remoting.security.tls import TlsOptions, tls_options

log = logging.getLogger(__name__)

DEFAULT_OFFSET_DIR = "~/.shmq_offsets"
# RocketMQ's persistConsumerOffsetInterval: how often committed offsets go to the broker
# (or the offset file), so a consumer that dies re-delivers at most this much.
PERSIST_CONSUMER_OFFSET_INTERVAL = 5.0


def _positive(name: str, value: float) -> float:
    if not value > 0:
        raise ConfigError(f"{name} must be > 0, not {value!r}")
    return value


class ConsumerBase:
    """What every consumer shares. Of its options, ``credentials`` (``(access_key,
    secret_key)``) signs every request, to the namesrvs too, for brokers with ACL on, and
    ``tls`` (True, or a ``TlsOptions``) connects with TLS; both are checked here, before
    ``start`` opens anything. ``enable_msg_trace`` writes RocketMQ's message trace
    (SubBefore and SubAfter records of what the consumer consumed) to ``trace_topic`` in the
    background (``shmq.client.trace``); off, it costs nothing."""

    consume_type = "CONSUME_PASSIVELY"
    consume_timeout = 15 * 60.0  # seconds: a traced listener call this long ends as TIME_OUT

    def __init__(
        self,
        group: str,
        namesrv: str,
        *,
        message_model: MessageModel | str = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere | str = ConsumeFromWhere.LAST_OFFSET,
        consume_timestamp: str | None = None,
        allocate_strategy: AllocateMessageQueueStrategy | str = "AVG",
        rebalance_interval: float = 20.0,
        heartbeat_interval: float = 30.0,
        persist_consumer_offset_interval: float = PERSIST_CONSUMER_OFFSET_INTERVAL,
        offset_store_dir: str = DEFAULT_OFFSET_DIR,
        instance_name: str = "DEFAULT",
        spin_us: int = 20,
        transport: str = "auto",
        poll_name_server_interval: float = 30.0,
        credentials: Credentials | tuple[str, str] | None = None,
        tls: bool | TlsOptions | None = None,
        enable_msg_trace: bool = False,
        trace_topic: str | None = None,
    ) -> None:
        try:
            validate_topic(group)
        except ShmqError as exc:
            raise ConfigError(f"consumer group {group!r} is not a valid name") from exc
        self.group = group
        self.namesrv = namesrv
        self.message_model = _enum(MessageModel, message_model, "message_model")
        self.consume_from_where = _enum(ConsumeFromWhere, consume_from_where, "consume_from_where")
        self.consume_timestamp = consume_timestamp or default_consume_timestamp()
        parse_consume_timestamp(self.consume_timestamp)
        self.strategy = (
            allocation_strategy(allocate_strategy)
            if isinstance(allocate_strategy, str)
            else allocate_strategy
        )
        self.rebalance_interval = _positive("rebalance_interval", rebalance_interval)
        self.heartbeat_interval = _positive("heartbeat_interval", heartbeat_interval)
        self.poll_name_server_interval = _positive(
            "poll_name_server_interval", poll_name_server_interval
        )
        self.persist_interval = _positive(
            "persist_consumer_offset_interval", persist_consumer_offset_interval
        )
        self.offset_store_dir = offset_store_dir
        self.instance_name = instance_name
        self.spin_us = spin_us
        self.transport = check_transport(transport)
        self.credentials = Credentials.of(credentials)
        self.tls = tls_options(tls)
        self.enable_msg_trace = enable_msg_trace
        self.trace_topic = trace_topic
        self._trace: ConsumeMessageTraceHook | None = None
        self._subs: dict[str, Subscription] = {}
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._rebalance_now = threading.Event()
        self._started = False
        self.started_ms = 0
        self._closed = False
        self.instance: ClientInstance | None = None
        self.offsets: OffsetStore | None = None
        self.rebalance: Rebalance | None = None
        self._service: threading.Thread | None = None

    # -- subscriptions --------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str | MessageSelector | None = "*") -> None:
        """Consume ``topic``, filtered by a tag expression (``*`` or ``TagA || TagB``) or a
        ``MessageSelector`` (``by_sql``: a SQL92 property filter, on brokers with
        ``enablePropertyFilter=true``); subscribing again replaces the expression."""
        sub = Subscription.parse(topic, expression)
        with self._lock:
            self._subs[topic] = sub
        self._subscriptions_changed()

    def unsubscribe(self, topic: str) -> None:
        with self._lock:
            self._subs.pop(topic, None)
        self._subscriptions_changed()

    def subscriptions(self) -> list[Subscription]:
        with self._lock:
            return list(self._subs.values())

    def _subscriptions_changed(self) -> None:
        if self._started:
            self._heartbeat()
            self._rebalance_now.set()

    # -- lifecycle ---------------------------------------------------------------------------------

    def _start_base(self, name: str) -> None:
        if self._closed:
            raise ClientError(f"the consumer of group {self.group} is closed")
        if self._started:
            raise ClientError(f"the consumer of group {self.group} is already started")
        self.instance = ClientInstance(
            self.group,
            self.namesrv,
            consume_type=self.consume_type,
            message_model=self.message_model,
            consume_from_where=self.consume_from_where,
            subscriptions=self.subscriptions,
            on_ids_changed=self._rebalance_now.set,
            on_reset_offset=self._reset_offsets,
            running_info=self.running_info,
            offset_table=self._offset_table,
            consume_directly=self._consume_directly,
            spin_us=self.spin_us,
            transport=self.transport,
            poll_name_server_interval=self.poll_name_server_interval,
            credentials=self.credentials,
            tls=self.tls,
        )
        if self.message_model is MessageModel.BROADCASTING:
            self.offsets = LocalFileOffsetStore(
                self.offset_store_dir, self.instance_name, self.group
            )
        else:
            self.offsets = RemoteBrokerOffsetStore(self.instance.reader)
        self.rebalance = Rebalance(
            self.instance,
            self.message_model,
            self.strategy,
            self.offsets,
            self.consume_from_where,
            self.consume_timestamp,
        )
        if self.enable_msg_trace:
            dispatcher = trace_dispatcher(self.group, "CONSUME", self.namesrv, self.trace_topic,
                                          self.transport, self.credentials, self.tls)  # fmt: skip
            self._trace = ConsumeMessageTraceHook(self.group, dispatcher, self.consume_timeout)
        self._started = True
        self.started_ms = int(time.time() * 1000)
        self._heartbeat()
        self.do_rebalance()
        self._service = threading.Thread(target=self._service_loop, name=name, daemon=True)
        self._service.start()

    def _stop_base(self) -> None:
        """Stop the service thread, persist every offset, leave the group."""
        self._stop.set()
        self._rebalance_now.set()
        if self._service is not None:
            self._service.join(10)
        if self.offsets is not None:
            self.offsets.persist()
        if self.instance is not None:
            self.instance.close()
        if self._trace is not None:  # the last listener calls are traced by now
            self._trace.shutdown()

    def _service_loop(self) -> None:
        now = time.monotonic()
        due = {
            "rebalance": now + self.rebalance_interval,
            "heartbeat": now + self.heartbeat_interval,
            "persist": now + self.persist_interval,
        }
        while not self._stop.is_set():
            timeout = max(0.0, min(min(due.values()), self._next_tick()) - time.monotonic())
            triggered = self._rebalance_now.wait(timeout)
            if self._stop.is_set():
                return
            now = time.monotonic()
            try:
                if now >= due["heartbeat"]:
                    due["heartbeat"] = now + self.heartbeat_interval
                    self._heartbeat()
                if triggered or now >= due["rebalance"]:
                    self._rebalance_now.clear()
                    due["rebalance"] = now + self.rebalance_interval
                    self.do_rebalance()
                if now >= due["persist"]:
                    due["persist"] = now + self.persist_interval
                    self.persist_offsets()
                self._tick(now)
            except Exception:
                log.exception("consumer %s: periodic task failed", self.group)

    def _next_tick(self) -> float:
        """When the subclass's ``_tick`` wants to run next (monotonic)."""
        return time.monotonic() + 1.0

    def _tick(self, now: float) -> None:
        """The subclass's periodic work (consume timeouts, delayed re-consumption)."""

    def _heartbeat(self) -> None:
        if self.instance is not None:
            self.instance.heartbeat()

    def persist_offsets(self) -> None:
        if self.offsets is not None:
            self.offsets.persist()

    # -- rebalance -------------------------------------------------------------------------------

    def do_rebalance(self) -> None:
        """Recompute this consumer's queues now (also runs every ``rebalance_interval``)."""
        if self.rebalance is None:
            return
        subs = self.subscriptions()
        topics = {s.topic for s in subs}
        for topic in topics:
            allocated = self.rebalance.allocate(topic)
            if allocated is not None:
                self._apply_assignment(topic, allocated)
        for topic in self._assigned_topics() - topics:
            self._apply_assignment(topic, set())

    def _assigned_topics(self) -> set[str]:
        with self._lock:
            return {mq.topic for mq in self._holdings()}

    def _apply_assignment(self, topic: str, queues: set[MessageQueue]) -> None:
        """Drop the queues of ``topic`` no longer allocated here and start the new ones
        from the group's stored offset (or ``consume_from_where``)."""
        with self._lock:
            current = queues_of(topic, self._holdings())
        removed, added = current - queues, queues - current
        for mq in sorted(removed):
            self._drop(mq)
            self._release(mq)
        for mq in sorted(self._acquire(added)):
            self.offsets.remove(mq)  # RocketMQ's removeDirtyOffset
            try:
                offset = self.rebalance.start_offset(mq)
            except (RemotingError, ShmqError) as exc:
                log.warning("consumer %s: cannot start %s: %s", self.group, mq, exc)
                continue
            with self._lock:
                self._hold(mq, offset)
        if removed or added:
            with self._lock:
                now = sorted(mq.queue_id for mq in queues_of(topic, self._holdings()))
            log.info("consumer %s (%s) rebalanced %s: now %s", self.group,
                     self.instance.client_id, topic, now)  # fmt: skip
            self.instance.reader.wake()

    def _holdings(self) -> Iterable[MessageQueue]:
        """The queues this consumer reads now (call with ``_lock`` held)."""
        raise NotImplementedError

    # -- running info (GET_CONSUMER_RUNNING_INFO) ---------------------------------------------

    def running_info(self, jstack: bool = False) -> dict:
        """RocketMQ's ``ConsumerRunningInfo`` of this consumer now, as a broker passes it
        to an admin (``shmq.client.consumer.running_info``)."""
        return running_info(self, jstack)

    def _offset_table(self) -> dict[MessageQueue, int]:
        """The offsets this consumer holds in memory (GET_CONSUMER_STATUS_FROM_CLIENT)."""
        return self.offsets.snapshot() if self.offsets is not None else {}

    def _consume_directly(self, request: RemotingCommand) -> Future | None:
        """CONSUME_MESSAGE_DIRECTLY's answer (``consume_directly``); None: this kind of
        consumer does not consume a message on request."""
        return None

    def _process_queue(self, mq: MessageQueue) -> ProcessQueue | None:
        """The process queue of a held queue, if the consumer keeps one (``_lock`` held)."""
        return None

    def _running_properties(self) -> dict[str, str]:
        """Properties of this kind of consumer for its running info."""
        return {}

    def running_counters(self) -> dict[str, int]:
        """Counters for its running info's ``userConsumerInfo``."""
        return {}

    def _hold(self, mq: MessageQueue, offset: int) -> None:
        """Start reading ``mq`` at ``offset`` (called with ``_lock`` held)."""
        raise NotImplementedError

    def _drop(self, mq: MessageQueue) -> None:
        """Stop reading ``mq`` (a rebalance took it away)."""
        raise NotImplementedError

    def _acquire(self, queues: set[MessageQueue]) -> set[MessageQueue]:
        """Which of the queues a rebalance gave this consumer it may start now (an orderly
        consumer: those it could lock)."""
        return queues

    def _reset_offsets(self, topic: str, table: dict[MessageQueue, int]) -> None:
        raise NotImplementedError

    def _release(self, mq: MessageQueue) -> None:
        """A queue taken away: persist its offset (clustering: the next owner starts
        there) and forget it."""
        assert self.offsets is not None
        if self.message_model is MessageModel.CLUSTERING:
            self.offsets.persist([mq])
            self.offsets.remove(mq)

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        raise NotImplementedError


def _enum(kind, value, name: str):
    if isinstance(value, kind):
        return value
    text = str(value).upper()
    for member in kind:
        if text in (member.name, member.value):
            return member
    names = ", ".join(m.name for m in kind)
    raise ConfigError(f"{name} {value!r} is not one of {names}")


def queues_of(topic: str, queues: Iterable[MessageQueue]) -> set[MessageQueue]:
    return {mq for mq in queues if mq.topic == topic}
