"""Which transactions are open: the broker's table of half messages without an outcome.

Pure bookkeeping, no I/O (``transactions`` feeds it what it reads and writes), so its rules
are tested on their own. A transaction is known by its identity, the queue offset of its
first half message (``transaction_records``). Three sets, and two offsets persisted in
consumerOffset.json under ``CID_RMQ_SYS_TRANS``:

- ``open``: identity → its newest half record (first one or check-back copy), for every
  half seen by the scan of the half queue and not yet closed;
- ``done``: identity → queue offset of its op record (-1 while that record is not written)
  for transactions closed since the scan last passed them;
- ``copies``: identity → queue offset of its newest check-back copy.

- ``half_offset`` (the half queue): below it, every record belongs to a transaction closed
  by an op record or has a newer copy above it, so a restart scans the half queue from
  there (a transaction whose op record is not written yet is found open again, and its
  commit by the search for commits without op records);
- ``op_offset`` (the op queue): below it, every op record closes a transaction none of whose
  records is at or above ``half_offset``, so a restart reads op records from there.

Persist ``half_offset`` before ``op_offset``: any pair a crash leaves behind is then safe
(an older ``op_offset`` only means more op records are read).
"""

from __future__ import annotations

from dataclasses import dataclass

from shmq.broker.transaction.records import HalfRecord


@dataclass(frozen=True, slots=True)
class OpenHalf:
    """An open transaction's newest half record (what a check-back sends, what the admin
    shows, and its real topic, which the metrics count it under)."""

    identity: int
    queue_offset: int
    commit_log_offset: int
    group: str
    real_topic: str
    check_times: int
    born_ms: int
    store_ms: int
    msg_id: str

    @classmethod
    def of(cls, half: HalfRecord) -> OpenHalf:
        return cls(half.identity, half.queue_offset, half.commit_log_offset, half.group,
                   half.real_topic, half.check_times, half.born_ms, half.store_ms,
                   half.msg_id)  # fmt: skip


class HalfTable:
    """The open, done and copied transactions, and the scan positions (see the module)."""

    def __init__(self, half_offset: int = 0, op_offset: int = 0) -> None:
        self.open: dict[int, OpenHalf] = {}  # change it only through _open and _drop
        # the open transactions per real topic, kept with ``open`` so that the metrics read
        # it (``open_per_topic``) without the lock its writers hold
        self._per_topic: dict[str, int] = {}
        self.done: dict[int, int] = {}
        self.copies: dict[int, int] = {}
        self.scanned = half_offset  # half queue offset the scan reached
        self.half_offset = half_offset
        self.op_offset = op_offset
        self.ops_end = op_offset  # the op queue offset after the last op record known

    # -- what the scans find ------------------------------------------------------------------

    def seen_op(self, identity: int, op_queue_offset: int) -> None:
        """An op record (read back from the op queue, or just written) closes ``identity``."""
        self._drop(identity)
        self.done[identity] = op_queue_offset
        self.ops_end = max(self.ops_end, op_queue_offset + 1)

    def skips(self, queue_offset: int) -> bool:
        """Whether the half record at ``queue_offset`` is known closed without reading it
        (the first half of a done transaction; a copy must be read to know whose it is)."""
        return queue_offset in self.done

    def seen_half(self, half: HalfRecord) -> None:
        """A half record the scan read (every record at or above ``scanned``, in order)."""
        if half.identity != half.queue_offset:
            self.copies[half.identity] = max(half.queue_offset, self.copies.get(half.identity, -1))
        if half.identity in self.done:
            return
        known = self.open.get(half.identity)
        if known is None or half.queue_offset > known.queue_offset:
            self._open(OpenHalf.of(half))

    def scanned_to(self, queue_offset: int) -> None:
        self.scanned = max(self.scanned, queue_offset)

    # -- outcomes -----------------------------------------------------------------------------

    def refusal(self, half: HalfRecord) -> str | None:
        """Why ``half``'s transaction can take no outcome now, or None when it is open (or
        so new that the scan has not reached it)."""
        identity = half.identity
        if identity in self.done:
            return f"the transaction of half message {identity} is already finished"
        if identity in self.open:
            return None
        if identity == half.queue_offset and half.queue_offset >= self.scanned:
            return None
        return f"the transaction of half message {identity} is finished or was discarded"

    def finished(self, identity: int, op_queue_offset: int) -> None:
        """``identity`` got its outcome; its op record is at ``op_queue_offset`` (-1: not
        written yet, ``op_written`` follows)."""
        self._drop(identity)
        self.done[identity] = op_queue_offset
        if op_queue_offset >= 0:
            self.ops_end = max(self.ops_end, op_queue_offset + 1)

    def op_written(self, identity: int, op_queue_offset: int) -> None:
        if identity in self.done:
            self.done[identity] = op_queue_offset
        self.ops_end = max(self.ops_end, op_queue_offset + 1)

    def checked(self, copy: OpenHalf) -> None:
        """A check-back copy of an open transaction was appended (it is now the newest)."""
        self.copies[copy.identity] = max(copy.queue_offset, self.copies.get(copy.identity, -1))
        if copy.identity in self.open:
            self._open(copy)

    def unwritten_ops(self) -> list[int]:
        return [identity for identity, op in self.done.items() if op < 0]

    # -- progress -----------------------------------------------------------------------------

    def advance(self) -> tuple[int, int]:
        """Move ``half_offset`` and ``op_offset`` as far as the rules allow, forget what
        lies wholly below them, and return both."""
        held = [h.queue_offset for h in self.open.values()]
        held += [max(i, self.copies.get(i, i)) for i, op in self.done.items() if op < 0]
        half = max(self.half_offset, min(min(held, default=self.scanned), self.scanned))
        gone = [i for i in self.done if max(i, self.copies.get(i, i)) < half]
        for identity in gone:
            del self.done[identity]
        for identity in [i for i, last in self.copies.items() if last < half]:
            del self.copies[identity]
        ops = [op for op in self.done.values() if op >= 0]
        op = max(self.op_offset, min(ops, default=self.ops_end))
        self.half_offset, self.op_offset = half, op
        return half, op

    def open_per_topic(self) -> dict[str, int]:
        """The open transactions per real topic (RocketMQ's ``rocketmq_half_messages``),
        from any thread without the lock: the copy of a dict of str keys is one C call the
        GIL is not released in, so it sees the counts between two changes, never during."""
        return self._per_topic.copy()

    def _open(self, half: OpenHalf) -> None:
        """Note ``half`` as its transaction's newest half record."""
        self._drop(half.identity)
        self.open[half.identity] = half
        self._per_topic[half.real_topic] = self._per_topic.get(half.real_topic, 0) + 1

    def _drop(self, identity: int) -> None:
        half = self.open.pop(identity, None)
        if half is None:
            return
        left = self._per_topic[half.real_topic] - 1
        if left:
            self._per_topic[half.real_topic] = left
        else:
            del self._per_topic[half.real_topic]

    def groups(self) -> dict[str, list[OpenHalf]]:
        """The open transactions per producer group, oldest first."""
        out: dict[str, list[OpenHalf]] = {}
        for h in sorted(self.open.values(), key=lambda h: h.identity):
            out.setdefault(h.group, []).append(h)
        return out
