"""The POP state of a broker: which messages are invisible to whom until when, what each
group has acked, and where each group's next pop of a queue begins.

RocketMQ 5 keeps this as checkpoint and ack records in a revive topic (or, with
``popConsumerKVServiceEnable``, in RocksDB); shmq keeps it here, in the supervisor, and
makes it durable in the POP journal (``journal``): every change is one journal record, and
the same ``apply`` turns a record into state whether it was just written or is replayed at
start, so the state after a crash is the state the last record left. Nothing here reads the
store or answers a request: the POP processor and the revive service do, and tell this
table what they did.

A checkpoint (RocketMQ's ``PopCheckPoint``) is one pop of one queue: its messages' queue
offsets, when they were popped and for how long they are invisible, which are acked. A
normal one ends when every message is acked or when revive has copied the rest to the
group's POP retry topic; a FIFO one (``reviveQid`` 999) blocks its queue until every
message is acked, and its messages are popped again once their invisible time passes.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from shmq.pop_receipt import ORDER_REVIVE_QID

QueueKey = tuple[str, str, int]  # (group, real topic, queue id)


@dataclass
class Checkpoint:
    """One pop of one queue (see the module docstring)."""

    id: int
    group: str
    topic: str  # the real topic: the topic or its POP retry topic
    queue_id: int
    start: int  # startOffset: the pop's first queue offset
    pop_time: int  # ms
    invisible: int  # ms
    revive_qid: int
    offsets: list[int]
    next_offset: int  # where the queue's next pop begins once this one is done
    acked: set[int] = field(default_factory=set)
    counts: dict[int, int] = field(default_factory=dict)  # FIFO: times popped before
    visible: dict[int, int] = field(default_factory=dict)  # FIFO: changed visible times
    attempt_id: str = ""
    members: frozenset[int] = field(init=False, repr=False)  # the offsets, for lookups

    def __post_init__(self) -> None:
        self.members = frozenset(self.offsets)

    @property
    def done(self) -> bool:
        """Every message acked."""
        return len(self.acked) >= len(self.members)

    @property
    def order(self) -> bool:
        return self.revive_qid == ORDER_REVIVE_QID

    @property
    def visible_at(self) -> int:
        return self.pop_time + self.invisible

    @property
    def unacked(self) -> list[int]:
        return [o for o in self.offsets if o not in self.acked]

    def blocked_until(self) -> int:
        """FIFO: when the last not-acked message becomes visible again (ms)."""
        return max((self.visible.get(o, self.visible_at) for o in self.unacked), default=0)

    def record(self) -> dict[str, Any]:
        """The journal record that recreates this checkpoint."""
        rec: dict[str, Any] = {
            "k": "ck",
            "id": self.id,
            "c": self.group,
            "t": self.topic,
            "q": self.queue_id,
            "so": self.start,
            "pt": self.pop_time,
            "it": self.invisible,
            "rq": self.revive_qid,
            "o": self.offsets,
            "n": self.next_offset,
        }
        if self.acked:
            rec["a"] = sorted(self.acked)
        if self.counts:
            rec["cn"] = [[o, n] for o, n in self.counts.items()]
        if self.visible:
            rec["v"] = [[o, t] for o, t in self.visible.items()]
        if self.attempt_id:
            rec["ai"] = self.attempt_id
        return rec


@dataclass
class GroupCounts:
    """What a group's POP did since the broker started (for ``GET_POP_STATUS``)."""

    acked: int = 0
    revived: int = 0
    dlq: int = 0


class PopCheckpoints:
    """The state (see the module docstring); the caller serialises access."""

    def __init__(self) -> None:
        self.checkpoints: dict[int, Checkpoint] = {}
        self._by_receipt: dict[tuple[str, str, int, int, int], int] = {}
        self.orders: dict[QueueKey, int] = {}  # a FIFO queue's open checkpoint
        self.cursors: dict[QueueKey, int] = {}  # where the next pop of the queue begins
        self.counts: dict[tuple[str, str], GroupCounts] = {}
        self._due: list[tuple[int, int]] = []  # (visible at, checkpoint id), a heap
        self.last_id = 0

    # -- records --------------------------------------------------------------------------

    def apply(self, rec: dict[str, Any]) -> None:
        """Change the state as ``rec`` says (a journal record; ``KeyError`` / ``TypeError``
        / ``ValueError`` for one that is not)."""
        kind = rec["k"]
        if kind == "ck":
            self._add(rec)
        elif kind == "ack":
            ck = self.checkpoints.get(rec["id"])
            if ck is not None:
                self._ack(ck, [int(o) for o in rec["o"]])
        elif kind == "vis":
            ck = self.checkpoints.get(rec["id"])
            if ck is not None:
                ck.visible[int(rec["o"])] = int(rec["at"])
        elif kind == "done":
            ck = self.checkpoints.get(rec["id"])
            if ck is not None:
                self._remove(ck)
                counts = self.group_counts(ck.group, ck.topic)
                counts.revived += int(rec.get("r", 0))
                counts.dlq += int(rec.get("d", 0))
        elif kind == "cur":
            self.cursors[(rec["c"], rec["t"], int(rec["q"]))] = int(rec["o"])
        else:
            raise ValueError(f"unknown POP journal record kind {kind!r}")

    def _add(self, rec: dict[str, Any]) -> None:
        ck = Checkpoint(
            int(rec["id"]),
            str(rec["c"]),
            str(rec["t"]),
            int(rec["q"]),
            int(rec["so"]),
            int(rec["pt"]),
            int(rec["it"]),
            int(rec["rq"]),
            [int(o) for o in rec["o"]],
            int(rec["n"]),
            {int(o) for o in rec.get("a", ())},
            {int(o): int(n) for o, n in rec.get("cn", ())},
            {int(o): int(t) for o, t in rec.get("v", ())},
            str(rec.get("ai", "")),
        )
        self.last_id = max(self.last_id, ck.id)
        key = (ck.group, ck.topic, ck.queue_id)
        if ck.order:
            old = self.orders.get(key)
            if old is not None:
                self._remove(self.checkpoints[old])
            self.orders[key] = ck.id
            # a FIFO queue's next pop begins at its first message not acked
            self.cursors[key] = ck.unacked[0] if ck.unacked else ck.next_offset
        else:
            self.cursors[key] = max(self.cursors.get(key, 0), ck.next_offset)
            heapq.heappush(self._due, (ck.visible_at, ck.id))
        self.checkpoints[ck.id] = ck
        self._by_receipt[(ck.group, ck.topic, ck.queue_id, ck.start, ck.pop_time)] = ck.id
        if ck.done:  # a FIFO pop whose messages all went to the DLQ
            self._finish(ck)

    def _ack(self, ck: Checkpoint, offsets: list[int]) -> None:
        fresh = ck.members.intersection(offsets).difference(ck.acked)
        ck.acked.update(fresh)
        self.group_counts(ck.group, ck.topic).acked += len(fresh)
        if ck.done:
            self._finish(ck)
        elif ck.order:
            self.cursors[(ck.group, ck.topic, ck.queue_id)] = ck.unacked[0]

    def _finish(self, ck: Checkpoint) -> None:
        if ck.order:
            self.cursors[(ck.group, ck.topic, ck.queue_id)] = ck.next_offset
        self._remove(ck)

    def _remove(self, ck: Checkpoint) -> None:
        self.checkpoints.pop(ck.id, None)
        self._by_receipt.pop((ck.group, ck.topic, ck.queue_id, ck.start, ck.pop_time), None)
        key = (ck.group, ck.topic, ck.queue_id)
        if self.orders.get(key) == ck.id:
            del self.orders[key]

    # -- lookups --------------------------------------------------------------------------

    def next_id(self) -> int:
        self.last_id += 1
        return self.last_id

    def find(
        self, group: str, topic: str, queue_id: int, start: int, pop_time: int
    ) -> Checkpoint | None:
        """The checkpoint a receipt names (None: acked, revived or never made)."""
        found = self._by_receipt.get((group, topic, queue_id, start, pop_time))
        return self.checkpoints.get(found) if found is not None else None

    def order_checkpoint(self, key: QueueKey) -> Checkpoint | None:
        found = self.orders.get(key)
        return self.checkpoints.get(found) if found is not None else None

    def due(self, now: int) -> tuple[list[Checkpoint], int | None]:
        """The normal checkpoints whose invisible time has passed, and when the next one's
        will (None: no other is open)."""
        out = []
        while self._due and self._due[0][0] <= now:
            _, ck_id = heapq.heappop(self._due)
            ck = self.checkpoints.get(ck_id)
            if ck is not None:
                out.append(ck)
        while self._due and self._due[0][1] not in self.checkpoints:
            heapq.heappop(self._due)
        return out, (self._due[0][0] if self._due else None)

    def retry_later(self, ck: Checkpoint, at: int) -> None:
        """Look at ``ck`` again at ``at`` (its revive failed)."""
        heapq.heappush(self._due, (at, ck.id))

    def group_counts(self, group: str, topic: str) -> GroupCounts:
        return self.counts.setdefault((group, topic), GroupCounts())

    def snapshot(self) -> Iterator[dict[str, Any]]:
        """Records that recreate the state: the cursors, then the open checkpoints."""
        for (group, topic, queue_id), offset in self.cursors.items():
            yield {"k": "cur", "c": group, "t": topic, "q": queue_id, "o": offset}
        for ck in self.checkpoints.values():
            yield ck.record()
