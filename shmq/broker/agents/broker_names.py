"""The names of one broker's shared-memory segments and semaphores, derived from its prefix.

The supervisor creates them under a fresh prefix and passes the prefix to every agent it
spawns; the agents, their environment (``env``) and their wake-ups (``wakeups``) open them by
these names. A module of its own, so that each of them imports it without importing another.
"""

from __future__ import annotations

from dataclasses import dataclass


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
