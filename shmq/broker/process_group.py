"""The broker's process group as the supervisor runs it: which agents this role runs, each
one's process and wake-up semaphore, and why the group stopped itself if it did.

Only the supervisor starts, restarts and stops agents and writes this table; processors
read it for the runtime info (GET_BROKER_RUNTIME_INFO) and wake an agent that has work
(the writer after a topic deletion, the cleaner for DELETE_EXPIRED_COMMITLOG). Agents are
forked from the agent template (``shmq.broker.agents.template``), which the supervisor
spawns first thing so it preloads while the store recovers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shmq.broker.agents.template import AgentTemplate
from shmq.broker.config.broker_config import BrokerConfig
from shmq.ipc.segment import post


class ProcessGroup:
    """``kinds``: the agents this role runs (a promotion changes them); ``procs``: kind →
    its current process; ``sems``: kind → its wake-up semaphore; ``stop_reason``: why the
    broker stopped itself (empty: asked to stop, or running); ``template``: where agents
    are forked from (``on_exit`` runs when one ends)."""

    def __init__(self, kinds: tuple[str, ...], log_level: int, on_exit: Callable[[], None]) -> None:
        self.kinds = kinds
        self.procs: dict[str, Any] = {}
        self.sems: dict[str, Any] = {}
        self.stop_reason = ""
        self.template = AgentTemplate(log_level, on_exit)

    def start(self, kind: str, config: BrokerConfig, prefix: str) -> None:
        """Start the ``kind`` agent (its previous process, if any, has ended)."""
        self.procs[kind] = self.template.start_agent(kind, config, prefix)

    def wake(self, kind: str) -> None:
        """Post ``kind``'s semaphore: a parked agent looks for work now."""
        post(self.sems[kind])

    def processes(self) -> dict[str, dict[str, Any]]:
        """Per agent this role runs: its process id (None before its first start) and
        whether it is alive."""
        rows = {}
        for kind in self.kinds:
            proc = self.procs.get(kind)
            rows[kind] = {
                "pid": proc.pid if proc is not None else None,
                "alive": bool(proc is not None and proc.is_alive()),
            }
        return rows
