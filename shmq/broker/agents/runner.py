"""The agent runner: one loop per agent process, with an idle strategy and a clean stop.

An agent has ``do_work() -> int``, ``has_work() -> bool`` (checked once more before parking),
``drain()`` (finish what is owed before a clean stop) and ``close()``. ``run_agent`` runs in
a process forked from the agent template (``template``): it ignores SIGINT (Ctrl-C reaches the
whole process group; the supervisor orders the stop), treats SIGTERM as a stop request, and
exits when the template, which the supervisor's death takes down, is gone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import signal
import sys
import time
from typing import Protocol

from shmq import files
from shmq.broker.agents.broker_names import BrokerNames
from shmq.broker.agents.env import AgentEnv
from shmq.broker.config.broker_config import BrokerConfig
from shmq.broker.config.tuning import TuningConfig, apply_runtime
from shmq.ipc import counters as cn
from shmq.ipc.segment import Segment, open_semaphore

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15
HEARTBEAT_EVERY_MS = 100


class Agent(Protocol):
    def do_work(self) -> int: ...
    def has_work(self) -> bool: ...
    def drain(self) -> None: ...
    def close(self) -> None: ...


def run_agent(kind: str, config: BrokerConfig, prefix: str, log_level: int) -> None:
    """Process entry point of one agent (forked from the agent template)."""
    logging.basicConfig(
        level=log_level,
        stream=sys.stderr,
        format=f"%(asctime)s %(levelname)-7s shmq.{kind}[%(process)d]: %(message)s",
        force=True,  # forked from the agent template: its handler goes
    )
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stop = {"requested": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(requested=True))
    die_with_parent()
    name_process(f"shmq-{kind}")
    parent = os.getppid()  # the agent template
    names = BrokerNames(prefix)
    # what this agent creates is as private (or shared with localClientGroup) as the rest
    files.set_file_mode(config.store.file_mode, config.store.local_client_gid)
    counters = Segment.attach(names.counters)
    cn.check(counters.words)
    env = AgentEnv(kind, config, names, counters)
    # only the module of the agent this process runs (and so only its kernels): the agent
    # modules never import the runner, and this is the one place that imports them
    agent: Agent
    match kind:
        case "writer":
            from shmq.broker.agents.writer import Writer

            agent = Writer(env)
        case "reput":
            from shmq.broker.agents.reput import Reput

            agent = Reput(env)
        case "flush":
            from shmq.broker.agents.flush import Flush

            agent = Flush(env)
        case "cleaner":
            from shmq.broker.agents.cleaner import Cleaner

            agent = Cleaner(env)
        case "schedule":
            from shmq.broker.agents.schedule import Schedule

            agent = Schedule(env)
        case "ha" if config.is_slave:
            from shmq.broker.agents.ha_client import HAClient

            agent = HAClient(env)
        case "ha":
            from shmq.broker.agents.ha_service import HAService

            agent = HAService(env)
        case _:
            raise ValueError(f"no agent of kind {kind!r}")
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
                if os.getppid() != parent:
                    log.error("the agent template %d is gone: stopping", parent)
                    break
            idle.idle(work, agent.has_work)
        agent.drain()
    finally:
        agent.close()
        cn.publish(words, cn.agent_word(kind, cn.PID), 0)
        sem.close()
        counters.close()
    log.info("%s agent stopped", kind)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def die_with_parent() -> None:
    """Ask the kernel to SIGTERM this agent when the agent template dies (no orphans)."""
    _libc().prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def name_process(name: str) -> None:
    """Name this process ``name`` (at most 15 bytes) as ``top``, ``ps -o comm``, ``pidstat``
    and /proc/PID/comm show it: every agent is otherwise one more ``python`` forked from the
    template, and which of them takes the CPU is the first question about a broker."""
    _libc().prctl(PR_SET_NAME, name.encode()[:15])
