"""Rates and day totals of a broker's counters (RocketMQ's ``BrokerStatsManager`` numbers
that mqadmin ``clusterList``, ``brokerStatus`` and ``consumerProgress`` print).

The supervisor's housekeeping samples, once a second, the messages put (the writer's
``MSGS_IN``) and, per group and topic, the messages got since the broker started
(``get_counts``: TCP pulls and what consumers on this host read from the store's files), so
``consumeTps`` and ``getTransferedTps`` are messages read per second, and the get totals
count messages read since the broker started. Rates cover RocketMQ's windows: the last
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
from collections.abc import Callable, Mapping

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
        # every counter starts at 0 with the broker (created before its agents and clients):
        # what comes before the first sample counts too
        self._sampled_at = clock()
        self.puts.sample(self._sampled_at, 0)
        self.gets.sample(self._sampled_at, 0)

    def sample(self, msgs_in: int, gets: Mapping[tuple[str, str], int]) -> None:
        """``msgs_in``: messages put so far; ``gets``: per (group, topic) the messages got
        so far (``get_counts``)."""
        now, day = self._clock(), local_day(time.time())
        got = sum(gets.values())
        with self._lock:
            self.puts.sample(now, msgs_in)
            self.gets.sample(now, got)
            self.put_days.sample(day, msgs_in)
            self.get_days.sample(day, got)
            for key, value in gets.items():
                rate = self._groups.get(key)
                if rate is None:  # its first get came after the last sample
                    rate = self._groups[key] = Rate(WINDOWS_S[1])
                    rate.sample(self._sampled_at, 0)
                rate.sample(now, value)
            self._sampled_at = now

    def put_tps(self) -> str:
        """RocketMQ's ``putTps``: the three windows' rates, ``"a b c"``."""
        return self._windows(self.puts)

    def get_tps(self) -> str:
        """RocketMQ's ``getTransferedTps``: messages read, the three windows' rates."""
        return self._windows(self.gets)

    def consume_tps(self, group: str, topic: str) -> float:
        """Messages ``group`` read per second from ``topic`` over the last minute (RocketMQ's
        ``tpsGroupGetNums``)."""
        with self._lock:
            rate = self._groups.get((group, topic))
            return 0.0 if rate is None else rate.tps(WINDOWS_S[1], self._clock())

    def _windows(self, rate: Rate) -> str:
        now = self._clock()
        with self._lock:
            return " ".join(f"{rate.tps(w, now):.2f}" for w in WINDOWS_S)
