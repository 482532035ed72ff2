"""The pull consumer: the application asks for messages (RocketMQ's
``DefaultLitePullConsumer``, close to Kafka's consumer).

Either ``subscribe`` to topics and let the group rebalance the queues among its members, or
``assign`` queues yourself. ``poll`` returns the next messages of the held queues, reading
the store's mapped files in the calling thread and parking on the consumer's semaphore when
there is nothing yet. Positions advance as messages are returned; ``commit`` stores them
(with ``auto_commit``, every ``auto_commit_interval`` during ``poll`` and at close: what an
earlier poll returned counts as consumed).

Example::

    with PullConsumer("Reports", "127.0.0.1:9876") as consumer:
        consumer.subscribe("Orders")
        consumer.start()
        while True:
            for msg in consumer.poll(timeout=1.0):
                print(msg.queue_id, msg.queue_offset, msg.body)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from shmq.client.consumer.base import ConsumerBase, queues_of
from shmq.client.consumer.subscription import Subscription
from shmq.client.selector import MessageSelector
from shmq.client.types import MessageQueue, PullStatus
from shmq.errors import ClientError, ConfigError
from shmq.message import MessageExt

log = logging.getLogger(__name__)


class PullConsumer(ConsumerBase):
    """A lite pull consumer of one group; ``pull_batch_size`` (10, RocketMQ's lite default)
    bounds what one ``poll`` returns.

    Example, reading two queues by hand from the start and committing explicitly::

        with PullConsumer("Audit", "127.0.0.1:9876", auto_commit=False) as consumer:
            consumer.start()
            queues = consumer.fetch_message_queues("Orders")[:2]
            consumer.assign(queues)
            for mq in queues:
                consumer.seek_to_begin(mq)
            batch = consumer.poll(timeout=1.0)
            consumer.commit()
    """

    consume_type = "CONSUME_ACTIVELY"

    def __init__(
        self,
        group: str,
        namesrv: str = "127.0.0.1:9876",
        *,
        auto_commit: bool = True,
        auto_commit_interval: float = 5.0,
        pull_batch_size: int = 10,
        **options,
    ) -> None:
        super().__init__(group, namesrv, **options)
        if not 1 <= pull_batch_size <= 1024:
            raise ConfigError(f"pull_batch_size must be in [1, 1024], not {pull_batch_size!r}")
        self.auto_commit = auto_commit
        self.auto_commit_interval = auto_commit_interval
        self.pull_batch_size = pull_batch_size
        self._positions: dict[MessageQueue, int] = {}
        self._paused: set[MessageQueue] = set()
        self._assigned_by_user: set[MessageQueue] | None = None
        self._next = 0
        self._last_commit = time.monotonic()

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Join the group (subscribe mode) or take the assigned queues (assign mode). As
        RocketMQ's lite pull consumer, it may also start with neither, then
        ``fetch_message_queues`` and ``assign``: ``poll`` returns nothing until then."""
        self._start_base(f"shmq-lite-pull-{self.group}")

    def close(self) -> None:
        """Commit (with ``auto_commit``), leave the group and release everything."""
        if self._closed:
            return
        self._closed = True
        if self._started:
            if self.auto_commit:
                self.commit()
            self._stop_base()

    shutdown = close

    # -- assignment -------------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str | MessageSelector | None = "*") -> None:
        if self._assigned_by_user is not None:
            raise ClientError("assign() and subscribe() cannot be mixed")
        super().subscribe(topic, expression)

    def assign(self, queues: Iterable[MessageQueue]) -> None:
        """Read exactly these queues (no group rebalancing); offsets are still the
        group's."""
        if self._subs and self._assigned_by_user is None:
            raise ClientError("assign() and subscribe() cannot be mixed")
        queues = set(queues)
        self._assigned_by_user = queues
        with self._lock:
            for topic in {mq.topic for mq in queues}:
                if topic not in self._subs:
                    self._subs[topic] = Subscription.parse(topic)
        if self._started:
            self.do_rebalance()

    def do_rebalance(self) -> None:
        if self._assigned_by_user is None:
            super().do_rebalance()
            return
        for topic in {mq.topic for mq in self._assigned_by_user} | self._assigned_topics():
            self._apply_assignment(topic, queues_of(topic, self._assigned_by_user))

    def assignment(self) -> list[MessageQueue]:
        with self._lock:
            return sorted(self._positions)

    def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """Every readable queue of ``topic``."""
        return self._reader().queues(topic)

    def _holdings(self) -> Iterable[MessageQueue]:
        return self._positions

    def _hold(self, mq: MessageQueue, offset: int) -> None:
        self._positions[mq] = offset

    def _drop(self, mq: MessageQueue) -> None:
        if self.auto_commit:
            self._commit_one(mq)
        with self._lock:
            self._positions.pop(mq, None)

    def _reset_offsets(self, topic: str, table: dict[MessageQueue, int]) -> None:
        with self._lock:
            for mq, offset in table.items():
                if mq in self._positions:
                    self._positions[mq] = offset
        for mq, offset in table.items():
            self.offsets.update(mq, offset)

    # -- reading ----------------------------------------------------------------------------------

    def poll(self, timeout: float = 5.0) -> list[MessageExt]:
        """Up to ``pull_batch_size`` messages from the held, unpaused queues, waiting up
        to ``timeout`` seconds for the first; [] when none came."""
        if not self._started or self._closed:
            raise ClientError("poll() needs a started, open consumer")
        if self.auto_commit and time.monotonic() - self._last_commit >= self.auto_commit_interval:
            self.commit()
        deadline = time.monotonic() + timeout
        reader = self._reader()
        while True:
            with self._lock:
                queues = [mq for mq in sorted(self._positions) if mq not in self._paused]
            out: list[MessageExt] = []
            for i in range(len(queues)):
                mq = queues[(self._next + i) % len(queues)]
                out += self._read(mq, self.pull_batch_size - len(out))
                if len(out) >= self.pull_batch_size:
                    self._next = (self._next + i + 1) % max(1, len(queues))
                    break
            if out:
                if self._trace is not None:
                    self._trace.polled(out)
                return out
            left = deadline - time.monotonic()
            if left <= 0 or self._stop.is_set():
                return []
            with self._lock:
                waiting = {mq: self._positions[mq] for mq in queues if mq in self._positions}
            if waiting:
                reader.wait(waiting, left)
            else:
                time.sleep(min(left, 0.05))

    def _read(self, mq: MessageQueue, max_nums: int) -> list[MessageExt]:
        sub = self._subs.get(mq.topic)
        with self._lock:
            offset = self._positions.get(mq)
        if sub is None or offset is None:
            return []
        result = self._reader().pull(mq, offset, max_nums, sub.pull_expression, 0.0)
        next_offset = result.next_begin_offset
        if result.pull_status is PullStatus.OFFSET_ILLEGAL or (
            result.pull_status is PullStatus.NO_MATCHED_MSG
            and next_offset == offset
            and offset < result.max_offset
        ):
            next_offset = self.rebalance.correct(mq, offset)
        with self._lock:
            if self._positions.get(mq) == offset:  # not moved by seek/reset meanwhile
                self._positions[mq] = next_offset
        return sub.filter(result.messages)

    # -- positions and offsets -------------------------------------------------------------------

    def _reader(self):
        if self.instance is None:
            raise ClientError("start() the consumer first")
        return self.instance.reader

    def _held(self, mq: MessageQueue) -> None:
        if mq not in self._positions:
            raise ClientError(f"{mq} is not assigned to this consumer")

    def seek(self, mq: MessageQueue, offset: int) -> None:
        """Read ``mq`` from ``offset`` next (must be within its min and max offset)."""
        with self._lock:
            self._held(mq)
        reader = self._reader()
        low, high = reader.min_offset(mq), reader.max_offset(mq)
        if not low <= offset <= high:
            raise ClientError(f"seek offset {offset} of {mq} is outside [{low}, {high}]")
        with self._lock:
            self._positions[mq] = offset

    def seek_to_begin(self, mq: MessageQueue) -> None:
        self.seek(mq, self._reader().min_offset(mq))

    def seek_to_end(self, mq: MessageQueue) -> None:
        self.seek(mq, self._reader().max_offset(mq))

    def position(self, mq: MessageQueue) -> int:
        """The offset the next ``poll`` reads ``mq`` from."""
        with self._lock:
            self._held(mq)
            return self._positions[mq]

    def committed(self, mq: MessageQueue) -> int:
        """The group's stored offset of ``mq`` (-1 when none)."""
        return self.offsets.read(mq, from_store=True) if self.offsets else -1

    def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return self._reader().search_offset(mq, timestamp_ms)

    def commit(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        """Store ``offsets`` (default: the current positions, i.e. everything returned so
        far) for the group now."""
        if self.offsets is None:
            return
        with self._lock:
            table = dict(self._positions) if offsets is None else dict(offsets)
        for mq, offset in table.items():
            self.offsets.update(mq, offset)
        self.offsets.persist(table)
        self._last_commit = time.monotonic()

    def _commit_one(self, mq: MessageQueue) -> None:
        with self._lock:
            offset = self._positions.get(mq)
        if offset is not None:
            self.offsets.update(mq, offset)

    def pause(self, queues: Iterable[MessageQueue]) -> None:
        """``poll`` skips these queues until ``resume``."""
        with self._lock:
            self._paused |= set(queues)

    def resume(self, queues: Iterable[MessageQueue]) -> None:
        with self._lock:
            self._paused -= set(queues)

    def paused(self) -> list[MessageQueue]:
        with self._lock:
            return sorted(self._paused)
