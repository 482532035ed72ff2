"""Orderly consumption for the push consumer (RocketMQ's ``ConsumeMessageOrderlyService``
and the locking half of ``RebalanceImpl``).

A queue is consumed by one thread at a time, in queue-offset order, and only while this
client holds the queue's lock on its broker (``LOCK_BATCH_MQ``, ``queue_locks`` on the
broker side). A rebalance locks a queue before taking it, and lets one go only after its
batch in flight has finished and its offset is persisted (then ``UNLOCK_BATCH_MQ``), so two
members of a group never process one queue at once. Locks are renewed every
``LOCK_INTERVAL_S`` (20 s); one not renewed for ``LOCK_MAX_LIVE_S`` (30 s) on the client
stops the queue's consumption until it is renewed. Queues that could not be locked (another
member still finishing) are tried again every second.

A listener that returns ``SUSPEND_CURRENT_QUEUE_A_MOMENT`` (or raises) gets the same
messages again after ``suspend_current_queue_time_millis`` (1 s), their reconsume times
counted; after ``max_reconsume_times`` (default unlimited) they are sent back to the broker
for the dead-letter queue (``CONSUMER_SEND_MSG_BACK`` with a negative delay level) and the
queue goes on.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from collections import defaultdict
from typing import TYPE_CHECKING

from shmq.client.consumer.consume_retry import restore_topics
from shmq.client.consumer.listener_pace import ListenerPace
from shmq.client.consumer.process_queue import ProcessQueue
from shmq.client.types import ConsumeOrderlyContext, ConsumeOrderlyStatus, MessageQueue
from shmq.errors import RemotingError, ResponseError, ShmqError
from shmq.message import MessageExt
from shmq.remoting.protocol import RemotingCommand, RequestCode, check_response

if TYPE_CHECKING:
    from shmq.client.consumer.push import PushConsumer

log = logging.getLogger(__name__)

LOCK_INTERVAL_S = 20.0  # rocketmq.client.rebalance.lockInterval
LOCK_MAX_LIVE_S = 30.0  # rocketmq.client.rebalance.lockMaxLiveTime (the client's view)
LOCK_RETRY_S = 1.0  # queues allocated here but locked by another member: try again
MAX_TIME_CONSUME_CONTINUOUSLY_S = 60.0  # then the queue yields its thread
NOT_LOCKED_RETRY_S = 0.1
TAKE_BATCH = 64  # listener calls per visit of a queue: the queue is updated once for them
LOCK_TIMEOUT_S = 3.0
UNLIMITED = sys.maxsize  # what max_reconsume_times -1 means for an orderly consumer


class OrderlyConsumption:
    """Locks, renewals and the one-thread-per-queue consume loop of a push consumer."""

    def __init__(self, consumer: PushConsumer) -> None:
        self.c = consumer
        self.suspend_s = consumer.suspend_current_queue_time_millis / 1000
        max_times = consumer.max_reconsume_times
        self.max_reconsume_times = UNLIMITED if max_times < 0 else max_times
        self._running: set[MessageQueue] = set()  # queues with a consume task submitted
        self._pace = ListenerPace()  # of a visit (what one or two pulls brought)
        self._suspended: dict[MessageQueue, float] = {}  # queue -> until (monotonic)
        self._state = threading.Lock()
        self.wanted: set[MessageQueue] = set()  # allocated here, locked by another member
        self._releasing: set[MessageQueue] = set()  # dropped, offset not yet persisted
        self._next_lock_all = time.monotonic() + 1.0

    # -- broker locks ---------------------------------------------------------------------

    def _by_broker(self, queues) -> dict[str, list[MessageQueue]]:
        groups: dict[str, list[MessageQueue]] = defaultdict(list)
        for mq in queues:
            groups[mq.broker_name].append(mq)
        return groups

    def _call(self, code: int, broker_name: str, queues: list[MessageQueue]) -> set:
        instance = self.c.instance
        addr = next(
            (b.address for b in instance.routes.brokers(queues[0].topic)
             if b.broker_name == broker_name),
            None,
        )  # fmt: skip
        if addr is None:
            return set()
        body = {
            "consumerGroup": self.c.group,
            "clientId": instance.client_id,
            "mqSet": [
                {"topic": q.topic, "brokerName": q.broker_name, "queueId": q.queue_id}
                for q in queues
            ],
        }
        request = RemotingCommand.request(code, body=RemotingCommand.body_json(body))
        response = check_response(instance.channel(addr).invoke(request, timeout=LOCK_TIMEOUT_S))
        if code != RequestCode.LOCK_BATCH_MQ:
            return set()
        locked = (response.json_body() or {}).get("lockOKMQSet", [])
        return {MessageQueue(e["topic"], e["brokerName"], int(e["queueId"])) for e in locked}

    def lock(self, queues) -> set[MessageQueue]:
        """Lock (or renew) ``queues`` on their brokers; returns those held now."""
        held: set[MessageQueue] = set()
        for broker_name, mqs in self._by_broker(queues).items():
            try:
                held |= self._call(RequestCode.LOCK_BATCH_MQ, broker_name, mqs)
            except (RemotingError, ResponseError, ShmqError) as exc:
                log.warning("consumer %s: cannot lock %d queue(s) on %s: %s",
                            self.c.group, len(mqs), broker_name, exc)  # fmt: skip
        self.wanted.difference_update(held)
        self.wanted.update(set(queues) - held)
        return held

    def unlock(self, queues) -> None:
        for broker_name, mqs in self._by_broker(queues).items():
            try:
                self._call(RequestCode.UNLOCK_BATCH_MQ, broker_name, mqs)
            except (RemotingError, ResponseError, ShmqError) as exc:
                log.warning("consumer %s: cannot unlock %d queue(s) on %s (they lapse): %s",
                            self.c.group, len(mqs), broker_name, exc)  # fmt: skip

    def acquire(self, queues: set[MessageQueue]) -> set[MessageQueue]:
        """The rebalance's new queues that could be locked (the rest are tried again). A
        queue this member dropped and has not yet released is not taken back until it is:
        its committed offset is behind what was consumed, and the release would unlock it
        under the new owner (RocketMQ keeps such a queue in its table until released)."""
        with self._state:
            pending = queues & self._releasing
        if pending:
            self.wanted.update(pending)
            queues = queues - pending
        return self.lock(queues) if queues else set()

    def lock_all(self) -> None:
        """Renew every held queue's lock (RocketMQ's ``lockAll``); a queue whose lock is
        lost stops until it is locked again."""
        with self.c._lock:
            table = dict(self.c._table)
        if not table:
            return
        held = self.lock(table)
        now = time.monotonic()
        for mq, pq in table.items():
            if mq in held:
                pq.locked, pq.locked_at = True, now
                self.submit(mq, pq)
            elif pq.locked:
                pq.locked = False
                log.warning("consumer %s: lost the lock of %s", self.c.group, mq)

    def tick(self, now: float) -> None:
        """Periodic work from the consumer's service thread: lock renewals, and a
        rebalance while allocated queues wait for another member's unlock."""
        if now >= self._next_lock_all:
            self._next_lock_all = now + LOCK_INTERVAL_S
            self.lock_all()
        if self.wanted:
            self.c._rebalance_now.set()

    def next_tick(self) -> float:
        due = self._next_lock_all
        return min(due, time.monotonic() + LOCK_RETRY_S) if self.wanted else due

    def release(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        """A rebalance took ``mq`` away (``pq`` is marked dropped): once its batch in flight
        is done, persist its offset and unlock it, so the next owner starts there."""
        with self._state:
            self._releasing.add(mq)
        threading.Thread(
            target=self._release, args=(mq, pq), name=f"shmq-unlock-{mq.queue_id}", daemon=True
        ).start()

    def _release(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        try:
            with pq.consume_lock:
                self.c.persist_released(mq)
                self.unlock([mq])
        finally:
            with self._state:
                self._releasing.discard(mq)

    # -- consuming --------------------------------------------------------------------------

    def submit(
        self, mq: MessageQueue, pq: ProcessQueue, delay_s: float = 0.0, here: bool = False
    ) -> None:
        """Have one consume thread work through ``mq`` (unless one is already on it).
        ``here``: the pull thread asks, and works through ``mq`` itself when no other queue
        is being consumed and the listener is fast (``listener_pace``)."""
        if delay_s > 0:
            timer = threading.Timer(delay_s, self.submit, (mq, pq))
            timer.daemon = True
            timer.start()
            return
        with self._state:
            if mq in self._running or pq.dropped:
                return
            if time.monotonic() < self._suspended.get(mq, 0.0):
                return  # a pull does not cut a suspension short; its timer comes
            self._running.add(mq)
            here = here and len(self._running) == 1 and self._pace.fast
        if here:
            self.c._inline.run(self._run, mq, pq)
            return
        try:
            self.c._pool.submit(self._run, mq, pq)
        except RuntimeError:  # the pool is shut down
            with self._state:
                self._running.discard(mq)

    def _run(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        again = 0.0
        try:
            again = self._consume(mq, pq)
        except Exception:
            log.exception("consumer %s: orderly consumption of %s failed", self.c.group, mq)
            again = self.suspend_s
        finally:
            with self._state:
                self._running.discard(mq)
        if again >= 0 and not pq.dropped and (again > 0 or pq.count):
            self.submit(mq, pq, again)

    def _consume(self, mq: MessageQueue, pq: ProcessQueue) -> float:
        """Consume ``mq`` batch by batch while messages are there; returns when to come
        back (seconds; 0: at once if messages are left, -1: not until the next pull)."""
        started = time.monotonic()
        c = self.c
        while not c._stop.is_set():
            with pq.consume_lock:
                if pq.dropped:
                    return -1
                if not pq.locked or time.monotonic() - pq.locked_at > LOCK_MAX_LIVE_S:
                    return NOT_LOCKED_RETRY_S if pq.locked else -1
                taken = pq.take(TAKE_BATCH * c.batch_max)
                if not taken:
                    return -1
                if mq.topic == c._retry_topic:
                    restore_topics(taken)
                called = time.monotonic()
                pause, done = self._call_chunks(mq, taken)
                self._pace.add(time.monotonic() - called, len(taken))
                if done:
                    c.counters["consumed"] += done
                    offset = pq.remove(taken[:done])
                    if offset >= 0:  # also when dropped: the release persists it after this
                        c.offsets.update(mq, offset, increase_only=True)
                    c.drained(pq)
                if pause >= 0:
                    return pause
            if time.monotonic() - started > MAX_TIME_CONSUME_CONTINUOUSLY_S:
                return 0.01  # let other queues have this thread
        return -1

    def _call_chunks(self, mq: MessageQueue, taken: list[MessageExt]) -> tuple[float, int]:
        """The listener on ``taken`` in chunks of ``consume_message_batch_max_size``, in
        order, until one is suspended: ``(the suspension in seconds or -1, how many were
        consumed)``. The process queue and the offset are then updated once for them all."""
        step = self.c.batch_max
        for i in range(0, len(taken), step):
            msgs = taken[i : i + step]
            ctx = ConsumeOrderlyContext(mq)
            if self._call_listener(msgs, ctx) or self._give_up(msgs, mq):
                continue
            for m in msgs:
                m.reconsume_times += 1
            self.c.counters["failed"] += len(msgs)
            millis = ctx.suspend_current_queue_time_millis
            pause = millis / 1000 if millis >= 0 else self.suspend_s
            with self._state:
                self._suspended[mq] = time.monotonic() + pause - 0.001
            return pause, i
        return -1.0, len(taken)

    def _call_listener(self, msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> bool:
        metrics = self.c._metrics
        if metrics is None:
            return self._listener_says(msgs, ctx)
        started = time.monotonic()
        ok = self._listener_says(msgs, ctx)
        topic = ctx.message_queue.topic
        metrics.processed(topic, self.c.metrics_client_id, self.c.group, started, ok)
        return ok

    def _listener_says(self, msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> bool:
        try:
            status = self.c.listener(msgs, ctx)
        except Exception as exc:
            log.warning("consumer %s: orderly listener raised on %s at offset %d: %r; "
                        "suspending the queue", self.c.group, ctx.message_queue,
                        msgs[0].queue_offset, exc, exc_info=True)  # fmt: skip
            return False
        if status is ConsumeOrderlyStatus.SUCCESS:
            return True
        if status is not ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT:
            log.warning("consumer %s: orderly listener returned %r, not a ConsumeOrderlyStatus;"
                        " treated as SUSPEND", self.c.group, status)  # fmt: skip
        return False

    def _give_up(self, msgs: list[MessageExt], mq: MessageQueue) -> bool:
        """RocketMQ's ``checkReconsumeTimes``: when every message of the batch reached
        ``max_reconsume_times``, send them to the dead-letter queue; True when that worked
        (the queue goes on), False to suspend it again."""
        if any(m.reconsume_times < self.max_reconsume_times for m in msgs):
            return False
        back = self.c._back
        if back is None:  # broadcasting: nowhere to send them, suspend forever as RocketMQ
            return False
        with contextlib.suppress(ShmqError):
            return not back.send_back(msgs, mq, -1)  # a negative level: the DLQ
        return False

    def shutdown(self) -> None:
        """Unlock every queue still held (RocketMQ's ``unlockAll`` at shutdown)."""
        with self.c._lock:
            held = [mq for mq, pq in self.c._table.items() if pq.locked]
        if held:
            self.unlock(held)
