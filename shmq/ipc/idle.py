"""Idle strategies: what an agent does between passes that found no work.

What a process does when it has no work decides low-rate latency: spinning answers in about
2 µs but burns a core, parking costs a ~25 µs wake-up plus the waker's post (see perf-notes).
An agent calls ``idle(work)`` after every pass. The strategies are Aeron's:

- ``backoff`` (default): after work, spin, then ``sched_yield``, then park on the agent's
  semaphore. Adaptive: it spins (up to ``spin_us``) and yields (up to ``yield_us``) only
  while the gaps between bursts of work have lately been shorter than that window, so a
  client waiting on each answer (a sync send) finds the agent awake, and a steady trickle of
  work (a paced stream) lets it park at once instead of burning a core on two.
- ``busy_spin``: never park; for hosts with cores to spare (the broker warns below 4).
- ``park``: park at once after every idle pass.

A client that waits for the answer to what the agent just did (a sync send) comes back with
more as soon as it has read it, but its round trip is longer than the recent gaps allow a
spin: the agent then ``linger``s, staying awake ``linger_us`` after the answer (with
``backoff``), so that neither side pays a park per message. It lingers only while such
clients have lately come back within ``linger_us`` (a moving average of the time from one
answer to the next), so an occasional sync send costs no lingering. On hosts without cores
to spare it lingers in ``sched_yield``: awake for the sender, but giving the CPU to any other
runnable thread (reput, the consumers) at once.

A steady stream of small appends (``send_async`` and ``send_oneway`` in a loop) costs the
agent a pass, and the agents after it a wake-up, for every few records; on a small host
those fixed costs, not the records, take the CPU the senders need. With ``batch_linger_us``
an agent whose pass took at least ``batch_min`` records (and fewer than ``batch_max``, a pass
that already pays for itself) sleeps that long before the next pass, so that pass takes
what accumulated meanwhile; it is not parked then, so nobody posts it. A pass that answered
a client waiting for the answer (``linger``) never sleeps, and neither does a pass of one
record, so sync sends and paced streams keep their latency.

A park lasts at most ``park_us``; wakers post only when the agent said it parks. With
``park_max_us`` above it, an agent that stays idle doubles that bound park by park up to
``park_max_us``, and the first work brings it back. While work comes, what only a timeout
finds (nobody posts it) is found as soon as before; an idle agent costs a few wake-ups a
second, not a hundred (each ~100 µs of CPU on a small virtual machine, see perf-notes).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import posix_ipc

from shmq.ipc.segment import fence, wait

STRATEGIES = ("backoff", "busy_spin", "park")
SPARE_CPUS = 4  # fewer: an agent that spins takes the cores producers and consumers need
GAP_WEIGHT = 0.125  # of the newest gap in the moving average


@dataclass(frozen=True)
class IdleConfig:
    strategy: str = "backoff"
    spin_us: int = 50
    yield_us: int = 0
    park_us: int = 1000
    linger_us: int = 0
    batch_linger_us: int = 0
    batch_min: int = 4
    batch_max: int = 4096
    park_max_us: int = 0  # above park_us: the bound an idle agent's parks double up to


def spare_cpus() -> bool:
    """Whether this host has cores for agents that spin (busy_spin, linger)."""
    return (os.cpu_count() or 1) >= SPARE_CPUS


class IdleStrategy:
    """Backs off while idle. ``set_parked`` is called around the park so wakers can skip
    the post when nobody sleeps: set, re-check for work, then park."""

    def __init__(
        self,
        config: IdleConfig,
        sem: posix_ipc.Semaphore | None,
        set_parked: Callable[[bool], None] | None = None,
    ) -> None:
        self.config = config
        self.sem = sem
        self._set_parked = set_parked
        self._spin_s = config.spin_us / 1e6
        self._yield_s = config.yield_us / 1e6
        self._idle_since = 0.0  # when the current idle stretch began (0: working)
        self._gap = self._spin_s  # moving average of idle stretches, seconds
        self._linger_s = config.linger_us / 1e6
        self._linger_until = 0.0
        self._answered_at = 0.0  # when the last pass that answered a waiter ended
        self._answer_gap = 0.0  # moving average from one such answer to the next
        self._linger_yields = not spare_cpus()
        self._batch_s = config.batch_linger_us / 1e6
        self._answered_waiter = False  # this pass answered a client waiting for it
        self._park_s = config.park_us / 1e6  # this park's bound (doubles while idle)
        self._park_max_s = max(config.park_max_us, config.park_us) / 1e6
        self.parks = 0
        self.batch_lingers = 0

    def linger(self) -> None:
        """A client waits on the work just done and will likely bring more at once: stay
        awake ``linger_us`` from now while such clients lately came back within it, and do
        not sleep after this pass. A gap counts at most four lingers' worth, so one pause
        of the sender stops the lingering for a few answers, not for good."""
        now = time.perf_counter()
        if self._answered_at:
            gap = min(now - self._answered_at, 4 * self._linger_s)
            self._answer_gap += GAP_WEIGHT * (gap - self._answer_gap)
        self._answered_at = now
        if self._answer_gap < self._linger_s:
            self._linger_until = now + self._linger_s
        self._answered_waiter = True

    def idle(self, work: int, has_work: Callable[[], bool] | None = None) -> None:
        now = time.perf_counter()
        if work > 0:
            self._park_s = self.config.park_us / 1e6
            if self._idle_since:
                self._gap += GAP_WEIGHT * (now - self._idle_since - self._gap)
                self._idle_since = 0.0
            cfg = self.config
            waited_on = self._answered_waiter
            if self._batch_s and cfg.batch_min <= work < cfg.batch_max and not waited_on:
                self.batch_lingers += 1
                time.sleep(self._batch_s)
            elif has_work is not None and self._set_parked is not None and self._parks_next(now):
                # the next pass would find nothing and park: park now (the parked flag is
                # set before ``has_work`` looks, so what came meanwhile is not missed). A
                # paced stream's writer skips a pass per message (~3 µs).
                self._idle_since = now
                self._park(has_work)
            self._answered_waiter = False
            return
        if not self._idle_since:
            self._idle_since = now
        cfg = self.config
        if cfg.strategy == "busy_spin":
            return
        if cfg.strategy == "backoff":
            if now < self._linger_until:
                if self._linger_yields:
                    os.sched_yield()
                return
            idle_for = now - self._idle_since
            gap = self._gap
            if idle_for < self._spin_s and gap < self._spin_s:
                return  # work has been coming back sooner than a spin lasts: spin
            if idle_for < self._spin_s + self._yield_s and gap < self._spin_s + self._yield_s:
                os.sched_yield()
                return
        self._park(has_work)

    def _parks_next(self, now: float) -> bool:
        """Whether an idle pass right after work would park (no spin, yield or linger)."""
        strategy = self.config.strategy
        if strategy == "park":
            return True
        return (
            strategy == "backoff"
            and now >= self._linger_until
            and self._gap >= self._spin_s + self._yield_s
        )

    def _park(self, has_work: Callable[[], bool] | None) -> None:
        timeout = self._park_s
        self._park_s = min(timeout * 2, self._park_max_s)  # still idle next time: longer
        if self.sem is None:
            time.sleep(timeout)
            return
        if self._set_parked is not None:
            self._set_parked(True)
            fence()
        try:
            if has_work is None or not has_work():
                self.parks += 1
                wait(self.sem, timeout)
        finally:
            if self._set_parked is not None:
                self._set_parked(False)
