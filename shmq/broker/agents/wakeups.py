"""Who a new CommitLog end wakes, and how often.

Whoever moves the write offset (the writer on a master, the HA client on a slave) wakes the
agents that follow it: reput (dispatch), flush when it flushes on demand (SYNC_FLUSH), and
a master's HA agent (new bytes for the slaves); the flush agent of a SYNC_FLUSH broker wakes
reput in turn, which dispatches flushed bytes only. Each is posted at most once per park
(``parking.ParkedAgent``): an appender that publishes many times while an agent sleeps or
wakes posts it once, not once per pass (each post is a syscall here and a spurious wake-up
there).
"""

from __future__ import annotations

from shmq.broker.agents.broker_names import BrokerNames
from shmq.ipc import counters as cn
from shmq.ipc.parking import ParkedAgent
from shmq.ipc.segment import open_semaphore

# the words an agent parks with: (parked flag, park count raised before the flag is set)
PARK_WORDS = {
    "writer": (cn.WRITER_PARKED, cn.WRITER_PARKS),
    "reput": (cn.REPUT_PARKED, cn.REPUT_PARKS),
    "flush": (cn.FLUSH_PARKED, cn.FLUSH_PARKS),
    "ha": (cn.agent_word("ha", cn.AGENT_PARKED), cn.agent_word("ha", cn.AGENT_PARKS)),
}


class AgentWakeups:
    """Posts the agents ``kinds`` once per park; call ``wake`` after a fence that follows
    the publication of the new offset."""

    def __init__(self, words, names: BrokerNames, kinds: tuple[str, ...]) -> None:
        self._sems = [open_semaphore(names.agent_sem(kind)) for kind in kinds]
        self._agents = [ParkedAgent(words, *PARK_WORDS[kind], sem)
                        for kind, sem in zip(kinds, self._sems, strict=True)]  # fmt: skip

    def wake(self) -> None:
        for agent in self._agents:
            agent.wake()

    def close(self) -> None:
        for sem in self._sems:
            sem.close()


def parked_flag(words, kind: str, when=None):
    """An idle strategy's ``set_parked`` for ``kind``: its park count raised, then its parked
    flag set (only while ``when()`` holds, if given: an agent with nothing to do for an
    appender need not be posted by it)."""
    parked_word, parks_word = PARK_WORDS[kind]

    def set_parked(parked: bool) -> None:
        parked = parked and (when is None or when())
        if parked:
            cn.publish(words, parks_word, int(words[parks_word]) + 1)
        cn.publish(words, parked_word, int(parked))

    return set_parked
