"""The agent runner: one loop per agent process, with an idle strategy and a clean stop.

An agent has ``do_work() -> int``, ``has_work() -> bool`` (checked once more before parking),
``drain()`` (finish what is owed before a clean stop) and ``close()``. ``run_agent`` is the
``spawn`` target: it ignores SIGINT (Ctrl-C reaches the whole process group; the supervisor
orders the stop), treats SIGTERM as a stop request, and exits when the supervisor is gone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import posix_ipc

from shmq import files
from shmq.broker.agents.wakeups import parked_flag
from shmq.broker.config.broker_config import BrokerConfig
from shmq.broker.config.tuning import TuningConfig, apply_runtime
from shmq.ipc import counters as cn
from shmq.ipc.idle import IdleConfig, IdleStrategy
from shmq.ipc.segment import Segment, open_semaphore

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
HEARTBEAT_EVERY_MS = 100


@dataclass(frozen=True)
class BrokerNames:
    """Names of the broker's shared segments and agent semaphores (derived from a prefix)."""

    prefix: str

    @property
    def counters(self) -> str:
        return f"{self.prefix}.counters"

    @property
    def topics(self) -> str:
        return f"{self.prefix}.topics"

    @property
    def queues(self) -> str:
        return f"{self.prefix}.queues"

    @property
    def registry(self) -> str:
        return f"{self.prefix}.registry"

    @property
    def consumer_gets(self) -> str:
        return f"{self.prefix}.gets"

    def agent_sem(self, kind: str) -> str:
        return f"{self.prefix}.{kind}"

    @property
    def ha_table(self) -> str:
        return f"{self.prefix}.ha"

    @property
    def supervisor_sem(self) -> str:
        return f"{self.prefix}.supervisor"


class Agent(Protocol):
    def do_work(self) -> int: ...
    def has_work(self) -> bool: ...
    def drain(self) -> None: ...
    def close(self) -> None: ...


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
        few records); with ``busy_spin`` reput spins too. Otherwise the
        agents park: on a small host a second spinner takes the core that producers and
        consumers need (see perf-notes)."""
        c = self.config
        if self.kind == "writer":
            return IdleConfig(c.idle_strategy, c.idle_spin_us, c.idle_yield_us, c.idle_park_us,
                              c.idle_linger_us, c.idle_batch_linger_us,
                              c.idle_batch_min)  # fmt: skip
        if self.kind == "reput" and c.idle_strategy == "busy_spin":
            return IdleConfig(c.idle_strategy, c.idle_spin_us, c.idle_yield_us, c.idle_park_us)
        return IdleConfig("park", park_us=c.idle_park_us)

    def idle_strategy(self, sem: posix_ipc.Semaphore) -> IdleStrategy:
        """The agent's idle strategy, parking on ``sem`` with its parked flag."""
        return IdleStrategy(self.idle_config(), sem, parked_flag(self.words, self.kind))


def run_agent(kind: str, config: BrokerConfig, prefix: str, log_level: int) -> None:
    """Process entry point of one agent (``multiprocessing`` spawn target)."""
    from shmq.broker.agents import cleaner, flush, ha_client, ha_service, reput, schedule, writer

    logging.basicConfig(
        level=log_level,
        stream=sys.stderr,
        format=f"%(asctime)s %(levelname)-7s shmq.{kind}[%(process)d]: %(message)s",
    )
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stop = {"requested": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(requested=True))
    _die_with_parent()
    supervisor = os.getppid()
    names = BrokerNames(prefix)
    files.set_file_mode(config.store.file_mode)  # what this agent creates is private too
    counters = Segment.attach(names.counters)
    cn.check(counters.words)
    env = AgentEnv(kind, config, names, counters)
    factories = {
        "writer": writer.Writer,
        "reput": reput.Reput,
        "flush": flush.Flush,
        "cleaner": cleaner.Cleaner,
        "schedule": schedule.Schedule,
        "ha": ha_client.HAClient if config.is_slave else ha_service.HAService,
    }
    agent = factories[kind](env)
    for line in apply_runtime(TuningConfig.from_mapping(config.tuning), kind, [counters.mm]):
        log.info("tuning: %s", line)
    words = counters.words
    sem = open_semaphore(names.agent_sem(kind))
    idle = getattr(agent, "idle", None) or env.idle_strategy(sem)
    cn.publish(words, cn.agent_word(kind, cn.PID), os.getpid())
    stop_word = cn.agent_word(kind, cn.STOP)
    beat_word = cn.agent_word(kind, cn.HEARTBEAT_MS)
    log.info("%s agent started", kind)
    last_beat = 0
    try:
        while not stop["requested"] and not words[stop_word]:
            work = agent.do_work()
            now = time.monotonic_ns() // 1_000_000
            if now - last_beat >= HEARTBEAT_EVERY_MS:
                last_beat = now
                cn.publish(words, beat_word, time.time_ns() // 1_000_000)
                if os.getppid() != supervisor:
                    log.error("supervisor %d is gone: stopping", supervisor)
                    break
            idle.idle(work, agent.has_work)
        agent.drain()
    finally:
        agent.close()
        cn.publish(words, cn.agent_word(kind, cn.PID), 0)
        sem.close()
        counters.close()
    log.info("%s agent stopped", kind)


def _die_with_parent() -> None:
    """Ask the kernel to SIGTERM this agent when the supervisor dies (no orphans)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
