"""The POP state as the broker's processors change it: the checkpoints (``checkpoints``)
behind one lock, each change journaled (``journal``) before it is applied and answered.

Where a pop of a queue begins (its cursor) is the group's consume offset too: it is
committed to the offset table as RocketMQ commits a POP group's offset once its checkpoint
is stored, so ``consumer-progress`` shows POP groups like any other. The journal is what a
restart trusts; the offset table may be older.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shmq.broker.context import BrokerContext
from shmq.broker.pop.checkpoints import Checkpoint, PopCheckpoints, QueueKey
from shmq.broker.pop.journal import PopJournal
from shmq.pop_receipt import Receipt, pop_retry_topic

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Popped:
    """One pop of one queue as the processor read it."""

    group: str
    topic: str  # the real topic
    queue_id: int
    start: int
    pop_time: int
    invisible: int
    revive_qid: int
    offsets: list[int]
    next_offset: int
    counts: dict[int, int] | None = None  # FIFO: times each was popped before
    acked: tuple[int, ...] = ()  # FIFO: sent to the DLQ instead
    attempt_id: str = ""


class PopService:
    """The broker's POP state (see the module docstring); every method takes the lock,
    which a processor also holds across a read of a queue and its ``record_pop``."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.lock = threading.RLock()
        self.state = PopCheckpoints()
        sync = ctx.config.store.flush_disk_type == "SYNC_FLUSH"
        self.journal = PopJournal(ctx.root, sync)
        applied = self.journal.replay(self.state)
        if applied:
            log.info(
                "POP journal: %d records replayed, %d checkpoints open",
                applied,
                len(self.state.checkpoints),
            )
        self._revive_qid = 0
        self._committed: dict[QueueKey, int] = {}  # what this service last committed

    def close(self) -> None:
        with self.lock:
            self.journal.rewrite(self.state.snapshot())
            self.journal.close()

    def _write(self, records: list[dict[str, Any]]) -> None:
        """Journal ``records``, then apply them (the caller holds the lock)."""
        self.journal.append(records)
        for rec in records:
            self.state.apply(rec)
        if self.journal.wants_compaction():
            self.journal.rewrite(self.state.snapshot())

    # -- pops -----------------------------------------------------------------------------

    def next_revive_qid(self) -> int:
        """A normal pop's revive queue, in turn (RocketMQ's ``counter++ % reviveQueueNum``)."""
        with self.lock:
            self._revive_qid = (self._revive_qid + 1) % self.ctx.config.revive_queue_num
            return self._revive_qid

    def cursor(self, key: QueueKey, initial: Callable[[], int]) -> int:
        """Where the group's next pop of the queue begins; ``initial()`` for a queue it
        never popped and has no committed offset of. An offset an admin reset since this
        service committed the queue's last wins (RocketMQ's pending reset offset)."""
        group, topic, queue_id = key
        with self.lock:
            found = self.state.cursors.get(key)
            committed = self.ctx.offsets.query(group, topic, queue_id)
            if found is not None:
                last = self._committed.get(key)
                if last is None or committed < 0 or committed == last:
                    return found
                log.info(
                    "POP %s %s queue %d: offset reset to %d", group, topic, queue_id, committed
                )
                self._write([{"k": "cur", "c": group, "t": topic, "q": queue_id, "o": committed}])
                self._committed[key] = committed
                return committed
            return committed if committed >= 0 else initial()

    def _commit(self, key: QueueKey) -> None:
        """The queue's cursor as the group's consume offset (the caller holds the lock)."""
        offset = self.state.cursors[key]
        if self._committed.get(key) != offset:
            self.ctx.offsets.commit(*key, offset)
            self._committed[key] = offset

    def record_pop(self, popped: Popped) -> None:
        """Store what a pop took (a checkpoint) or skipped (the cursor), before it is
        answered."""
        p = popped
        key = (p.group, p.topic, p.queue_id)
        with self.lock:
            if p.offsets:
                ck = Checkpoint(
                    self.state.next_id(),
                    p.group,
                    p.topic,
                    p.queue_id,
                    p.start,
                    p.pop_time,
                    p.invisible,
                    p.revive_qid,
                    list(p.offsets),
                    p.next_offset,
                    set(p.acked),
                    dict(p.counts or {}),
                    attempt_id=p.attempt_id,
                )
                self._write([ck.record()])
            elif self.state.cursors.get(key) != p.next_offset:
                self._write(
                    [{"k": "cur", "c": p.group, "t": p.topic, "q": p.queue_id, "o": p.next_offset}]
                )
            self._commit(key)

    def order_checkpoint(self, key: QueueKey) -> Checkpoint | None:
        with self.lock:
            return self.state.order_checkpoint(key)

    # -- acks and invisible time ----------------------------------------------------------

    def ack(self, group: str, topic: str, receipt: Receipt, offsets: list[int]) -> bool:
        """Ack ``offsets`` of the checkpoint ``receipt`` names; False when a FIFO
        checkpoint does not hold them (an ack of a normal message no checkpoint holds any
        more, acked or revived, changes nothing and is no error, as RocketMQ's)."""
        with self.lock:
            ck = self._checkpoint(group, topic, receipt)
            if ck is None:
                return not receipt.is_order
            if receipt.is_order and not ck.members.issuperset(offsets):
                return False
            fresh = ck.members.intersection(offsets).difference(ck.acked)
            if fresh:
                self._write([{"k": "ack", "id": ck.id, "o": sorted(fresh)}])
                self._commit((group, topic, receipt.queue_id))
            return True

    def _checkpoint(self, group: str, topic: str, receipt: Receipt) -> Checkpoint | None:
        if receipt.is_order:
            ck = self.state.order_checkpoint((group, topic, receipt.queue_id))
            return ck if ck is not None and ck.pop_time == receipt.pop_time else None
        return self.state.find(
            group, topic, receipt.queue_id, receipt.start_offset, receipt.pop_time
        )

    def change_invisible(
        self, group: str, topic: str, receipt: Receipt, invisible: int, now: int
    ) -> tuple[int, int]:
        """Make the message ``receipt`` names invisible for ``invisible`` ms from ``now``;
        the ``(popTime, invisibleTime)`` its new receipt carries. A normal message gets a
        checkpoint of its own (and its old one an ack), as RocketMQ's; one no checkpoint
        holds (acked, or already revived) gets none, so it does not come back twice."""
        with self.lock:
            ck = self._checkpoint(group, topic, receipt)
            offset = receipt.queue_offset
            if receipt.is_order:
                if ck is not None and offset in ck.members and offset not in ck.acked:
                    self._write([{"k": "vis", "id": ck.id, "o": offset, "at": now + invisible}])
                pop_time = receipt.pop_time
                return pop_time, now + invisible - pop_time
            if ck is not None and offset in ck.members and offset not in ck.acked:
                while self.state.find(group, topic, receipt.queue_id, offset, now):
                    now += 1  # a second change within the same ms
                fresh = Checkpoint(
                    self.state.next_id(),
                    group,
                    topic,
                    receipt.queue_id,
                    offset,
                    now,
                    invisible,
                    ck.revive_qid,
                    [offset],
                    0,
                )
                self._write([fresh.record(), {"k": "ack", "id": ck.id, "o": [offset]}])
            return now, invisible

    # -- revive ---------------------------------------------------------------------------

    def due(self, now: int) -> tuple[list[Checkpoint], int | None]:
        with self.lock:
            return self.state.due(now)

    def revived(self, ck: Checkpoint, copied: int, dead: int) -> None:
        """``ck``'s messages not acked are stored again (``copied`` to the retry topic,
        ``dead`` to the DLQ): it is done."""
        with self.lock:
            self._write([{"k": "done", "id": ck.id, "r": copied, "d": dead}])

    def dead_lettered(self, group: str, topic: str, count: int) -> None:
        """``count`` FIFO messages of the group went to its DLQ (for ``status``)."""
        with self.lock:
            self.state.group_counts(group, topic).dlq += count

    def retry_later(self, ck: Checkpoint, at: int) -> None:
        with self.lock:
            self.state.retry_later(ck, at)

    # -- admin ----------------------------------------------------------------------------

    def status(self, now: int, backlog: Callable[[str, int], int]) -> dict[str, Any]:
        """GET_POP_STATUS's body: per group and topic, the messages invisible now, those
        whose invisible time passed but are not revived yet, the POP retry topic's backlog
        (``backlog(topic, queue id)``: the queue's max offset) and what was acked, revived
        and sent to the DLQ since start."""
        groups: dict[str, dict[str, Any]] = {}
        with self.lock:

            def row(group: str, topic: str) -> dict[str, Any]:
                return groups.setdefault(group, {}).setdefault(
                    topic,
                    {
                        "inFlight": 0,
                        "reviveBacklog": 0,
                        "retryTopic": pop_retry_topic(group, topic),
                        "retryBacklog": 0,
                        "acked": 0,
                        "revived": 0,
                        "dlq": 0,
                        "popOffsets": {},
                    },
                )

            for (group, topic, queue_id), offset in self.state.cursors.items():
                original = _original_topic(group, topic)
                r = row(group, original)
                if original == topic:
                    r["popOffsets"][str(queue_id)] = offset
                else:
                    r["retryBacklog"] += max(0, backlog(topic, queue_id) - offset)
            for ck in self.state.checkpoints.values():
                r = row(ck.group, _original_topic(ck.group, ck.topic))
                n = len(ck.members) - len(ck.acked)
                late = (ck.visible_at if not ck.order else ck.blocked_until()) <= now
                r["reviveBacklog" if late and not ck.order else "inFlight"] += n
            for (group, topic), counts in self.state.counts.items():
                r = row(group, _original_topic(group, topic))
                r["acked"] += counts.acked
                r["revived"] += counts.revived
                r["dlq"] += counts.dlq
        return {"groups": groups}


def _original_topic(group: str, topic: str) -> str:
    """``topic`` without its POP retry prefix (``%RETRY%<group>_`` or ``+``)."""
    for sep in ("_", "+"):
        prefix = f"%RETRY%{group}{sep}"
        if topic.startswith(prefix):
            return topic[len(prefix) :]
    return topic
