"""``ParkedAgent``: a waker posts a parked broker agent once per park, however often it has
new work for it before the agent is up again (a post per pass cost the writer a syscall per
pass and reput a spurious wake-up per extra post)."""

from __future__ import annotations

import os

import numpy as np

from shmq.ipc.parking import ParkedAgent
from shmq.ipc.segment import create_semaphore, unlink_semaphore

PARKED, PARKS = 0, 1


def test_an_agent_is_posted_once_per_park():
    name = f"/shmq-test-parked-agent-{os.getpid()}"
    sem = create_semaphore(name)
    try:
        words = np.zeros(2, dtype=np.int64)
        waker = ParkedAgent(words, PARKED, PARKS, sem)
        waker.wake()
        assert sem.value == 0  # working: nobody to post
        words[PARKS], words[PARKED] = 1, 1  # the agent counts its park, then parks
        for _ in range(5):
            waker.wake()
        assert sem.value == 1
        sem.acquire(0)  # the agent wakes, works, and parks again
        words[PARKS] = 2
        waker.wake()
        waker.wake()
        assert sem.value == 1
        words[PARKED] = 0
        sem.acquire(0)
        waker.wake()
        assert sem.value == 0
    finally:
        sem.close()
        unlink_semaphore(name)
