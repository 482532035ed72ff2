"""The numbers behind the dashboard's live charts: snapshots of each master taken with the
``BrokerSampler`` ``shmq top`` uses, turned into rates the way ``shmq top`` does (the growth of
counters and offsets over the last ``RATE_WINDOW_S``).

Snapshots are taken when a page asks (``/api/live`` every couple of seconds while a chart
is open), at most one per ``min_interval`` per broker, so a dashboard nobody watches sends
the brokers nothing. The last ``keep_s`` seconds of points are kept for the charts.
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from shmq.client.broker_sampler import RATE_WINDOW_S, BrokerSampler, Snapshot


@dataclass
class BrokerHistory:
    """The snapshots of one broker address still inside the rate window, and the chart
    points made from them (``{"t": epoch ms, "in", "out": msg/s, "lag": {group: n}}``)."""

    snapshots: collections.deque[Snapshot] = field(default_factory=collections.deque)
    points: collections.deque[dict[str, Any]] = field(default_factory=collections.deque)


def _per_second(new: float, old: float, seconds: float) -> float | None:
    """None until there is a span, or when a counter went back (a restart, a reset)."""
    if seconds <= 0 or new < old:
        return None
    return (new - old) / seconds


def rates(history: collections.deque[Snapshot]) -> dict[str, Any]:
    """The newest snapshot's numbers with rates against the oldest one kept: broker in and
    out msg/s, per topic its messages and in msg/s, per (group, topic) its lag and consumed
    msg/s, and the disk's used share. Rates are None until two snapshots exist."""
    new, old = history[-1], history[0]
    span = new.at - old.at

    def rate(now: float, before: float | None) -> float | None:
        return None if before is None or old is new else _per_second(now, before, span)

    topics = {
        topic: {"queues": queues, "messages": stored,
                "in": rate(stored, old.topics.get(topic, (0, None))[1])}
        for topic, (queues, stored) in new.topics.items()
    }  # fmt: skip
    groups = {
        f"{group}@{topic}": {"group": group, "topic": topic, "lag": lag,
                             "out": rate(done, old.groups.get((group, topic), (0, None))[1])}
        for (group, topic), (lag, done) in sorted(new.groups.items())
    }  # fmt: skip
    runtime = new.runtime
    return {
        "broker": runtime["broker"],
        "role": runtime.get("broker_role", "ASYNC_MASTER"),
        "in": rate(runtime["msgs_in"], old.runtime["msgs_in"]),
        "out": rate(runtime["msgs_out"], old.runtime["msgs_out"]),
        "disk": new.disk_ratio,
        "topics": topics,
        "groups": groups,
    }


class LiveRates:
    """Snapshots and chart points per broker address, shared by every request of the
    dashboard (waitress serves requests on several threads: one lock guards it all)."""

    def __init__(self, min_interval: float = 1.0, keep_s: float = 300.0) -> None:
        self.min_interval = min_interval
        self.keep_s = keep_s
        self._lock = threading.Lock()
        self._histories: dict[str, BrokerHistory] = {}
        self._samplers: dict[tuple[str, str | None], BrokerSampler] = {}

    def close(self) -> None:
        with self._lock:
            for sampler in self._samplers.values():
                sampler.close()
            self._samplers.clear()

    def sample(self, addr: str, options: dict[str, Any]) -> dict[str, Any]:
        """``rates`` of the broker at ``addr`` now (a snapshot taken with ``options``,
        the viewer's ``credentials=`` and ``tls=``, unless one is younger than
        ``min_interval``), with ``points``, the chart's series."""
        credentials = options.get("credentials")
        key = (addr, credentials.access_key if credentials is not None else None)
        with self._lock:
            history = self._histories.setdefault(addr, BrokerHistory())
            snapshots = history.snapshots
            if not snapshots or time.monotonic() - snapshots[-1].at >= self.min_interval:
                sampler = self._samplers.get(key)
                if sampler is None:
                    sampler = self._samplers[key] = BrokerSampler(addr, options=options)
                snapshots.append(sampler.sample())
                while snapshots[-1].at - snapshots[0].at > RATE_WINDOW_S and len(snapshots) > 2:
                    snapshots.popleft()
                self._add_point(history, rates(snapshots))
            now = rates(snapshots)
            now["points"] = list(history.points)
            return now

    def _add_point(self, history: BrokerHistory, now: dict[str, Any]) -> None:
        at = time.time()
        lag: dict[str, int] = collections.Counter()
        for row in now["groups"].values():
            lag[row["group"]] += row["lag"]
        history.points.append({"t": int(at * 1000), "in": now["in"], "out": now["out"],
                               "lag": dict(lag)})  # fmt: skip
        while history.points and history.points[0]["t"] < (at - self.keep_s) * 1000:
            history.points.popleft()
