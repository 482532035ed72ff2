"""TimerWheel and TimerCheckpoint: where timer messages wait for their delivery time.

RocketMQ 5's timer store keeps three things under the store root::

    {storeRoot}/timerwheel          the wheel: one 32-byte slot per precision step
    {storeRoot}/timerlog/           the TimerLog (shmq.store.timer.log): chained units
    {storeRoot}/config/timercheck   the checkpoint

The wheel file is ``2 * slots_total`` slots, big-endian, RocketMQ's ``Slot``::

    0 TIME 8 | 8 FIRST POS 8 | 16 LAST POS 8 | 24 NUM 4 | 28 MAGIC 4

    TIME  = slot time ms // precision ms (RocketMQ stores it so; -1: never used)
    index = deliver ms // precision ms % (2 * slots_total)
    FIRST POS, LAST POS: the slot's first and last TimerLog units (-1: none)
    NUM   = how many units the chain holds; MAGIC unused (0), as in RocketMQ

A slot is live for a time only when its TIME is that time's slot number; any other TIME is a
slot of an earlier lap (or unused), which the next enqueue for the slot resets. RocketMQ
fixes ``slotsTotal`` at 7 days of seconds (``TIMER_WHEEL_TTL_DAY``) whatever the precision;
shmq derives it from ``timerMaxDelaySec`` (``slots_total_for``), so a lap is always twice the
longest delay. Unused slots are written as -1 when the file is created, so that no real time
(not even 0) matches one.

The checkpoint is RocketMQ's ``timercheck`` layout (a 4 KiB file, big-endian int64s) plus
one word::

    0 dequeue ms (lastReadTimeMs) | 8 log end (lastTimerLogFlushPos)
    16 enqueue offset (lastTimerQueueOffset) | 24 the same (masterTimerQueueOffset)
    32..56 RocketMQ's data version (0 here) | 56 scan from (a CommitLog offset, opaque here)

Durability: the checkpoint is the commit point of the enqueue side. ``commit`` flushes the
log, then the wheel, then writes the checkpoint (atomically: tmp file, fsync, rename) with the
log end and the consume-queue offset they cover. After a crash ``recover`` rolls the pair
back to that commit: the log is cut at the checkpointed end, and every slot that changed
after it is restored from the log; the caller enqueues again from the returned offset. So no
unit is lost (the caller re-enqueues what was cut) and none is listed twice (what was cut is
no longer on the wheel). The dequeue side only advances ``dequeue_ms`` and persists the
checkpoint; redelivery after a crash is at least once, as in RocketMQ.
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from shmq import files
from shmq.errors import CorruptStoreError
from shmq.store.mapped_file import allocate
from shmq.store.timer.log import ENTRY_DTYPE, MAGIC_DEFAULT, UNIT_SIZE, TimerLog

log = logging.getLogger(__name__)

SLOT_SIZE = 32
SLOT_DTYPE = np.dtype(
    [("time", ">i8"), ("first", ">i8"), ("last", ">i8"), ("num", ">i4"), ("magic", ">i4")]
)
assert SLOT_DTYPE.itemsize == SLOT_SIZE

TIMER_WHEEL_FILE = "timerwheel"
TIMER_LOG_DIR = "timerlog"
TIMER_CHECKPOINT_FILE = os.path.join("config", "timercheck")

CHECKPOINT_SIZE = 4096
_CHECKPOINT = struct.Struct(">8q")


def slots_total_for(max_delay_sec: int, precision_ms: int) -> int:
    """RocketMQ's ``slotsTotal`` for a wheel covering ``max_delay_sec``: the wheel file has
    twice as many slots, so a slot is reused only a whole longest delay after its time."""
    return -(-max_delay_sec * 1000 // precision_ms)


def paths(store_root: str) -> tuple[str, str, str]:
    """``(wheel file, log directory, checkpoint file)`` of the timer store under a root."""
    return (
        os.path.join(store_root, TIMER_WHEEL_FILE),
        os.path.join(store_root, TIMER_LOG_DIR),
        os.path.join(store_root, TIMER_CHECKPOINT_FILE),
    )


class Slot(NamedTuple):
    time_ms: int  # -1 when the slot is not live for the time asked
    first_pos: int
    last_pos: int
    num: int


_NO_SLOT = Slot(-1, -1, -1, 0)


class TimerWheel:
    """The wheel file, mapped; written only by its owner (the schedule agent)."""

    def __init__(self, path: str, slots_total: int, precision_ms: int) -> None:
        if slots_total < 1 or precision_ms < 1:
            raise ValueError(
                f"timer wheel: slots_total {slots_total} and precision_ms {precision_ms} "
                "must both be at least 1"
            )
        self.path = path
        self.precision_ms = precision_ms
        self.slot_count = 2 * slots_total
        self.lap_ms = self.slot_count * precision_ms
        size = self.slot_count * SLOT_SIZE
        self.created = not os.path.exists(path) or os.path.getsize(path) == 0
        if self.created:
            _create_blank(path, self.slot_count)
        fd = os.open(path, os.O_RDWR)
        try:
            actual = os.fstat(fd).st_size
            if actual != size:
                raise CorruptStoreError(
                    f"{path} is {actual} bytes; a wheel of {self.slot_count} slots "
                    f"(precision {precision_ms} ms) must be {size} bytes"
                )
            self._mm = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self.slots = np.frombuffer(self._mm, dtype=SLOT_DTYPE)

    # -- slots -----------------------------------------------------------------------------

    def slot_index(self, ms: int) -> int:
        return ms // self.precision_ms % self.slot_count

    def slot(self, ms: int) -> Slot:
        """The slot holding time ``ms``; ``time_ms`` -1 when it is not live for that time
        (RocketMQ's ``getSlot``)."""
        number = ms // self.precision_ms
        s = self.slots[number % self.slot_count]
        if int(s["time"]) != number:
            return _NO_SLOT
        return Slot(number * self.precision_ms, int(s["first"]), int(s["last"]), int(s["num"]))

    # -- enqueue ---------------------------------------------------------------------------

    def enqueue_batch(
        self,
        deliver_ms: np.ndarray,
        phys: np.ndarray,
        sizes: np.ndarray,
        queue_offsets: np.ndarray,
        timer_log: TimerLog,
        *,
        dequeue_ms: int,
        write_ms: int | None = None,
        magic: np.ndarray | int = MAGIC_DEFAULT,
    ) -> np.ndarray:
        """Put a batch on the wheel, in order; returns the entries' log positions.

        Each entry is appended to ``timer_log`` with PREV POS = its slot's last unit (the
        entry before it in the batch, or the slot's LAST POS, or -1 when the slot is empty
        or of an earlier lap), then the slots are updated: one vectorised pass per batch.

        Every deliver time must fall in ``[slot of dequeue_ms, that + one lap)``: an earlier
        slot was already delivered (RocketMQ delivers such a message at once instead of
        enqueueing it), and a later one would reset a slot not yet delivered. ``ValueError``
        names the first entry outside and nothing is written. ``dequeue_ms`` is the caller's
        current delivery position; ``write_ms`` is stored for tracing (default: now);
        ``magic`` is the units' MAGIC (``TimerLog.append_batch``): a delete marker is a unit
        of its slot like any other, and counts in NUM (RocketMQ subtracts one instead, its
        NUM being a metric; here NUM checks the chain).
        """
        deliver_ms = np.asarray(deliver_ms, dtype=np.int64)
        count = deliver_ms.shape[0]
        if count == 0:
            return np.empty(0, dtype=np.int64)
        number = deliver_ms // self.precision_ms
        low = dequeue_ms // self.precision_ms
        outside = (number < low) | (number >= low + self.slot_count)
        if outside.any():
            i = int(np.argmax(outside))
            raise ValueError(
                f"timer entry {i} delivers at {int(deliver_ms[i])} ms, outside the wheel's "
                f"window [{low * self.precision_ms}, {(low + self.slot_count) * self.precision_ms})"
                f" ms (dequeue at {dequeue_ms} ms, lap {self.lap_ms} ms)"
            )
        index = number % self.slot_count
        positions = timer_log.next_positions(count)
        # Group the batch by slot, keeping batch order within a slot (a stable sort).
        order = np.argsort(index, kind="stable")
        grouped = index[order]
        head = np.ones(count, dtype=bool)
        head[1:] = grouped[1:] != grouped[:-1]
        tail = np.ones(count, dtype=bool)
        tail[:-1] = head[1:]
        slot_index = grouped[head]
        first_entry, last_entry = order[head], order[tail]
        group_size = np.diff(np.append(np.flatnonzero(head), count))
        before = self.slots[slot_index]  # a copy: the slots as they were
        live = before["time"] == number[first_entry]
        prev = np.empty(count, dtype=np.int64)
        prev[order[1:]] = positions[order[:-1]]
        prev[first_entry] = np.where(live, before["last"], -1)
        timer_log.append_batch(
            deliver_ms, phys, sizes, prev, queue_offsets, write_ms=write_ms, magic=magic
        )
        # LAST POS first and TIME last: a slot caught half-updated by a crash then has a
        # LAST POS past the checkpoint, which is what recover() looks for.
        self.slots["last"][slot_index] = positions[last_entry]
        self.slots["first"][slot_index] = np.where(live, before["first"], positions[first_entry])
        self.slots["num"][slot_index] = np.where(live, before["num"], 0) + group_size
        self.slots["time"][slot_index] = number[first_entry]
        return positions

    # -- dequeue ---------------------------------------------------------------------------

    def entries(self, slot_ms: int, timer_log: TimerLog) -> np.ndarray:
        """The entries of the slot holding ``slot_ms``, in enqueue order (oldest first), as
        an ``ENTRY_DTYPE`` array (pos, prev, magic, write_ms, deliver_ms, phys, size,
        queue_offset); empty when the slot is not live for that time."""
        slot = self.slot(slot_ms)
        if slot.time_ms == -1 or slot.num <= 0:
            return np.empty(0, dtype=ENTRY_DTYPE)
        lo = slot.time_ms
        positions = timer_log.chain(slot.last_pos, lo, lo + self.precision_ms, slot.num)
        if positions.shape[0] != slot.num or int(positions[0]) != slot.first_pos:
            raise CorruptStoreError(
                f"{self.path}: slot {lo} ms counts {slot.num} units from {slot.first_pos}, "
                f"its chain in the timer log holds {positions.shape[0]} from "
                f"{int(positions[0]) if positions.size else -1}"
            )
        return timer_log.read_many(positions)

    # -- recovery --------------------------------------------------------------------------

    def revert(self, cut: int, timer_log: TimerLog) -> int:
        """Roll back every slot that refers to log positions at or after ``cut`` to what the
        log before ``cut`` holds for it; returns how many slots changed.

        Such a slot changed after the commit that ``cut`` comes from (every enqueue sets
        LAST POS to a new unit). If its FIRST POS is before ``cut`` too, it held units then:
        its last one is found by a backward scan of the log from ``cut``, and the chain from
        there gives FIRST POS and NUM again. Otherwise it was empty, or of an earlier lap that
        was delivered, and becomes unused.
        """
        touched = np.flatnonzero(self.slots["last"] >= cut)
        if not touched.size:
            return 0
        before = self.slots[touched]
        older = np.flatnonzero(before["first"] < cut)
        wanted = before["time"][older].astype(np.int64)
        start = int(before["first"][older].min(initial=cut))
        found = self._last_units(timer_log, touched[older], wanted, start, cut)
        time = np.full(touched.shape[0], -1, dtype=np.int64)
        first = np.full(touched.shape[0], -1, dtype=np.int64)
        last = np.full(touched.shape[0], -1, dtype=np.int64)
        num = np.zeros(touched.shape[0], dtype=np.int64)
        for k in np.flatnonzero(found >= 0).tolist():
            lo = int(wanted[k]) * self.precision_ms
            i = older[k]
            num[i], first[i] = timer_log.chain_length(int(found[k]), lo, lo + self.precision_ms)
            time[i], last[i] = wanted[k], found[k]
        # All computed before any slot is written: a crash while writing leaves each slot
        # either as it was or rolled back, and the next recovery finds the same.
        self._write(touched, time=time, first=first, num=num, last=last)
        return int(touched.size)

    def _last_units(
        self, timer_log: TimerLog, index: np.ndarray, wanted: np.ndarray, start: int, end: int
    ) -> np.ndarray:
        """For each slot ``index[k]`` and slot number ``wanted[k]``, the position of the
        last unit of that slot number in ``[start, end)`` of the log, or -1: one vectorised
        pass per file, from the end back, stopping when all are found."""
        found = np.full(wanted.shape[0], -1, dtype=np.int64)
        if not wanted.size:
            return found
        which = np.full(self.slot_count, -1, dtype=np.int64)  # slot index -> k
        which[index] = np.arange(index.shape[0])
        for first, units in timer_log.unit_views(start, end, reverse=True):
            if (found >= 0).all():
                break
            number = (units["write_ms"] + units["delay_ms"]) // self.precision_ms
            k = which[number % self.slot_count]
            hit = np.flatnonzero((k >= 0) & (wanted[k] == number))[::-1]  # newest first
            ks, newest = np.unique(k[hit], return_index=True)
            new = found[ks] < 0
            found[ks[new]] = first + hit[newest[new]] * UNIT_SIZE
        return found

    def rebuild(self, timer_log: TimerLog, end: int, dequeue_ms: int) -> int:
        """Rebuild a lost wheel from the log before ``end``: each slot from the time of
        ``dequeue_ms`` on gets the chain of its latest lap; returns how many slots.

        Used when the wheel file was missing or empty while the log was not. The units of
        one slot time are exactly one chain (a slot time is enqueued only within its lap, and
        its first unit found it empty or of an earlier lap), so the first, the last and the
        count of the units of each time are the slot.
        """
        low = dequeue_ms // self.precision_ms
        numbers, where = [], []
        for first, units in timer_log.unit_views(timer_log.min_offset, end):
            number = (units["write_ms"] + units["delay_ms"]) // self.precision_ms
            keep = np.flatnonzero(number >= low)
            numbers.append(number[keep].astype(np.int64))
            where.append(first + keep * UNIT_SIZE)
        if not numbers:
            return 0
        number, pos = np.concatenate(numbers), np.concatenate(where)
        values, first_at, num = np.unique(number, return_index=True, return_counts=True)
        _, from_end = np.unique(number[::-1], return_index=True)
        last_at = number.shape[0] - 1 - from_end
        # Per slot index keep the latest lap: sort by (index, time), take each index's last.
        index = values % self.slot_count
        order = np.lexsort((values, index))
        latest = order[np.append(index[order][1:] != index[order][:-1], True)]
        self._write(
            index[latest],
            time=values[latest],
            first=pos[first_at[latest]],
            num=num[latest],
            last=pos[last_at[latest]],
        )
        return int(latest.shape[0])

    def _write(
        self,
        index: np.ndarray,
        *,
        time: np.ndarray | int,
        first: np.ndarray | int,
        num: np.ndarray | int,
        last: np.ndarray | int,
    ) -> None:
        """Set slots in recovery. LAST POS goes last, so that a slot caught half-written by
        a crash still refers past the cut and is rolled back again by the next recovery."""
        self.slots["time"][index] = time
        self.slots["first"][index] = first
        self.slots["num"][index] = num
        self.slots["last"][index] = last

    def flush(self) -> None:
        """msync the wheel (only its dirty pages are written)."""
        self._mm.flush()

    def close(self) -> None:
        if self._mm is None:
            return
        self.slots = None
        try:
            self._mm.close()
        except BufferError:
            # A caller still holds a view of the slots; the mapping goes with that view.
            log.debug("mapping of %s still exported; left to the garbage collector", self.path)
        self._mm = None


def _create_blank(path: str, slot_count: int) -> None:
    """Create the wheel file atomically (tmp, fsync, rename) with every slot unused."""
    files.makedirs(os.path.dirname(path) or ".")
    blank = np.zeros(slot_count, dtype=SLOT_DTYPE)
    blank["time"] = blank["first"] = blank["last"] = -1
    _write_atomic(path, blank.tobytes())


def _write_atomic(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data``: write a tmp file with its disk blocks, fsync it and
    rename it over ``path``, so a crash leaves the old file or the new one, never a mix."""
    tmp = path + ".tmp"
    fd = files.create(tmp, os.O_RDWR | os.O_TRUNC)
    try:
        allocate(fd, len(data), tmp)  # DiskFullError (and no tmp file) when there is no room
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    files.fsync_dir(os.path.dirname(path) or ".")


@dataclass
class TimerCheckpoint:
    """The ``timercheck`` file. ``log_end`` and ``enqueue_offset`` are set only by
    ``commit`` (after the data they cover is flushed); the dequeue side sets
    ``dequeue_ms`` (every slot before it is delivered) and ``scan_from`` and calls
    ``persist``."""

    path: str
    dequeue_ms: int = 0
    log_end: int = 0
    enqueue_offset: int = 0
    scan_from: int = 0

    @classmethod
    def load(cls, path: str) -> TimerCheckpoint:
        """The checkpoint at ``path``; all zero when there is none yet."""
        try:
            with open(path, "rb") as f:
                data = f.read(CHECKPOINT_SIZE)
        except FileNotFoundError:
            return cls(path)
        if len(data) < _CHECKPOINT.size:
            raise CorruptStoreError(
                f"{path} is {len(data)} bytes; a timer checkpoint holds at least {_CHECKPOINT.size}"
            )
        dequeue_ms, log_end, enqueue_offset, _, _, _, _, scan_from = _CHECKPOINT.unpack_from(data)
        return cls(path, dequeue_ms, log_end, enqueue_offset, scan_from)

    def persist(self) -> None:
        """Write the checkpoint atomically (tmp file, fsync, rename)."""
        data = bytearray(CHECKPOINT_SIZE)
        _CHECKPOINT.pack_into(
            data, 0, self.dequeue_ms, self.log_end, self.enqueue_offset, self.enqueue_offset,
            0, 0, 0, self.scan_from,
        )  # fmt: skip
        files.makedirs(os.path.dirname(self.path) or ".")
        _write_atomic(self.path, bytes(data))


def commit(
    wheel: TimerWheel, timer_log: TimerLog, checkpoint: TimerCheckpoint, enqueue_offset: int
) -> None:
    """Make everything enqueued so far durable and record it: flush the log, then the wheel,
    then persist the checkpoint with the log's end and ``enqueue_offset`` (the next timer
    consume-queue offset to enqueue). The order is what ``recover`` relies on."""
    timer_log.flush()
    wheel.flush()
    checkpoint.log_end = timer_log.max_offset
    checkpoint.enqueue_offset = enqueue_offset
    checkpoint.persist()


def recover(wheel: TimerWheel, timer_log: TimerLog, checkpoint: TimerCheckpoint) -> int:
    """Make the wheel and the log consistent after a crash; returns the timer consume-queue
    offset to enqueue from (also committed to the checkpoint). Call after ``load``.

    1. The log's complete units are found from one file before the checkpointed end.
    2. The log is cut at the checkpointed end: units after it are not covered by the
       checkpoint and the caller enqueues their messages again from the returned offset.
       When the log is shorter than the checkpoint says (it lost flushed data), the data
       wins: it is cut at its own end and enqueueing resumes after its last unit's queue
       offset (from 0 if it has none; the caller clamps to the queue's minimum).
    3. Slots that refer to units at or past the cut are rolled back (``TimerWheel.revert``);
       a wheel that was missing is rebuilt from the log instead (``TimerWheel.rebuild``).
    4. The result is committed, so a crash during or after recovery recovers the same way.

    The wheel may have been ahead of the log (slots written back, units not) or behind it
    (units written back, slots not): either way only what the checkpoint covers is kept.
    ``dequeue_ms`` is left alone (RocketMQ moves it no earlier than now minus one lap; that
    is the caller's policy).
    """
    end = timer_log.recover(max(0, checkpoint.log_end - timer_log.file_size))
    cut = min(end, checkpoint.log_end)
    resume = checkpoint.enqueue_offset
    if end < checkpoint.log_end:
        last = timer_log.last_position()
        resume = int(timer_log.read(last)["queue_offset"]) + 1 if last >= 0 else 0
    timer_log.truncate(cut)
    if wheel.created:
        wheel.rebuild(timer_log, cut, checkpoint.dequeue_ms)
    else:
        wheel.revert(cut, timer_log)
    commit(wheel, timer_log, checkpoint, resume)
    wheel.created = False
    return resume
