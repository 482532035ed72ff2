"""Wake the producer threads parked on a durability wait (SYNC_FLUSH, SYNC_MASTER).

A producer waiting for its records to be flushed and/or acknowledged by a slave publishes the
least CommitLog offset it waits for (``registry.WAIT_FLUSH_OFFSET``) and parks on its ring's
semaphore. Whichever agent advances one of the offsets ``counters.durable_offset`` is made
of (flush, HA) posts every producer whose wait that offset now covers: one flush or one
slave ack releases every send it covers (group commit).
"""

from __future__ import annotations

from shmq.ipc import registry as rg
from shmq.ipc.parking import post_parked
from shmq.ipc.segment import Segment, close_gone, open_semaphore


class ProducerWakeups:
    """An agent's posts to parked producers; semaphores opened once, closed when the
    producer leaves."""

    def __init__(self, registry: Segment, prefix: str, max_producers: int) -> None:
        self.registry = registry
        self.prefix = prefix
        self.max_producers = max_producers
        self._sems: dict[tuple[int, int], object] = {}
        self._version = -1

    def wake(self, durable: int) -> None:
        """Post every parked producer that waits for an offset at or below ``durable``."""
        words = self.registry.words
        active = rg.active_producers(words, self.max_producers)
        version = int(words[rg.VERSION])
        if version != self._version:  # a producer left: drop its semaphore
            self._version = version
            close_gone(self._sems, {(slot, gen) for slot, gen, _ in active})
        for slot, gen, _ in active:
            base = rg.producer_base(slot)
            want = int(words[base + rg.WAIT_FLUSH_OFFSET])
            parked = int(words[base + rg.PARKED])
            if parked <= 0 or not 0 < want <= durable:
                continue
            sem = self._sems.get((slot, gen))
            if sem is None:
                try:
                    sem = open_semaphore(rg.producer_sem_name(self.prefix, slot, gen))
                except Exception:  # the producer is leaving
                    continue
                self._sems[(slot, gen)] = sem
            post_parked(sem, parked)

    def close(self) -> None:
        for sem in self._sems.values():
            sem.close()
        self._sems.clear()
