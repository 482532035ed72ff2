"""What the runner hands every agent it starts (``AgentEnv``): config, names, the counters
segment, and the idle strategy the agent's kind is configured for.

Agents import this module, never the runner: the runner imports the agent it runs, so the
dependency points one way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import posix_ipc

from shmq.broker.agents.broker_names import BrokerNames
from shmq.broker.agents.wakeups import parked_flag
from shmq.broker.config.broker_config import BrokerConfig
from shmq.ipc.idle import IdleConfig, IdleStrategy
from shmq.ipc.segment import Segment

# An idle agent's parks double up to this (``IdleConfig.park_max_us``): every waker posts
# (producers, topic changes, a stop), so the bound only limits what a pass finds late
# without one (a deleted file to unmap, a disk-full retry), and an idle writer wakes 5
# times a second instead of 100 (~1.3 % of a core here).
IDLE_PARK_MAX_US = 200_000


@dataclass
class AgentEnv:
    """What every agent gets: config, names, the counters and its wake semaphore."""

    kind: str
    config: BrokerConfig
    names: BrokerNames
    counters: Segment

    @property
    def words(self) -> np.ndarray:
        return self.counters.words

    def idle_config(self) -> IdleConfig:
        """The writer backs off as configured (adaptive: it spins only while work keeps
        coming back sooner than a spin, and sleeps ``idleBatchLingerUs`` after a pass of a
        few records); with ``busy_spin`` reput spins too, where it runs. Otherwise the
        agents park: on a small host a second spinner takes the core that producers and
        consumers need (see perf-notes)."""
        c = self.config
        if self.kind == "writer":
            return IdleConfig(c.idle_strategy, c.idle_spin_us, c.idle_yield_us, c.idle_park_us,
                              c.idle_linger_us, c.idle_batch_linger_us, c.idle_batch_min,
                              park_max_us=IDLE_PARK_MAX_US)  # fmt: skip
        if self.kind == "reput" and c.idle_strategy == "busy_spin":
            return IdleConfig(c.idle_strategy, c.idle_spin_us, c.idle_yield_us, c.idle_park_us)
        return IdleConfig("park", park_us=c.idle_park_us, park_max_us=IDLE_PARK_MAX_US)

    def idle_strategy(self, sem: posix_ipc.Semaphore) -> IdleStrategy:
        """The agent's idle strategy, parking on ``sem`` with its parked flag."""
        return IdleStrategy(self.idle_config(), sem, parked_flag(self.words, self.kind))
