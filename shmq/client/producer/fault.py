"""Latency fault tolerance: the producer's memory of slow or failed brokers (RocketMQ 4.9's
``LatencyFaultToleranceImpl`` and ``MQFaultStrategy``).

After each send attempt the producer reports the broker and how long the attempt took. With
``send_latency_fault_enable`` on, a broker whose send took ``L`` ms is avoided for
``not_available_duration[i]`` ms, ``i`` the largest index with ``L >= latency_max[i]``; a
failed attempt counts as ``L = 30000`` (ten minutes with the default tables). Queue
selection then skips brokers that are not available yet, and when every broker is
unavailable it takes one of the better half, sorted by (available first, lower latency,
earlier end of the penalty).

Example::

    faults = LatencyFaultTolerance()
    faults.update("broker-a", 700)           # slow: broker-a is avoided for 30 s
    faults.update("broker-b", 0, isolation=True)  # failed: avoided for 10 min
    faults.is_available("broker-a")          # False (for the next 30 s)
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from shmq.client.types import MessageQueue
from shmq.errors import ConfigError

LATENCY_MAX = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_DURATION = (0, 0, 30000, 60000, 120000, 180000, 600000)
ISOLATION_LATENCY_MS = 30000  # what a failed send counts as


def _monotonic_ms() -> float:
    return time.monotonic() * 1000.0


@dataclass
class FaultItem:
    """One broker's record: the latency of its last send and when it is usable again."""

    name: str
    current_latency: float
    start_timestamp: float

    def available(self, now: float) -> bool:
        return now >= self.start_timestamp

    def sort_key(self, now: float) -> tuple[bool, float, float]:
        # RocketMQ's FaultItem.compareTo: available first, lower latency, earlier start
        return (not self.available(now), self.current_latency, self.start_timestamp)


class LatencyFaultTolerance:
    """Per-broker availability from send latencies; ``clock`` returns milliseconds (a
    monotonic clock by default; inject a fake one in tests)."""

    def __init__(
        self,
        latency_max: Sequence[int] = LATENCY_MAX,
        not_available_duration: Sequence[int] = NOT_AVAILABLE_DURATION,
        *,
        clock: Callable[[], float] = _monotonic_ms,
        rng: random.Random | None = None,
    ) -> None:
        latency_max = tuple(int(v) for v in latency_max)
        not_available_duration = tuple(int(v) for v in not_available_duration)
        if len(latency_max) != len(not_available_duration) or not latency_max:
            raise ConfigError(
                f"latency_max ({len(latency_max)} values) and not_available_duration "
                f"({len(not_available_duration)} values) must be non-empty and of equal length"
            )
        if list(latency_max) != sorted(latency_max) or min(not_available_duration) < 0:
            raise ConfigError(
                f"latency_max {latency_max} must ascend and not_available_duration "
                f"{not_available_duration} must not be negative"
            )
        self.latency_max = latency_max
        self.not_available_duration = not_available_duration
        self.clock = clock
        self._rng = rng or random.Random()
        self._items: dict[str, FaultItem] = {}
        self._which_item_worst = self._rng.randrange(1 << 31)
        self._lock = threading.Lock()

    def compute_not_available_duration(self, latency_ms: float) -> int:
        """``not_available_duration[i]`` for the largest ``i`` with
        ``latency_ms >= latency_max[i]``; 0 below the first threshold."""
        for i in range(len(self.latency_max) - 1, -1, -1):
            if latency_ms >= self.latency_max[i]:
                return self.not_available_duration[i]
        return 0

    def update(self, broker: str, latency_ms: float, isolation: bool = False) -> int:
        """Record a send to ``broker`` that took ``latency_ms`` (``isolation``: it failed,
        count it as 30000 ms); returns the not-available duration applied, in ms."""
        duration = self.compute_not_available_duration(
            ISOLATION_LATENCY_MS if isolation else latency_ms
        )
        now = self.clock()
        with self._lock:
            item = self._items.get(broker)
            if item is None:
                self._items[broker] = FaultItem(broker, latency_ms, now + duration)
            else:
                item.current_latency = latency_ms
                item.start_timestamp = now + duration
        return duration

    def is_available(self, broker: str) -> bool:
        item = self._items.get(broker)
        return item is None or item.available(self.clock())

    def remove(self, broker: str | None) -> None:
        with self._lock:
            self._items.pop(broker, None)  # type: ignore[arg-type]

    def pick_one_at_least(self) -> str | None:
        """A broker to use when none is available: shuffle, sort (available first, lower
        latency, earlier end of the penalty) and take one of the better half in turn."""
        now = self.clock()
        with self._lock:
            items = list(self._items.values())
            if not items:
                return None
            self._rng.shuffle(items)  # ties fall in random order, as in RocketMQ
            items.sort(key=lambda item: item.sort_key(now))
            half = len(items) // 2
            if half <= 0:
                return items[0].name
            self._which_item_worst = (self._which_item_worst + 1) & 0x7FFFFFFF
            return items[self._which_item_worst % half].name

    def items(self) -> list[FaultItem]:
        """A snapshot of the fault items (for ``stats()`` and tests)."""
        with self._lock:
            return [
                FaultItem(i.name, i.current_latency, i.start_timestamp)
                for i in self._items.values()
            ]

    def __repr__(self) -> str:
        now = self.clock()
        parts = ", ".join(
            f"{i.name}: latency {i.current_latency:.0f} ms, "
            f"{'available' if i.available(now) else f'back in {i.start_timestamp - now:.0f} ms'}"
            for i in self.items()
        )
        return f"LatencyFaultTolerance({parts})"


def select_one_message_queue(
    queues: Sequence[MessageQueue],
    last_broker: str | None,
    next_index: Callable[[], int],
    faults: LatencyFaultTolerance | None = None,
) -> MessageQueue:
    """RocketMQ 4.9's ``MQFaultStrategy.selectOneMessageQueue`` over the topic's writable
    ``queues`` (sorted by broker, then queue id); ``next_index()`` is the producer's
    ``sendWhichQueue`` counter (non-negative, incremented per call).

    Without ``faults`` (latency fault tolerance off): round robin, and on a retry
    (``last_broker`` set) the first of up to ``len(queues)`` positions on another broker.
    With ``faults``: the first of ``len(queues)`` positions whose broker is available;
    else a queue of ``pick_one_at_least()``'s broker; else plain round robin.
    """
    n = len(queues)
    if faults is not None:
        index = next_index()
        for _ in range(n):
            mq = queues[abs(index) % n]
            index += 1
            if faults.is_available(mq.broker_name):
                return mq
        not_best = faults.pick_one_at_least()
        write_queue_nums = (
            sum(1 for q in queues if q.broker_name == not_best) if not_best is not None else -1
        )
        if write_queue_nums > 0:
            mq = queues[next_index() % n]  # tpInfo.selectOneMessageQueue() advances the index
            return MessageQueue(mq.topic, not_best, next_index() % write_queue_nums)  # type: ignore[arg-type]
        faults.remove(not_best)
        return queues[next_index() % n]
    if last_broker is not None:
        for _ in range(n):
            mq = queues[next_index() % n]
            if mq.broker_name != last_broker:
                return mq
    return queues[next_index() % n]
