"""Whether a push consumer's pull thread calls the listener itself.

A listener whose calls on what a pull brought (a concurrent consumer's consume request, an
orderly queue's visit) take on average less than ``DIRECT_LISTENER_S`` plus
``DIRECT_MESSAGE_S`` per message is called in the pull thread when no other call runs:
handing the messages to a pool thread costs a wake-up, adds it to every message's latency,
and pool threads contend for the GIL with the pull thread, so that a Python listener that
does not block gains nothing from them. Slower listeners (the ones that wait on something)
get the pool's parallelism. The allowance grows with the call's messages: a call on 32 of a
backlog takes 32 times one's, and a limit per call alone sent every backlog to the pool.

A listener that turns slow while it runs in the pull thread (it blocks on something) would
hold every queue's pulls: ``InlineCall`` marks such calls, and the consumer's service thread
hands pulling to a new thread once one has run ``INLINE_HANDOVER_S``, as RocketMQ's consume
threads would leave the other queues going.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

DIRECT_LISTENER_S = 100e-6  # a call's allowance, about what a hand-off to the pool costs
DIRECT_MESSAGE_S = 20e-6  # and its allowance per message
WEIGHT = 0.125  # of the newest call in the moving average
INLINE_HANDOVER_S = 1.0  # a listener call in the pull thread this long: another thread pulls


class ListenerPace:
    """The moving average of the listener's calls' time in parts of their allowance; it
    starts at the limit, so the first calls go to the pool and a slow listener never runs
    in the pull thread."""

    __slots__ = ("fast", "load")

    def __init__(self) -> None:
        self.load = 1.0
        self.fast = False  # load < 1: an attribute, read by the pull thread for every pull

    def add(self, seconds: float, messages: int) -> None:
        """A call that took ``seconds`` for ``messages``."""
        allowance = DIRECT_LISTENER_S + messages * DIRECT_MESSAGE_S
        self.load += WEIGHT * (seconds / allowance - self.load)
        self.fast = self.load < 1.0


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
