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


def test_an_appender_wakes_its_followers_once_per_park_each():
    """The writer's followers (reput, flush, HA) park through ``parked_flag`` and are posted
    through ``AgentWakeups``: each once per park, and an HA agent without slaves never."""
    from shmq.broker.agents.broker_names import BrokerNames
    from shmq.broker.agents.wakeups import AgentWakeups, parked_flag
    from shmq.ipc import counters as cn

    names = BrokerNames(f"/shmq-test-wakeups-{os.getpid()}")
    kinds = ("reput", "flush", "ha")
    sems = {kind: create_semaphore(names.agent_sem(kind)) for kind in kinds}
    try:
        words = np.zeros(cn.SIZE // 8, dtype=np.int64)
        followers = AgentWakeups(words, names, kinds)
        slaves: list[str] = []
        parks = {"reput": parked_flag(words, "reput"), "flush": parked_flag(words, "flush"),
                 "ha": parked_flag(words, "ha", lambda: bool(slaves))}  # fmt: skip
        for set_parked in parks.values():
            set_parked(True)
        for _ in range(3):
            followers.wake()
        assert {k: s.value for k, s in sems.items()} == {"reput": 1, "flush": 1, "ha": 0}
        for kind in ("reput", "flush"):  # they wake, work, and park again
            sems[kind].acquire(0)
            parks[kind](False)
            parks[kind](True)
        slaves.append("a slave")
        parks["ha"](True)
        for _ in range(3):
            followers.wake()
        assert {k: s.value for k, s in sems.items()} == {"reput": 1, "flush": 1, "ha": 1}
        assert words[cn.REPUT_PARKS] == 2 and words[cn.agent_word("ha", cn.AGENT_PARKS)] == 1
        followers.close()
    finally:
        for sem in sems.values():
            sem.close()
            unlink_semaphore(sem.name)
