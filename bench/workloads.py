"""The five workloads of issue 6 and the concrete case one system runs for one of them.

A ``Workload`` is what is compared (the same for every system); a ``Case`` is one run of it
by one system through one of its APIs, with the message count that system can finish in the
time budget. Cases are plain picklable dataclasses because they travel to the ``spawn``ed
producer and consumer processes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

QUICK_DIVISOR = 10  # --quick runs a tenth of every count (CI must finish in minutes)


@dataclass(frozen=True)
class Workload:
    """One comparison: ``messages`` in total from ``producers`` processes to one consumer.

    ``rate`` > 0 paces the sends (msgs/s in total) and turns on latency measurement from
    each message's intended send time; ``sync`` asks for a synchronous flush to disk before
    a send counts (only durable systems can run it).
    """

    name: str
    messages: int
    body_size: int
    producers: int = 1
    rate: float = 0.0
    sync: bool = False

    @property
    def latency(self) -> bool:
        return self.rate > 0

    @property
    def title(self) -> str:
        """What the workload sends, made from its fields so that the count printed is the
        one run (``scaled`` divides it for ``--quick``)."""
        kib, rest = divmod(self.body_size, 1024)
        size = f"{kib} KiB" if kib and not rest else f"{self.body_size} B"
        parts = [f"{self.messages:,} × {size}"]
        if self.latency:
            parts.append(f"latency at a paced {self.rate:,.0f} msg/s")
        if self.sync:
            parts.append("SYNC_FLUSH")
        senders = "1 producer" if self.producers == 1 else f"{self.producers} producers"
        parts.append(f"{senders} → 1 consumer")
        return ", ".join(parts)

    @property
    def flavor(self) -> str:
        """Which server configuration the workload needs: ``sync`` (fsync before ack) or
        ``async`` (the durable default of each system)."""
        return "sync" if self.sync else "async"

    def scaled(self, quick: bool) -> Workload:
        """The workload with its count divided for ``--quick`` (rate unchanged)."""
        if not quick:
            return self
        return dataclasses.replace(self, messages=max(self.messages // QUICK_DIVISOR, 100))


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("W1", 1_000_000, 100),
        Workload("W2", 100_000, 1024),
        Workload("W3", 20_000, 100, rate=10_000.0),
        Workload("W4", 1_000_000, 100, producers=4),
        Workload("W5", 100_000, 100, producers=8, sync=True),
    )
}


@dataclass(frozen=True)
class Api:
    """One way a system sends: ``label`` is what the row shows (the real call), ``batched``
    says whether each call carries many messages (compared with shmq's bulk path) or one."""

    label: str
    batched: bool = False
    batch: int = 1000  # messages per call when batched
    cap: int | None = None  # most messages per throughput case, overriding Peer.cap


@dataclass(frozen=True)
class Case:
    """One run: ``workload`` through ``api`` of one system, ``per_producer`` messages from
    each of ``workload.producers`` processes. ``name`` is unique in the run, so topics,
    streams and queues of different cases never mix."""

    workload: Workload
    api: Api
    per_producer: int
    name: str

    @property
    def total(self) -> int:
        return self.per_producer * self.workload.producers


def make_case(workload: Workload, api: Api, system: str, cap: int | None) -> Case:
    """The case for ``system``: the workload's count, lowered to ``cap`` for a system too
    slow to send it in the time budget (latency runs keep their count: it sets the
    duration). The count actually sent is what the result row reports."""
    total = workload.messages
    if cap is not None and not workload.latency:
        total = min(total, cap)
    per = max(total // workload.producers, 1)
    safe = "".join(c if c.isalnum() else "_" for c in f"{system}_{api.label}")
    return Case(workload, api, per, f"{workload.name}_{safe}")
