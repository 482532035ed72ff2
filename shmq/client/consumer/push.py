"""The push consumer: a listener called with messages as they arrive (RocketMQ's
``DefaultMQPushConsumer`` with a concurrent listener).

One pull thread reads the assigned queues straight from the store's mapped files into each
queue's process queue, and hands each pulled batch to a pool of ``consume_thread_max``
threads that call the listener with ``consume_message_batch_max_size`` messages at a time (a
listener that averages under 100 µs per batch is called by the pull thread itself while no
other call runs: the hand-off would cost more than the call). The committed offset of a queue is
the smallest offset still in its process queue, so what was in flight when a consumer died
is delivered again (at-least-once) and nothing is skipped.

Example::

    def on_message(msgs, ctx):
        for msg in msgs:
            print(msg.topic, msg.queue_offset, msg.body)
        return ConsumeResult.CONSUME_SUCCESS

    consumer = PushConsumer("OrderWorkers", "127.0.0.1:9876", listener=on_message)
    consumer.subscribe("Orders", "Paid || Shipped")
    consumer.start()
    ...
    consumer.shutdown()
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor

from prometheus_client import CollectorRegistry

from shmq.client.consumer.base import ConsumerBase, queues_of
from shmq.client.consumer.consume_directly import consume_directly
from shmq.client.consumer.consume_retry import MessageBack, restore_topics
from shmq.client.consumer.listener_calls import call_in_chunks, call_listener
from shmq.client.consumer.listener_pace import InlineCall, ListenerPace
from shmq.client.consumer.orderly import OrderlyConsumption
from shmq.client.consumer.process_queue import ProcessQueue
from shmq.client.consumer.subscription import Subscription
from shmq.client.metrics import ClientMetrics, client_id
from shmq.client.transport.queue_reader import MAX_BULK_PULL, MAX_PULL, Follower
from shmq.client.types import ConsumeContext, ConsumeResult, MessageModel, MessageQueue, PullStatus
from shmq.errors import ClientError, ConfigError, RemotingError, ShmqError
from shmq.message import MessageBatch, MessageExt
from shmq.names import retry_topic
from shmq.remoting.protocol import RemotingCommand

log = logging.getLogger(__name__)

Listener = Callable[[list[MessageExt] | MessageBatch, ConsumeContext], ConsumeResult]

FLOW_CONTROL_DELAY_S = 0.05  # RocketMQ's PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL
EXCEPTION_DELAY_S = 3.0  # RocketMQ's PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION
TIMEOUT_DELAY_LEVEL = 3  # a message whose listener ran past consume_timeout (cleanExpireMsg)
MIB = 1024 * 1024
# a queue's turn in a pass of the pull loop (``_pull_due``)
_WAIT, _AGAIN, _LATER, _SKIP = object(), object(), object(), object()


_request_seq = itertools.count()


class ConsumeRequest:
    """Messages of one pull of one queue, consumed by one consume thread: the listener is
    called with chunks of ``consume_message_batch_max_size`` of them, in order, and the
    process queue and offset are updated once for the whole request (a thread hand-off and
    two locks per message would cost more than a no-op listener)."""

    __slots__ = (
        "abandoned", "arrived", "delay_level", "mq", "msgs", "pq", "seq", "settled", "started"
    )  # fmt: skip

    def __init__(
        self, msgs: list[MessageExt] | MessageBatch, pq: ProcessQueue, mq: MessageQueue
    ) -> None:
        self.msgs = msgs
        self.pq = pq
        self.mq = mq
        self.arrived = time.monotonic()
        self.started = 0.0
        self.abandoned = False  # consume_timeout passed: finished without the listener's result
        self.settled = False  # finished, by its consume thread or on its timeout (``_settle``)
        self.delay_level = 0  # the listener's delay_level_when_next_consume, for a send-back
        self.seq = next(_request_seq)


def _check_range(name: str, value: int, low: int, high: int, allow_unset: bool = False) -> None:
    if allow_unset and value == -1:
        return
    if not low <= value <= high:
        unset = " or -1" if allow_unset else ""
        raise ConfigError(f"{name} must be in [{low}, {high}]{unset}, not {value!r}")


class PushConsumer(ConsumerBase):
    """Consumes subscribed topics with a listener, in a consumer group.

    Defaults are RocketMQ's (times in seconds here): ``consume_thread_min``/``max`` 20
    (Python's pool starts threads on demand up to the max), ``consume_message_batch_max_size``
    1, ``pull_batch_size`` 32, ``pull_interval`` 0, ``pull_threshold_for_queue`` 1000
    messages, ``pull_threshold_size_for_queue`` 100 MiB, topic-level thresholds off (-1;
    when set they are divided over the queues held), ``consume_concurrently_max_span`` 2000,
    ``consume_timeout`` 15 minutes. A listener returns ``ConsumeResult.CONSUME_SUCCESS`` or
    ``RECONSUME_LATER``; raising, returning anything else, or running past
    ``consume_timeout`` counts as ``RECONSUME_LATER``. In clustering the messages go back to
    the broker (``consume_retry``), which redelivers them through ``%RETRY%<group>`` after
    growing delays (10 s, 30 s, 1 min, … ``ConsumeContext.delay_level_when_next_consume``
    picks another level, a negative one sends them straight to the DLQ) and moves them to
    ``%DLQ%<group>`` after ``max_reconsume_times`` (-1: 16); one the broker cannot take back
    is consumed again here after ``reconsume_delay``. In broadcasting failed messages are
    dropped with a log line, as RocketMQ does. A ``bulk`` listener's failed batch is
    consumed again here.

    ``bulk=True`` is the consume side of ``Producer.send_bulk``: the listener gets one
    ``MessageBatch`` per pull (up to ``pull_batch_size``, which may then be up to 65,536)
    instead of a list of ``MessageExt``, and its result applies to the whole batch.

    ``metrics`` (True: the process's default ``prometheus_client`` registry, or a
    ``CollectorRegistry``) records RocketMQ 5's client metrics: delivery latency, await and
    process time, cached messages and bytes (``shmq.client.metrics``); the orderly path
    records delivery latency and process time, not await time (its process queue keeps no
    arrival time per message).

    ``transport`` (``"auto"``, ``"shm"``, ``"tcp"``): a broker whose store is on this host
    is read through shared memory, another over TCP with PULL_MESSAGE and long polling
    (``tcp_pull``); the same for ``PullConsumer``. Routes are taken afresh from the
    namesrv every ``poll_name_server_interval`` seconds (30) and after a failed pull: a
    queue is read from its broker's slave while the master is gone and from the master
    again once it is back (offsets committed meanwhile wait in memory for the master).
    ``credentials`` and ``tls``: see ``ConsumerBase``; the same for ``PullConsumer``.

    Example::

        with PushConsumer("Telemetry", listener=lambda msgs, ctx: ConsumeResult.CONSUME_SUCCESS
                          ) as consumer:
            consumer.subscribe("Metrics")
            consumer.start()
            time.sleep(60)
    """

    def __init__(
        self,
        group: str,
        namesrv: str = "127.0.0.1:9876",
        *,
        listener: Listener | None = None,
        consume_thread_min: int = 20,
        consume_thread_max: int = 20,
        consume_message_batch_max_size: int = 1,
        pull_batch_size: int = 32,
        pull_interval: float = 0.0,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_size_for_queue: int = 100,
        pull_threshold_for_topic: int = -1,
        pull_threshold_size_for_topic: int = -1,
        consume_concurrently_max_span: int = 2000,
        consume_timeout: float = 15 * 60.0,
        reconsume_delay: float = 5.0,
        max_reconsume_times: int = -1,
        await_termination: float = 10.0,
        bulk: bool = False,
        orderly: bool = False,
        suspend_current_queue_time_millis: int = 1000,
        metrics: bool | CollectorRegistry = False,
        **options,
    ) -> None:
        super().__init__(group, namesrv, **options)
        _check_range("consume_thread_min", consume_thread_min, 1, 1000)
        _check_range("consume_thread_max", consume_thread_max, consume_thread_min, 1000)
        _check_range("consume_message_batch_max_size", consume_message_batch_max_size, 1, 1024)
        _check_range("pull_batch_size", pull_batch_size, 1, MAX_BULK_PULL if bulk else MAX_PULL)
        _check_range("pull_threshold_for_queue", pull_threshold_for_queue, 1, 65535)
        _check_range("pull_threshold_size_for_queue", pull_threshold_size_for_queue, 1, 1024)
        _check_range("pull_threshold_for_topic", pull_threshold_for_topic, 1, 6553500, True)
        _check_range("pull_threshold_size_for_topic", pull_threshold_size_for_topic, 1, 102400,
                     True)  # fmt: skip
        _check_range("consume_concurrently_max_span", consume_concurrently_max_span, 1, 65535)
        if pull_interval < 0 or consume_timeout <= 0 or reconsume_delay < 0:
            raise ConfigError("pull_interval and reconsume_delay must be >= 0, consume_timeout > 0")
        self.listener = listener
        self.consume_thread_min = consume_thread_min
        self.consume_thread_max = consume_thread_max
        self.batch_max = consume_message_batch_max_size
        self.pull_batch_size = pull_batch_size
        self.bulk = bulk
        if orderly and bulk:
            raise ConfigError("a consumer is orderly or bulk, not both")
        if suspend_current_queue_time_millis < 0:
            raise ConfigError("suspend_current_queue_time_millis must be >= 0")
        self.orderly = orderly
        self.suspend_current_queue_time_millis = suspend_current_queue_time_millis
        self._orderly: OrderlyConsumption | None = None
        self.pull_interval = pull_interval
        self.threshold_queue = pull_threshold_for_queue
        self.threshold_size_queue = pull_threshold_size_for_queue
        self.threshold_topic = pull_threshold_for_topic
        self.threshold_size_topic = pull_threshold_size_for_topic
        # the queue limits depend on the queues held only with a topic-level threshold
        self._topic_limited = pull_threshold_for_topic != -1 or pull_threshold_size_for_topic != -1
        self.max_span = consume_concurrently_max_span
        self.consume_timeout = consume_timeout
        self.reconsume_delay = reconsume_delay
        if max_reconsume_times < -1:
            raise ConfigError(f"max_reconsume_times {max_reconsume_times} is below -1")
        self.max_reconsume_times = max_reconsume_times
        self._back: MessageBack | None = None
        self._retry_topic = retry_topic(group)
        self.await_termination = await_termination
        self._table: dict[MessageQueue, ProcessQueue] = {}
        self._running: dict[int, ConsumeRequest] = {}
        self._later: list[tuple[float, int, ConsumeRequest]] = []
        self._pool: ThreadPoolExecutor | None = None
        self._puller: threading.Thread | None = None
        self._pull_gen = 0  # the pull thread of this generation pulls; older ones leave
        self._inline = InlineCall()  # a listener call in the pull thread
        self._pull_wake = threading.Event()  # a flow-controlled queue drained
        self._pace = ListenerPace()  # of a consume request (one pull's messages)
        self.counters = {"consumed": 0, "failed": 0, "flowControlled": 0, "pulled": 0}
        # RocketMQ 5's client metrics (``shmq.client.metrics``), None when off
        self._metrics = ClientMetrics.of(metrics)
        self.metrics_client_id = client_id(group)
        if self._metrics is not None:
            self._metrics.cached.watch(self)

    def cached(self) -> dict[str, tuple[int, int]]:
        """Per topic, the messages and bytes pulled and not consumed yet."""
        with self._lock:
            table = list(self._table.items())
        out: dict[str, tuple[int, int]] = {}
        for mq, pq in table:
            n, size = out.get(mq.topic, (0, 0))
            out[mq.topic] = (n + pq.count, size + pq.size)
        return out

    def register_message_listener(self, listener: Listener) -> None:
        """RocketMQ's ``registerMessageListener``: ``listener(msgs, ctx) -> ConsumeResult``."""
        self.listener = listener

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Join the group, take this consumer's queues and start consuming."""
        if self.listener is None:
            raise ClientError("register a message listener before start()")
        if not self.subscriptions():
            raise ClientError("subscribe to at least one topic before start()")
        self._pool = ThreadPoolExecutor(
            self.consume_thread_max, thread_name_prefix=f"shmq-consume-{self.group}"
        )
        if self.orderly:
            self._orderly = OrderlyConsumption(self)
        if self.message_model is MessageModel.CLUSTERING:  # retries come back through it
            with self._lock:
                self._subs.setdefault(self._retry_topic, Subscription.parse(self._retry_topic))
        self._start_base(f"shmq-push-service-{self.group}")
        if self._trace is not None and not self.bulk:  # before the pull thread calls it
            self.listener = self._trace.wrap(self.listener)
        if self.message_model is MessageModel.CLUSTERING:
            self._back = MessageBack(
                self.instance, self.namesrv, self.group, self.max_reconsume_times
            )
        self._start_puller()

    def _start_puller(self) -> None:
        self._puller = threading.Thread(
            target=self._pull_loop, args=(self._pull_gen,), name=f"shmq-pull-{self.group}",
            daemon=True,
        )  # fmt: skip
        self._puller.start()

    def shutdown(self) -> None:
        """Stop pulling, let running listeners finish (up to ``await_termination``),
        persist offsets and leave the group (the others rebalance at once)."""
        if self._closed:
            return
        self._closed = True
        if not self._started:
            return
        self._stop.set()
        self.instance.reader.wake()
        if self._puller is not None:
            self._puller.join(10)
        self._pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + self.await_termination
        while self._running and time.monotonic() < deadline:
            time.sleep(0.01)
        if self._running:
            log.warning("consumer %s: %d listener calls still running at shutdown", self.group,
                        len(self._running))  # fmt: skip
        if self._orderly is not None:
            self._orderly.shutdown()
        if self._back is not None:
            self._back.close()
        self._stop_base()

    close = shutdown

    # -- rebalance ---------------------------------------------------------------------------------

    def _holdings(self) -> Iterable[MessageQueue]:
        return self._table

    def _consume_directly(self, request: RemotingCommand) -> Future | None:
        if self.bulk or self.listener is None:  # a bulk listener takes batches only
            return None
        return consume_directly(self.listener, self.orderly, request)

    def _process_queue(self, mq: MessageQueue) -> ProcessQueue | None:
        return self._table.get(mq)

    def _running_properties(self) -> dict[str, str]:
        return {
            "PROP_CONSUMEORDERLY": str(self.orderly).lower(),
            "PROP_THREADPOOL_CORE_SIZE": str(self.consume_thread_min),
            "consumeMessageBatchMaxSize": str(self.batch_max),
            "pullBatchSize": str(self.pull_batch_size),
        }

    def running_counters(self) -> dict[str, int]:
        return dict(self.counters)

    def _hold(self, mq: MessageQueue, offset: int) -> None:
        pq = self._table[mq] = ProcessQueue(offset)
        if self._orderly is not None:  # _acquire locked it
            pq.locked, pq.locked_at = True, time.monotonic()

    def _drop(self, mq: MessageQueue) -> None:
        with self._lock:
            pq = self._table.pop(mq)
        pq.dropped = True
        if self._orderly is not None:
            self._orderly.release(mq, pq)

    def _acquire(self, queues: set[MessageQueue]) -> set[MessageQueue]:
        return queues if self._orderly is None else self._orderly.acquire(queues)

    def _release(self, mq: MessageQueue) -> None:
        if self._orderly is None:  # an orderly queue is released after its batch in flight
            self.persist_released(mq)

    def persist_released(self, mq: MessageQueue) -> None:
        super()._release(mq)

    def _reset_offsets(self, topic: str, table: dict[MessageQueue, int]) -> None:
        """RocketMQ's ``resetOffset``: drop the topic's process queues, store the new
        offsets, and let the next rebalance start there."""
        with self._lock:
            doomed = [mq for mq in self._table if mq.topic == topic]
            for mq in doomed:
                self._table.pop(mq).dropped = True
        for mq, offset in table.items():
            self.offsets.update(mq, offset)
        self.offsets.persist(table)
        self._rebalance_now.set()

    def assignment(self) -> list[MessageQueue]:
        """The queues of the subscribed topics this consumer holds now (those of the
        group's retry topic, which it holds too, are in ``stats()``)."""
        with self._lock:
            return sorted(mq for mq in self._table if mq.topic != self._retry_topic)

    def stats(self) -> dict:
        """Counters, each held queue's process-queue state (count, size, offsets), and with
        trace on its trace messages (``trace``)."""
        with self._lock:
            table = dict(self._table)
        return {
            **self.counters,
            "clientId": self.instance.client_id if self.instance else None,
            "queues": {str(mq): pq.stats() for mq, pq in sorted(table.items())},
            **({"trace": self._trace.dispatcher.stats()} if self._trace is not None else {}),
        }

    # -- pulling ----------------------------------------------------------------------------------

    def _limits(self, topic: str) -> tuple[int, int]:
        """(count, bytes) a process queue of ``topic`` may hold."""
        count, size = self.threshold_queue, self.threshold_size_queue * MIB
        if self._topic_limited:
            with self._lock:
                n = max(1, len(queues_of(topic, self._table)))
            if self.threshold_topic != -1:
                count = max(1, self.threshold_topic // n)
            if self.threshold_size_topic != -1:
                size = max(1, self.threshold_size_topic // n) * MIB
        return count, size

    def _pull_loop(self, gen: int) -> None:
        """Pull every due queue, then wait on those read to their end. After a wait that
        names the queues that advanced, the others it watched are waited on again without
        a pull: a paced stream on one queue of a consumer that holds several (its retry
        topic's at least) costs one pull per wake-up, not one per queue (``_follow``)."""
        reader = self.instance.reader
        waited: dict[MessageQueue, int] = {}  # what the last wait watched, at which offsets
        advanced: set[MessageQueue] | None = None  # of those, what it found (None: pull all)
        pull_wake, stop = self._pull_wake, self._stop
        follower = None  # the queues waited on, when one same-host broker holds them all
        while not stop.is_set() and gen == self._pull_gen:
            if pull_wake.is_set():
                pull_wake.clear()
            with self._lock:
                table = dict(self._table)
            now = time.monotonic()
            next_due = now + 1.0
            progressed = False
            waiting = {}
            for mq, pq in table.items():
                if gen != self._pull_gen:
                    return  # a listener held this thread too long: another one pulls now
                unchanged = (advanced is not None and mq not in advanced
                             and waited.get(mq) == pq.next_offset)  # fmt: skip
                turn = self._pull_due(mq, pq, now, follower, unchanged)
                if turn is _WAIT:
                    waiting[mq] = pq.next_offset
                elif turn is _LATER:
                    next_due = min(next_due, pq.next_pull_at)
                elif turn is _AGAIN:
                    progressed = True
            advanced = None
            if progressed or stop.is_set():
                continue
            timeout = max(0.0, next_due - time.monotonic())
            if waiting:
                try:
                    if follower is None or not follower.follows(waiting):
                        follower = reader.follow(waiting)
                    if follower is not None:
                        advanced = set(follower.wait(waiting, timeout)) or None
                        waited = waiting
                        advanced = self._follow(gen, follower, table, waiting, advanced, next_due)
                    else:
                        advanced = set(reader.wait(waiting, timeout)) or None
                        waited = waiting
                except (RemotingError, ShmqError) as exc:
                    log.warning("consumer %s: wait failed: %s", self.group, exc)
                    stop.wait(min(timeout, EXCEPTION_DELAY_S))
            else:
                pull_wake.wait(min(timeout, 0.05))

    def _pull_due(
        self, mq: MessageQueue, pq: ProcessQueue, now: float, follower: Follower | None,
        unchanged: bool,
    ) -> object:  # fmt: skip
        """One queue's turn in a pass of the pull loop: pull it unless it is dropped,
        paused, not due yet (``_LATER``: at ``pq.next_pull_at``), ``unchanged`` since the
        last wait watched it, or held back by flow control. ``_WAIT``: wait on it (read to
        its end, or ``unchanged``), ``_AGAIN``: pull it again at once, ``_SKIP``: neither."""
        orderly = self._orderly
        if pq.dropped or pq.paused or (orderly is not None and not pq.locked):
            return _SKIP
        if now < pq.next_pull_at:
            return _LATER
        if unchanged:
            return _WAIT  # the wait found nothing new on it
        if self._topic_limited:
            count_limit, size_limit = self._limits(mq.topic)
        else:
            count_limit, size_limit = self.threshold_queue, self.threshold_size_queue * MIB
        room = count_limit - pq.count
        spread = orderly is None and pq.count and pq.span() > self.max_span
        if room <= 0 or pq.size > size_limit or spread:
            self.counters["flowControlled"] += 1
            pq.flow_controlled = True
            pq.next_pull_at = now + FLOW_CONTROL_DELAY_S
            return _LATER
        try:
            got, caught_up = self._pull_once(mq, pq, min(room, self.pull_batch_size), follower)
        except (RemotingError, ShmqError) as exc:
            log.warning("consumer %s: pull of %s failed: %s", self.group, mq, exc)
            pq.next_pull_at = now + EXCEPTION_DELAY_S
            return _SKIP
        if got and self.pull_interval:
            pq.next_pull_at = now + self.pull_interval
            return _LATER
        if got and not caught_up:
            return _AGAIN
        return _WAIT  # nothing there, or all there was: wait on the queue, not pull it again

    def _follow(
        self, gen: int, follower: Follower, table: dict[MessageQueue, ProcessQueue],
        waiting: dict[MessageQueue, int], advanced: set[MessageQueue] | None, next_due: float,
    ) -> set[MessageQueue] | None:  # fmt: skip
        """While each queue a wait finds advanced is read to its end again by one pull,
        pull those alone and wait again (``waiting`` follows their offsets): a consumer
        that keeps up costs a pull and a wait per wake-up, and the pass over every held
        queue (their flow limits, pull times, the queues that did not move) is left for
        when something else happens: a wait that finds nothing (its time is up, or a
        rebalance, a drained flow-controlled queue or a stop woke it), a queue with more to
        read, one held back, or ``next_due``. Returns what the next pass should pull (the
        last wait's finding, None: every queue)."""
        stop, pull_wake = self._stop, self._pull_wake
        while advanced:
            now = time.monotonic()
            if now >= next_due or stop.is_set() or pull_wake.is_set() or gen != self._pull_gen:
                return advanced
            for mq in advanced:
                pq = table.get(mq)
                if pq is None or self._pull_due(mq, pq, now, follower, False) is not _WAIT:
                    return None
                waiting[mq] = pq.next_offset
            if not follower.follows(waiting):
                return None
            advanced = set(follower.wait(waiting, max(0.0, next_due - now))) or None
        return None

    def _pull_once(
        self, mq: MessageQueue, pq: ProcessQueue, max_nums: int, follower: Follower | None
    ) -> tuple[int, bool]:
        """Pull ``mq`` once and hand what it found to the listener: (messages taken, whether
        they reached the queue's max offset). A queue read to its end is waited on next; the
        wait returns at once if more came meanwhile. Pulling it again first would cost a
        second pull for every wake-up of a consumer that keeps up (paced traffic). The
        ``follower`` of the queues waited on pulls those it can."""
        sub = self._subs.get(mq.topic)
        if sub is None:
            return 0, False
        reader = self.instance.reader
        offset = pq.next_offset
        if self.bulk:
            result = reader.pull_bulk(mq, offset, max_nums, sub.pull_expression, 0.0)
        else:
            result = None
            if follower is not None:
                result = follower.pull(mq, offset, max_nums, sub.pull_expression)
            if result is None:
                result = reader.pull(mq, offset, max_nums, sub.pull_expression, 0.0)
        pq.last_pull = time.monotonic()
        caught_up = result.next_begin_offset >= result.max_offset
        if result.batch is not None:
            if self._metrics is not None:
                self._metrics.arrived(mq.topic, self.metrics_client_id, self.group,
                                      result.batch.store_timestamps.tolist())  # fmt: skip
            pq.next_offset = result.next_begin_offset
            pq.put_batch(result.batch)
            self.counters["pulled"] += len(result.batch)
            self._submit(ConsumeRequest(result.batch, pq, mq))
            return len(result.batch), caught_up
        if result.pull_status is PullStatus.FOUND:
            msgs = sub.filter(result.messages)
            if mq.topic == self._retry_topic:
                restore_topics(msgs)
            pq.next_offset = result.next_begin_offset
            if msgs:
                if self._metrics is not None:
                    self._metrics.arrived(mq.topic, self.metrics_client_id, self.group,
                                          [m.store_timestamp for m in msgs])  # fmt: skip
                pq.put(msgs)
                self.counters["pulled"] += len(msgs)
                if self._orderly is not None:
                    self._orderly.submit(mq, pq, here=True)
                    return len(msgs), caught_up
                request = ConsumeRequest(msgs, pq, mq)
                if not self._running and self._pace.fast:
                    self._inline.run(self._consume, request)  # no hand-off for a fast listener
                else:
                    self._submit(request)
            return len(msgs), caught_up
        if result.pull_status is PullStatus.OFFSET_ILLEGAL or (
            result.pull_status is PullStatus.NO_MATCHED_MSG
            and result.next_begin_offset == offset
            and offset < result.max_offset
        ):
            fixed = self.rebalance.correct(mq, offset)
            if fixed != offset:
                pq.next_offset = fixed
                self.offsets.update(mq, fixed)
                self.offsets.persist([mq])
            return 0, False
        pq.next_offset = result.next_begin_offset
        if pq.count == 0 and pq.next_offset > offset:
            # filtered-out messages: nothing in flight, so the offset may move past them
            self.offsets.update(mq, pq.next_offset, increase_only=True)
        return 0, False

    # -- consuming --------------------------------------------------------------------------------

    def _hand_over_pulling(self, now: float) -> None:
        """A listener has held the pull thread ``INLINE_HANDOVER_S`` (``InlineCall``): a
        pull thread of the next generation takes over, the old one leaves once the listener
        returns. Calls go to the pool while that one runs, and after it while the
        listener's average time stays above the fast limit."""
        held = self._inline.overdue(now)
        if held is None or self._stop.is_set():
            return
        self._pull_gen += 1
        log.warning("consumer %s: the listener has held the pull thread %.1f s; a new pull "
                    "thread takes over", self.group, held)  # fmt: skip
        self._start_puller()

    def _submit(self, request: ConsumeRequest) -> None:
        with contextlib.suppress(RuntimeError):  # the pool is shut down
            self._pool.submit(self._consume, request)

    def _consume(self, request: ConsumeRequest) -> None:
        pq, msgs = request.pq, request.msgs
        if pq.dropped or self._stop.is_set():
            return
        request.started = time.monotonic()
        self._running[request.seq] = request
        failed = msgs  # until the listener says otherwise
        try:
            if isinstance(msgs, MessageBatch):  # a bulk listener's result covers the batch
                ok = call_listener(self.listener, self.group, msgs, request)
                done, failed = (msgs, []) if ok else ([], msgs)
            else:
                done, failed = call_in_chunks(self.listener, self.group, msgs, request,
                                              self.batch_max)  # fmt: skip
        finally:
            self._running.pop(request.seq, None)
            pq.last_consume = now = time.monotonic()
            self._pace.add(now - request.started, len(msgs))
            if self._metrics is not None:
                self._metrics.consumed(request.mq.topic, self.metrics_client_id, self.group,
                                       request.arrived, request.started, not failed)  # fmt: skip
        if not self._settle(request):
            return  # consume_timeout passed: its messages are consumed again already
        self._finish(request, done, failed, request.delay_level)

    def _settle(self, request: ConsumeRequest, abandon: bool = False) -> bool:
        """Claim the finishing of ``request``: True for the one caller that finishes it, its
        consume thread once the listener returned, or the tick that gives up on it past
        ``consume_timeout`` (``abandon``). The two can meet when the listener returns just
        then; without the claim both finished it, and its messages were counted consumed
        and sent back to be consumed again."""
        with self._lock:
            if request.settled:
                return False
            request.settled = True
            request.abandoned = abandon
            return True

    def _finish(
        self,
        request: ConsumeRequest,
        done: list[MessageExt] | MessageBatch,
        failed: list[MessageExt] | MessageBatch,
        delay_level: int,
    ) -> None:
        self.counters["consumed"] += len(done)
        self.counters["failed"] += len(failed)
        if failed and self._back is not None and not isinstance(failed, MessageBatch):
            kept = self._back.send_back(failed, request.mq, delay_level)
            if len(kept) < len(failed):  # what the broker took back counts as consumed
                keep = set(map(id, kept))
                done = [*done, *(m for m in failed if id(m) not in keep)]
                failed = kept
        if failed and self.message_model is MessageModel.BROADCASTING:
            log.warning("consumer %s: broadcasting, dropping %d failed message(s) of %s",
                        self.group, len(failed), request.mq)  # fmt: skip
            done, failed = request.msgs, []
        if len(failed):
            self._consume_later(ConsumeRequest(failed, request.pq, request.mq))
        if isinstance(done, MessageBatch):
            offset = request.pq.remove_batch(done)
        else:
            offset = request.pq.remove(done)
        if offset >= 0 and not request.pq.dropped:
            self.offsets.update(request.mq, offset, increase_only=True)
        self.drained(request.pq)

    def drained(self, pq: ProcessQueue) -> None:
        """Messages left ``pq``: a queue held back by flow control may pull again."""
        if pq.flow_controlled and pq.count <= self.threshold_queue // 2:
            # pull again now rather than after the flow-control delay: Python consume
            # threads drain a full process queue in far less than RocketMQ's 50 ms
            pq.flow_controlled = False
            pq.next_pull_at = 0.0
            self._pull_wake.set()
            # the pull thread may be parked on the other queues (the retry queue is one)
            self.instance.reader.wake()

    def _consume_later(self, request: ConsumeRequest) -> None:
        if not isinstance(request.msgs, MessageBatch):  # a batch has no per-message count
            for m in request.msgs:
                m.reconsume_times += 1
        with self._lock:
            due = time.monotonic() + self.reconsume_delay
            heapq.heappush(self._later, (due, request.seq, request))

    def _next_tick(self) -> float:
        with self._lock:
            due = self._later[0][0] if self._later else time.monotonic() + 1.0
        if self._orderly is not None:
            due = min(due, self._orderly.next_tick())
        inline_due = self._inline.due()
        if inline_due is not None:
            due = min(due, inline_due)
        return min(due, time.monotonic() + 1.0)

    def _tick(self, now: float) -> None:
        """Resubmit failed messages whose delay is over; give up on listener calls that
        ran past ``consume_timeout`` and consume their messages again."""
        if self._orderly is not None:
            self._orderly.tick(now)
        self._hand_over_pulling(now)
        ready = []
        with self._lock:
            while self._later and self._later[0][0] <= now:
                ready.append(heapq.heappop(self._later)[2])
        for request in ready:
            if not request.pq.dropped:
                self._submit(request)
        for request in list(self._running.values()):
            if now - request.started > self.consume_timeout and self._settle(request, True):
                log.warning("consumer %s: listener ran %.0f s (consume_timeout %g s) on %d"
                            " message(s) of %s; consuming them again", self.group,
                            now - request.started, self.consume_timeout, len(request.msgs),
                            request.mq)  # fmt: skip
                self._finish(request, [], request.msgs, TIMEOUT_DELAY_LEVEL)
