"""Producers' and consumers' shared-memory slots: allocation, liveness and release.

The supervisor is the only writer of slot definitions in the registry. A slot's ring segment
and semaphore exist from registration to release; a client whose process is gone is
released by ``reap`` (the writer drains its ring first, because it detaches only when the
slot changes). A consumer slot's reads are counted from its holder's registration to its
release (``get_counts``)."""

from __future__ import annotations

import logging
import secrets
import threading
from dataclasses import dataclass

from shmq.broker.config.broker_config import BrokerConfig
from shmq.broker.config.tuning import TuningConfig, pretouch
from shmq.broker.stats.get_counts import GetCounts
from shmq.errors import ShmqError
from shmq.ipc import registry as rg
from shmq.ipc import ring
from shmq.ipc.procs import pid_alive
from shmq.ipc.segment import Segment, create_semaphore, unlink_semaphore

log = logging.getLogger(__name__)


@dataclass
class ClientSlot:
    kind: str  # "producer" or "consumer"
    index: int
    gen: int
    pid: int
    group: str
    segment: Segment | None
    sem_name: str


class ClientSlots:
    def __init__(
        self, config: BrokerConfig, prefix: str, registry: Segment, gets: GetCounts
    ) -> None:
        self.config = config
        self.prefix = prefix
        self.registry = registry
        self.gets = gets
        self.words = registry.words
        self.lock = threading.Lock()
        self.slots: dict[tuple[str, int], ClientSlot] = {}
        self._gen = 0  # the last slot's generation: random, so no name can be guessed
        self._closed = False  # set by close(): a request still in flight gets no slot
        self.pretouch = TuningConfig.from_mapping(config.tuning).pretouch

    def register_producer(self, pid: int, group: str, account: int = 0) -> ClientSlot:
        """A ring for producer ``group`` of process ``pid``; ``account``: the registry's
        ACCOUNT word (``registry.account_id``; 0: the ring may write any topic)."""
        cfg = self.config
        with self.lock:
            index = self._free_index("producer", cfg.max_producers)
            gen = self._next_gen()
            name = rg.ring_name(self.prefix, index, gen)
            segment = Segment.create(name, ring.segment_size(cfg.ring_size, cfg.ring_slots))
            try:
                ring.init(segment.words, cfg.ring_size, cfg.ring_slots)
                if self.pretouch:  # [tuning] pretouch: the producer's first sends fault nothing
                    pretouch(segment.mm)
                sem_name = rg.producer_sem_name(self.prefix, index, gen)
                create_semaphore(sem_name).close()
            except BaseException:
                segment.destroy()
                raise
            slot = ClientSlot("producer", index, gen, pid, group, segment, sem_name)
            self.slots[("producer", index)] = slot
            rg.set_slot(self.words, rg.producer_base(index), rg.ACTIVE, pid, gen, account)
            log.info("producer %s (pid %d) got ring %d.%d", group, pid, index, gen)
            return slot

    def producer_pids(self, group: str) -> list[int]:
        """The processes of this host holding a producer ring for ``group``."""
        with self.lock:
            return sorted({s.pid for s in self.slots.values()
                           if s.kind == "producer" and s.group == group})  # fmt: skip

    def register_consumer(self, pid: int, group: str) -> ClientSlot:
        with self.lock:
            index = self._free_index("consumer", self.config.max_consumers)
            self._next_gen()
            sem_name = rg.consumer_sem_name(self.prefix, index, self._gen)
            create_semaphore(sem_name).close()
            slot = ClientSlot("consumer", index, self._gen, pid, group, None, sem_name)
            self.slots[("consumer", index)] = slot
            self.gets.hold(index, group)
            rg.set_slot(
                self.words,
                rg.consumer_base(self.config.max_producers, index),
                rg.ACTIVE,
                pid,
                self._gen,
            )
            return slot

    def _next_gen(self) -> int:
        """A slot's generation, which its segment's and semaphore's names carry: random
        (62 bits, never 0) rather than counted, so another user who lists ``/dev/shm`` cannot
        create the next client's names first and make its registration fail."""
        gen = self._gen
        while gen == self._gen:
            gen = secrets.randbits(62) or 1
        self._gen = gen
        return gen

    def _free_index(self, kind: str, capacity: int) -> int:
        if self._closed:
            raise ShmqError("the broker is stopping: no new client slots")
        for i in range(capacity):
            if (kind, i) not in self.slots:
                return i
        limit = "maxProducers" if kind == "producer" else "maxConsumers"
        raise ShmqError(f"all {capacity} {kind} slots are taken ({limit})")

    def release(self, kind: str, index: int, gen: int) -> bool:
        with self.lock:
            slot = self.slots.get((kind, index))
            if slot is None or slot.gen != gen:
                return False
            del self.slots[(kind, index)]
            base = (
                rg.producer_base(index)
                if kind == "producer"
                else rg.consumer_base(self.config.max_producers, index)
            )
            if kind == "consumer":  # what it read since the last look, before a new holder
                self.gets.release(index)
            rg.set_slot(self.words, base, rg.FREE, 0, 0)
            if slot.segment is not None:
                slot.segment.destroy()  # the writer keeps its mapping until it detaches
            unlink_semaphore(slot.sem_name)
            log.info("%s %s (pid %d) released slot %d", kind, slot.group, slot.pid, index)
            return True

    def fence_producer(self, index: int, gen: int, write_offset: int) -> bool:
        """Mark producer slot ``index`` (generation ``gen``) FENCED: the writer stops reading
        its ring and the producer's sends fail, naming why; the slot is released as usual
        when the producer unregisters or dies. The ring is settled from its journal first
        (``ring.settle_journal``, ``write_offset``: the dead writer's last published one),
        so what the dead writer stored from it is answered, not sent again."""
        with self.lock:
            slot = self.slots.get(("producer", index))
            if slot is None or slot.gen != gen:
                return False
            if slot.segment is not None:
                ring.settle_journal(slot.segment.words, write_offset)
            rg.set_slot(self.words, rg.producer_base(index), rg.FENCED, slot.pid, gen)
            return True

    def _fence_reason(self, slot: ClientSlot) -> str | None:
        if int(self.words[rg.producer_base(slot.index) + rg.STATE]) == rg.FENCED:
            return ring.FENCES[ring.FENCE_CRASH]
        return ring.load_fence(slot.segment.words)

    def reap(self) -> None:
        """Release the slots of client processes that no longer exist."""
        for (kind, index), slot in list(self.slots.items()):
            if not pid_alive(slot.pid):
                log.warning("%s pid %d of group %s is gone", kind, slot.pid, slot.group)
                self.release(kind, index, slot.gen)

    def close(self) -> None:
        with self.lock:
            self._closed = True
        for (kind, index), slot in list(self.slots.items()):
            self.release(kind, index, slot.gen)

    def stats(self) -> list[dict]:
        out = []
        for slot in list(self.slots.values()):
            row = {"kind": slot.kind, "slot": slot.index, "pid": slot.pid, "group": slot.group}
            if slot.segment is not None and slot.segment.words is not None:
                w = slot.segment.words
                row.update(
                    ring_bytes=int(w[ring.CAPACITY]),
                    used_bytes=int(w[ring.TAIL]) - int(w[ring.HEAD]),
                    records=int(w[ring.SEQ_TAIL]),
                    answered=int(w[ring.SEQ_HEAD]),
                    fenced=self._fence_reason(slot) or "",
                )
            out.append(row)
        return out
