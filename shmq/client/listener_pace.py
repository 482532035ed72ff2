"""Whether a push consumer's pull thread calls the listener itself.

A listener whose calls on what a pull brought (a concurrent consumer's consume request, an
orderly queue's visit) average less than ``DIRECT_LISTENER_S`` is called in the pull
thread when no other call runs: handing the messages to a pool thread costs about as much,
adds its wake-up to every message's latency, and several pool threads contend for the GIL
with the pull thread. Slower listeners always get the pool's parallelism.

A listener that turns slow while it runs in the pull thread (it blocks on something) would
hold every queue's pulls: ``InlineCall`` marks such calls, and the consumer's service thread
hands pulling to a new thread once one has run ``INLINE_HANDOVER_S``, as RocketMQ's consume
threads would leave the other queues going.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

DIRECT_LISTENER_S = 100e-6
WEIGHT = 0.125  # of the newest call in the moving average
INLINE_HANDOVER_S = 1.0  # a listener call in the pull thread this long: another thread pulls


class ListenerPace:
    """The moving average of the listener's time for what a pull brought; it starts at
    the limit, so the first calls go to the pool and a slow listener never runs in the
    pull thread."""

    __slots__ = ("seconds",)

    def __init__(self) -> None:
        self.seconds = DIRECT_LISTENER_S

    def add(self, seconds: float) -> None:
        self.seconds += WEIGHT * (seconds - self.seconds)

    @property
    def fast(self) -> bool:
        return self.seconds < DIRECT_LISTENER_S


class InlineCall:
    """The listener call running in the pull thread, if any: when it started."""

    __slots__ = ("since",)

    def __init__(self) -> None:
        self.since: float | None = None

    def run(self, consume: Callable[..., Any], *args: Any) -> None:
        """Run ``consume`` (it calls the listener) in this, the pull thread, marked."""
        since = self.since = time.monotonic()
        try:
            consume(*args)
        finally:
            if self.since is since:  # not handed over meanwhile (``overdue``)
                self.since = None

    def due(self) -> float | None:
        """When the running call becomes overdue (monotonic), None without one."""
        since = self.since
        return None if since is None else since + INLINE_HANDOVER_S

    def overdue(self, now: float) -> float | None:
        """How long the running call has held the pull thread, once that is
        ``INLINE_HANDOVER_S`` or more (it is then forgotten: it is handed over once);
        else None."""
        since = self.since
        if since is None or now - since < INLINE_HANDOVER_S:
            return None
        self.since = None
        return now - since
