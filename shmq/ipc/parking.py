"""Threads of one client process parked on the client's semaphore, counted in a shared word.

A client (a producer's ring, a consumer's queue reader) has one semaphore, but several of its
threads may wait on it at once: sync senders, the async completion thread, pull threads.
Each one that parks adds itself to ``PARKED``, a word of the client's registry line that the
agents read after publishing new work; the agent then posts the semaphore once per parked
thread (``post_parked``), so every waiter wakes and none clears another's flag.

The handshake is the usual one: the waiter stores the count, fences, re-checks its condition
and only then parks; the agent stores its counter, fences, loads the count. A wake-up that
was due but never came shows as a park that timed out although its condition had become
true: ``missed_wakeups`` counts those (tests assert it stays 0).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import posix_ipc

from shmq.ipc.segment import fence, post, wait

# A client writes its count, so an agent never trusts it beyond this many posts.
MAX_POSTS = 64


class Parking:
    """The parked threads of this process on ``sem``, published in ``words[index]``."""

    def __init__(self, words: np.ndarray, index: int, sem: posix_ipc.Semaphore) -> None:
        self.words = words
        self.index = index
        self.sem = sem
        self.count = 0
        self.lock = threading.Lock()
        self.parks = 0
        self.missed_wakeups = 0

    def _publish(self, delta: int) -> None:
        with self.lock:
            self.count += delta
            self.words[self.index] = self.count

    def park(self, done: Callable[[], bool], timeout: float) -> bool:
        """Park until posted or ``timeout`` seconds, unless ``done()`` already holds;
        returns ``done()``."""
        self._publish(1)
        fence()
        try:
            if done():
                return True
            self.parks += 1
            posted = wait(self.sem, timeout)
        finally:
            self._publish(-1)
        finished = done()
        if finished and not posted:
            self.missed_wakeups += 1
        return finished


def post_parked(sem: posix_ipc.Semaphore, parked: int) -> None:
    """Agent side: wake every thread a client says is parked (at most ``MAX_POSTS``)."""
    for _ in range(min(int(parked), MAX_POSTS)):
        post(sem)


class ParkedAgent:
    """Wakes a broker agent that parks on ``sem`` once per park. The agent raises its park
    count (``parks_word``) before it sets its parked flag (``parked_word``), and re-checks
    for work after; a waker that already posted this park does not post again, so an agent
    that takes a while to wake is not posted once per item of work meanwhile (each post a
    syscall here, and a spurious wake-up of the agent later)."""

    __slots__ = ("parked_word", "parks_word", "posted", "sem", "words")

    def __init__(self, words, parked_word: int, parks_word: int, sem: posix_ipc.Semaphore):
        self.words = words
        self.parked_word = parked_word
        self.parks_word = parks_word
        self.sem = sem
        self.posted = -1  # the park last posted

    def wake(self) -> None:
        """Post if the agent parks and this park was not posted yet (call after a fence
        that follows the publication of the work)."""
        words = self.words
        if words[self.parked_word]:
            parks = words[self.parks_word]
            if parks != self.posted:
                self.posted = parks
                post(self.sem)
