"""Whether a push consumer's pull thread calls the listener itself.

A listener whose calls on what a pull brought (a concurrent consumer's consume request, an
orderly queue's visit) average less than ``DIRECT_LISTENER_S`` is called in the pull
thread when no other call runs: handing the messages to a pool thread costs about as much,
adds its wake-up to every message's latency, and several pool threads contend for the GIL
with the pull thread. Slower listeners always get the pool's parallelism.
"""

from __future__ import annotations

DIRECT_LISTENER_S = 100e-6
WEIGHT = 0.125  # of the newest call in the moving average


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
