"""Long polling for TCP pulls (RocketMQ 4.9's ``PullRequestHoldService``).

A pull that finds nothing, with the suspend bit set, is held instead of answered. One
thread answers held pulls: it is registered as a consumer of the broker's own (a consumer
slot in the client registry), so reput, after each dispatch pass, posts its semaphore when
a queue it watches grew, exactly as it wakes shmq's own consumers; the thread watches the
queue-table slots of the queues with held pulls (any queue when there are more than a slot
line holds, or one is not in the table yet). Woken, it re-runs each held pull whose queue
grew past what it last saw: an answer with messages (or anything but "nothing the
subscription takes") goes back on the pull's connection; otherwise the pull stays held.
A held pull is answered as it stands once its ``suspendTimeoutMillis`` passes. The
semaphore wait ends at the nearest deadline, or after ``FALLBACK_S`` at most (a lost post
is noticed late, never missed). No thread parks while nothing is held.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from shmq.broker.context import DataPathContext
from shmq.errors import RemotingError
from shmq.ipc import registry as rg
from shmq.ipc.parking import Parking
from shmq.ipc.segment import open_semaphore, post
from shmq.remoting.protocol import RemotingCommand
from shmq.remoting.server import Connection

log = logging.getLogger(__name__)

FALLBACK_S = 1.0


@dataclass
class HeldPull:
    """One held request: its request and connection, the queues it waits on (a pull: one;
    a POP of every queue: all of the topic's and its retry topic's) and their max offsets'
    sum when it was held (they only grow: a larger sum is a queue that grew)."""

    request: RemotingCommand
    conn: Connection
    queues: tuple[tuple[str, int], ...]
    seen: int  # answer once the queues' max offsets sum beyond this
    timeout_ms: int
    deadline: float = field(init=False)

    def __post_init__(self) -> None:
        self.deadline = time.monotonic() + self.timeout_ms / 1000


# answers a held pull: its response, or None to hold it further (``final``: it must answer)
Answer = Callable[[HeldPull, bool], RemotingCommand | None]


class PullHold:
    """The held pulls and the thread that answers them."""

    def __init__(self, ctx: DataPathContext, answer: Answer, max_held: int, name: str) -> None:
        self.ctx = ctx
        self.store = ctx.store
        self.answer = answer
        self.slot = ctx.consumer_slot(name)
        self.sem = open_semaphore(self.slot.sem_name)
        self.reg = ctx.registry.words
        self.base = rg.consumer_base(ctx.config.max_producers, self.slot.index)
        self.parking = Parking(self.reg, self.base + rg.PARKED, self.sem)
        self._held: list[HeldPull] = []
        self._max_held = max_held  # beyond, a request is answered at once
        self._lock = threading.Lock()
        self._added = threading.Event()  # a pull was held since the thread last looked
        self._poked = False  # re-run every held request (``poke``)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def suspend(self, held: HeldPull) -> bool:
        """Hold ``held``; False when too many are held (answer it now)."""
        with self._lock:
            if len(self._held) >= self._max_held:
                return False
            self._held.append(held)
        self._added.set()
        post(self.sem)  # the thread re-reads what to watch
        return True

    def poke(self) -> None:
        """Re-run every held request now: something other than a queue's growth may let
        them find messages (a FIFO queue unblocked by an ack)."""
        self._poked = True
        self._added.set()
        post(self.sem)

    def level(self, queues: tuple[tuple[str, int], ...]) -> int:
        """The sum of ``queues``' max offsets (a held request's ``seen``)."""
        return sum(self.store.max_offset(t, q) for t, q in queues)

    def held_requests(self) -> list[HeldPull]:
        """The requests held now (a copy)."""
        with self._lock:
            return list(self._held)

    def held(self) -> int:
        with self._lock:
            return len(self._held)

    def close(self) -> None:
        self._stop.set()
        self._added.set()
        post(self.sem)
        self._thread.join(5)
        self.sem.close()
        self.ctx.release_consumer_slot(self.slot)

    # -- the thread -------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._pass()
            except Exception:
                log.exception("pull hold pass failed")
                self._stop.wait(FALLBACK_S)

    def _pass(self) -> None:
        with self._lock:
            held = list(self._held)
        if not held:
            self._added.wait(FALLBACK_S)
            self._added.clear()
            return
        self._added.clear()
        keys = {key for h in held for key in h.queues}
        slots = [self.store.slot(t, q) for t, q in keys]
        rg.set_watch(self.reg, self.base, None if min(slots) < 0 else slots)
        now = time.monotonic()
        nearest = min(h.deadline for h in held)
        self.parking.park(
            lambda: self._stop.is_set() or self._added.is_set() or self._ready(held),
            max(0.0, min(nearest - now, FALLBACK_S)),
        )
        self._answer(held)

    def _ready(self, held: list[HeldPull]) -> bool:
        return any(self.level(h.queues) > h.seen for h in held) or (
            time.monotonic() >= min(h.deadline for h in held)
        )

    def _answer(self, held: list[HeldPull]) -> None:
        """Re-run the held pulls whose queue grew or whose time is up; those answered leave
        the table before their answers go out."""
        now = time.monotonic()
        poked, self._poked = self._poked, False
        done: list[tuple[HeldPull, RemotingCommand]] = []
        for h in held:
            final = now >= h.deadline
            grown = self.level(h.queues)
            if not final and grown <= h.seen and not poked:
                continue
            h.seen = grown
            response = self.answer(h, final)
            if response is not None:
                done.append((h, response))
        if not done:
            return
        gone = {id(h) for h, _ in done}
        with self._lock:
            self._held = [h for h in self._held if id(h) not in gone]
        for h, response in done:
            if h.request.is_oneway:
                continue
            try:
                h.conn.send(response)
            except RemotingError as exc:
                log.debug("held pull not answered: %s", exc)
