"""Rates and day totals of a broker's counters (RocketMQ's ``BrokerStatsManager`` numbers
that mqadmin ``clusterList``, ``brokerStatus`` and ``consumerProgress`` print).

The supervisor's housekeeping samples, once a second, the messages put (the writer's
``MSGS_IN``), the sum of every committed consumer offset and, per group and topic, the sum
of its committed offsets. Consumers on this host read the store's files directly, so the
broker cannot count their gets as RocketMQ counts pulls: a group's offsets advancing is what
it consumed, so ``consumeTps`` and ``getTransferedTps`` are committed messages per second,
and the get totals count committed messages since the broker started (an offset moved back
by a reset counts nothing). Rates cover RocketMQ's windows: the last
10 s, minute and 10 minutes (``putTps`` / ``getTransferedTps`` list the three, a group's
``consumeTps`` is its minute); shorter while the broker has not run that long. Day totals
follow RocketMQ's ``msgPutTotalTodayMorning``: the counter when the local day began (0 for a
broker started that day).
"""

from __future__ import annotations

import collections
import datetime
import threading
import time
from collections.abc import Callable

WINDOWS_S = (10, 60, 600)
SAMPLE_S = 1.0


class Rate:
    """A counter's samples over the last ``horizon_s`` (one per ``sample`` call; the caller
    samples once a second): its increase per second over a window."""

    def __init__(self, horizon_s: float = WINDOWS_S[-1]) -> None:
        self.horizon_s = horizon_s
        self._samples: collections.deque[tuple[float, int]] = collections.deque()

    def sample(self, now: float, value: int) -> None:
        samples = self._samples
        samples.append((now, value))
        while now - samples[0][0] > self.horizon_s:
            samples.popleft()

    def tps(self, window_s: float, now: float) -> float:
        """The increase per second from the oldest sample within ``window_s`` of ``now``
        to the newest (0 with fewer than two; a decrease counts as none)."""
        samples = self._samples
        newest = samples[-1] if samples else None
        oldest = next((s for s in samples if now - s[0] <= window_s), None)
        if newest is None or oldest is None or newest[0] <= oldest[0]:
            return 0.0
        return max(newest[1] - oldest[1], 0) / (newest[0] - oldest[0])


class DayTotals:
    """A counter's value when the local day began, and the day before (0 when the broker
    was not running then)."""

    def __init__(self, today: int) -> None:
        self._day = today
        self.today_morning = 0
        self.yesterday_morning = 0

    def sample(self, today: int, value: int) -> None:
        if today != self._day:
            self.yesterday_morning = self.today_morning if today == self._day + 1 else 0
            self.today_morning = value
            self._day = today


def local_day(wall: float) -> int:
    """The local date's ordinal (RocketMQ's totals turn over at local midnight)."""
    return datetime.date.fromtimestamp(wall).toordinal()


class BrokerRates:
    """The rates and day totals of one broker; ``sample`` from one thread, reads from any."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.puts = Rate()
        self.gets = Rate()
        day = local_day(time.time())
        self.put_days = DayTotals(day)
        self.get_days = DayTotals(day)
        self._groups: dict[tuple[str, str], Rate] = {}
        self._committed: int | None = None  # the sum of every committed offset, last sample
        self.got = 0  # messages committed since the broker started (a move back: none)
        # both counters start at 0 with the broker (created before its agents): what comes
        # before the first sample counts too
        now = clock()
        self.puts.sample(now, 0)
        self.gets.sample(now, 0)

    def sample(self, msgs_in: int, committed: dict[tuple[str, str], int]) -> None:
        """``msgs_in``: messages put so far; ``committed``: per (group, topic) the sum of
        its committed offsets."""
        now, day = self._clock(), local_day(time.time())
        total = sum(committed.values())
        with self._lock:
            if self._committed is not None:
                self.got += max(total - self._committed, 0)
            self._committed = total
            self.puts.sample(now, msgs_in)
            self.gets.sample(now, self.got)
            self.put_days.sample(day, msgs_in)
            self.get_days.sample(day, self.got)
            groups = self._groups
            for key in groups.keys() - committed.keys():  # a deleted group or topic
                del groups[key]
            for key, value in committed.items():
                rate = groups.get(key)
                if rate is None:
                    rate = groups[key] = Rate(WINDOWS_S[1])
                rate.sample(now, value)

    def put_tps(self) -> str:
        """RocketMQ's ``putTps``: the three windows' rates, ``"a b c"``."""
        return self._windows(self.puts)

    def get_tps(self) -> str:
        """RocketMQ's ``getTransferedTps``, from committed offsets (module docstring)."""
        return self._windows(self.gets)

    def consume_tps(self, group: str, topic: str) -> float:
        """Messages ``group`` committed per second on ``topic`` over the last minute."""
        with self._lock:
            rate = self._groups.get((group, topic))
            return 0.0 if rate is None else rate.tps(WINDOWS_S[1], self._clock())

    def _windows(self, rate: Rate) -> str:
        now = self._clock()
        with self._lock:
            return " ".join(f"{rate.tps(w, now):.2f}" for w in WINDOWS_S)
