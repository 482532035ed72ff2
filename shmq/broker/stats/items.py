"""RocketMQ's ``StatsItem`` numbers behind VIEW_BROKER_STATS_DATA (mqadmin ``statsAll``).

RocketMQ keeps, per stats name and key, a running count, snapshots it every 10 s (the last
7 kept: the minute), every 10 minutes (7: the hour) and every hour (25: the day), and
answers a window with its newest snapshot less its oldest: ``sum``, that per second
(``tps``) and per call (``avgpt``). An item exists from the first count after the broker
started; asked for another, the broker answers "The stats <name> <key> not exist".

shmq serves the names it can count, sampled by the supervisor's housekeeping once a second:

- ``TOPIC_PUT_NUMS`` (key: the topic): the growth of the topic's consume queues;
- ``GROUP_GET_NUMS`` (key: ``topic@group``): the messages the group read from the topic,
  pulled over TCP or read from the store's files on this host (``get_counts``);
- ``BROKER_PUT_NUMS`` and ``BROKER_GET_NUMS`` (key: the cluster name): the same for the
  whole broker.

Producers write rings and local consumers read files, so most traffic makes no request to
time: ``avgpt`` is 0.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Mapping

from shmq.remoting.admin_bodies import (
    BROKER_GET_NUMS,
    BROKER_PUT_NUMS,
    GROUP_GET_NUMS,
    STATS_WINDOWS,
    TOPIC_PUT_NUMS,
)

# (seconds between snapshots, snapshots kept) of the minute, hour and day windows
LEVELS = ((10.0, 7), (600.0, 7), (3600.0, 25))

Key = tuple[str, str]  # (stats name, stats key)


class StatsItem:
    """One count and its snapshots ``(time, count)`` per window."""

    def __init__(self) -> None:
        self.count = 0
        self.snapshots = [collections.deque(maxlen=keep) for _, keep in LEVELS]

    def snapshot(self, level: int, now: float) -> None:
        shots = self.snapshots[level]
        if not shots:  # as RocketMQ: the first snapshot has an empty one a period before it
            shots.append((now - LEVELS[level][0], 0))
        shots.append((now, self.count))

    def window(self, level: int) -> dict[str, float | int]:
        """RocketMQ's ``BrokerStatsItem`` of one window: ``sum``, ``tps``, ``avgpt``."""
        shots = self.snapshots[level]
        if len(shots) < 2:
            return {"sum": 0, "tps": 0.0, "avgpt": 0.0}
        (first_at, first), (last_at, last) = shots[0], shots[-1]
        total = last - first
        return {"sum": total, "tps": total / (last_at - first_at), "avgpt": 0.0}


class BrokerStatsItems:
    """The items of one broker: ``observe`` from one thread, ``stats_data`` from any."""

    def __init__(self, cluster: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.cluster = cluster
        self._clock = clock
        self._lock = threading.Lock()
        self._items: dict[Key, StatsItem] = {}
        self._last: dict[Key, int] = {}  # each key's running input at the last observe
        self._observed = False
        self._due = [clock()] * len(LEVELS)  # as RocketMQ, the first snapshots at once

    def observe(
        self, topic_puts: Mapping[str, int], group_gets: Mapping[tuple[str, str], int]
    ) -> None:
        """``topic_puts``: per topic the sum of its queues' max offsets; ``group_gets``: per
        ``(group, topic)`` the messages got since the broker started (``get_counts``).
        Counts what grew since the last call: what the first call sees was there before the
        broker started; a key first seen later grew from 0 (a topic's queues appear with
        their first message, a group's gets with its first)."""
        inputs: dict[Key, int] = {(TOPIC_PUT_NUMS, t): n for t, n in topic_puts.items()}
        inputs.update(((GROUP_GET_NUMS, f"{t}@{g}"), n) for (g, t), n in group_gets.items())
        now = self._clock()
        with self._lock:
            grown = {TOPIC_PUT_NUMS: 0, GROUP_GET_NUMS: 0}
            for key, value in inputs.items():
                last = self._last.get(key)
                if last is None:
                    last = 0 if self._observed else value
                self._last[key] = value
                if value > last:
                    self._count(key, value - last)
                    grown[key[0]] += value - last
            for key in self._last.keys() - inputs.keys():  # a deleted topic or group
                del self._last[key]
            self._observed = True
            for name, whole in (
                (TOPIC_PUT_NUMS, BROKER_PUT_NUMS),
                (GROUP_GET_NUMS, BROKER_GET_NUMS),
            ):
                if grown[name]:
                    self._count((whole, self.cluster), grown[name])
            for level, (every, _) in enumerate(LEVELS):
                if now >= self._due[level]:
                    self._due[level] = now + every
                    for item in self._items.values():
                        item.snapshot(level, now)

    def _count(self, key: Key, grown: int) -> None:
        item = self._items.get(key)
        if item is None:
            item = self._items[key] = StatsItem()
        item.count += grown

    def stats_data(self, name: str, key: str) -> dict[str, dict] | None:
        """RocketMQ's ``BrokerStatsData`` of one item, or None when it does not exist."""
        with self._lock:
            item = self._items.get((name, key))
            if item is None:
                return None
            return {window: item.window(level) for level, window in enumerate(STATS_WINDOWS)}
