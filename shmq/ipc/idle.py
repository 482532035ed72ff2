"""Idle strategies: spin, then yield, then park on a semaphore.

What a process does when it has no work decides low-rate latency: spinning answers in about
2 µs but burns a core, parking costs a ~25 µs wake-up (see perf-notes). An agent or client
calls ``idle(work)`` after every pass; any work resets the strategy to spinning.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import posix_ipc

from shmq.ipc.segment import fence, wait


@dataclass(frozen=True)
class IdleConfig:
    """``spins`` busy passes, then ``yields`` passes with ``sched_yield``, then parks of at
    most ``park_us`` microseconds on the semaphore (re-checking work after each)."""

    spins: int = 20
    yields: int = 0
    park_us: int = 1000


class IdleStrategy:
    """Backs off while idle. ``parked`` is set around the park so wakers can skip the post
    when nobody sleeps: call ``set_parked(True)``, re-check for work, then park."""

    def __init__(
        self,
        config: IdleConfig,
        sem: posix_ipc.Semaphore | None,
        set_parked: Callable[[bool], None] | None = None,
    ) -> None:
        self.config = config
        self.sem = sem
        self._set_parked = set_parked
        self._count = 0

    def idle(self, work: int, has_work: Callable[[], bool] | None = None) -> None:
        if work > 0:
            self._count = 0
            return
        self._count += 1
        cfg = self.config
        if self._count <= cfg.spins:
            return
        if self._count <= cfg.spins + cfg.yields:
            os.sched_yield()
            return
        timeout = cfg.park_us / 1e6
        if self.sem is None:
            time.sleep(timeout)
            return
        if self._set_parked is not None:
            self._set_parked(True)
            fence()
        try:
            if has_work is None or not has_work():
                wait(self.sem, timeout)
        finally:
            if self._set_parked is not None:
                self._set_parked(False)

    def reset(self) -> None:
        self._count = 0
