"""TimerLog: the append-only log behind the timer wheel (RocketMQ 5's ``TimerLog``).

Every timer message put on the wheel gets one fixed-size unit here. The units of one wheel
slot form a chain: the slot holds the position of its last unit, and each unit the position
of the slot's unit before it (``PREV POS``, -1 for the slot's first unit), so a slot is read
by walking back from its last unit. The files are a ``MappedFileQueue`` under
``{storeRoot}/timerlog/``: fixed-size, named by the 20-digit offset of their first byte, like
the CommitLog's; a unit's position is that global byte offset.

A unit, RocketMQ's 52-byte layout, big-endian::

    0 SIZE 4 (always 52) | 4 PREV POS 8 | 12 MAGIC 4 | 16 WRITE MS 8 | 24 DELAY MS 4
    28 COMMITLOG OFFSET 8 | 36 RECORD SIZE 4 | 40 TOPIC HASH 4 | 44 QUEUE OFFSET 8

    deliver ms = WRITE MS + DELAY MS     (DELAY MS may be negative: a message already due)
    MAGIC      = MAGIC_DEFAULT (1), with MAGIC_DELETE (4) for a recall's delete marker;
                 RocketMQ's ROLL (2) is not used (the wheel spans the longest delay)

Two fields differ from RocketMQ's: TOPIC HASH, which feeds RocketMQ's per-topic timer
metrics, is 0 (shmq keeps none), and QUEUE OFFSET, RocketMQ's "reserved" word (it writes 0),
holds the message's offset in the timer topic's consume queue, so that recovery can tell
where to resume enqueueing when the log lost units that the checkpoint counted.

A file, as RocketMQ fills it: units from byte 0 while a unit plus a 16-byte blank still fit,
then a blank header over the rest when the next unit goes to a new file::

    | unit 0 | unit 1 | ... | unit k-1 | BLANK: SIZE 4 (bytes left) | 0 8 | MAGIC 4 | ...
    k = (file size - 16) // 52,  BLANK MAGIC = 0xCBD43194 (the CommitLog's blank magic)

An append writes the SIZE words of a batch last, so an append interrupted by a crash of the
process leaves units without a SIZE, and ``recover`` cuts the log before the first of them.
A crash of the machine can tear a unit in other ways; that is why the timer checkpoint, not
this scan, decides what survives (see ``shmq.store.timer.wheel.recover``).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import numpy as np
from numba import njit

from shmq.codec.record import MAGIC_BLANK, get_i32, get_i64
from shmq.errors import CorruptStoreError
from shmq.store.mapped_file import MappedFile
from shmq.store.mapped_file_queue import MappedFileQueue

UNIT_SIZE = 52
MIN_BLANK_LEN = 16  # SIZE 4, 0 8, MAGIC 4: what must still fit after a file's last unit
BLANK_MAGIC = MAGIC_BLANK - (1 << 32)  # RocketMQ's ``0xBBCCDDEE ^ 1880681586 + 8`` as an int
MAGIC_DEFAULT = 1
MAGIC_DELETE = 4  # RocketMQ's: the unit is a delete marker (``TIMER_DEL_UNIQKEY``)
MAGIC_FLAGS = 0xF  # RocketMQ's ``isMagicOK``: a unit's magic has no bit outside these
DEFAULT_FILE_SIZE = 100 * 1024 * 1024  # RocketMQ's mappedFileSizeTimerLog
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1

# The on-disk unit, for vectorised reads and writes of whole runs of units.
UNIT_DTYPE = np.dtype(
    [
        ("size", ">i4"),
        ("prev", ">i8"),
        ("magic", ">i4"),
        ("write_ms", ">i8"),
        ("delay_ms", ">i4"),
        ("phys", ">i8"),
        ("phys_size", ">i4"),
        ("topic_hash", ">i4"),
        ("queue_offset", ">i8"),
    ]
)
assert UNIT_DTYPE.itemsize == UNIT_SIZE

# A decoded unit: what ``read_many`` and ``TimerWheel.entries`` return.
ENTRY_DTYPE = np.dtype(
    [
        ("pos", np.int64),
        ("prev", np.int64),
        ("magic", np.int32),
        ("write_ms", np.int64),
        ("deliver_ms", np.int64),
        ("phys", np.int64),
        ("size", np.int32),
        ("queue_offset", np.int64),
    ]
)

# Longer than any run of zero bytes inside written units (SIZE is never 0).
_ZERO_GAP = 2 * UNIT_SIZE

_WALK_ERRORS = {
    1: "is not the start of a written unit",
    2: "has no valid SIZE and MAGIC (a torn or overwritten unit)",
    3: "delivers outside the slot",
    4: "points back to itself or forward",
}


def units_per_file(file_size: int) -> int:
    """How many units a file of ``file_size`` bytes holds (RocketMQ's rule, see above)."""
    return (file_size - MIN_BLANK_LEN) // UNIT_SIZE


def valid_units(view: np.ndarray) -> np.ndarray:
    """Mask of the units of a ``UNIT_DTYPE`` view that were completely appended."""
    magic = view["magic"]
    return (view["size"] == UNIT_SIZE) & (magic & ~MAGIC_FLAGS == 0) & (magic & MAGIC_DEFAULT != 0)


class TimerLog:
    """Units in files ``{directory}/{20-digit start offset}`` of ``file_size`` bytes each."""

    def __init__(self, directory: str, file_size: int = DEFAULT_FILE_SIZE) -> None:
        if file_size < UNIT_SIZE + MIN_BLANK_LEN:
            raise ValueError(
                f"timer log file size {file_size} is below the minimum "
                f"{UNIT_SIZE + MIN_BLANK_LEN} (one unit and a blank)"
            )
        self.file_size = file_size
        self.units_per_file = units_per_file(file_size)
        # Sparse, as the consume queues: disk blocks are reserved as units arrive.
        self.queue = MappedFileQueue(directory, file_size, sparse=True)

    # -- geometry --------------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        return self.queue.min_offset

    @property
    def max_offset(self) -> int:
        """The position just after the last unit (or blank) written."""
        return self.queue.max_offset

    def next_positions(self, count: int) -> np.ndarray:
        """The positions the next ``count`` appended units will get (nothing is written)."""
        last = self.queue.last_file()
        if last is None:
            start, used = 0, 0
        elif last.wrote_position + UNIT_SIZE + MIN_BLANK_LEN > self.file_size:
            start, used = last.file_end_offset, 0  # the next unit opens a new file
        else:
            start, used = last.file_from_offset, last.wrote_position // UNIT_SIZE
        k = np.arange(count, dtype=np.int64) + used
        return (
            start
            + (k // self.units_per_file) * self.file_size
            + (k % self.units_per_file) * UNIT_SIZE
        )

    def last_position(self) -> int:
        """The position of the last unit, or -1 when the log has none."""
        for mf in reversed(self.queue.files):
            n = min(mf.wrote_position // UNIT_SIZE, self.units_per_file)
            if n:
                return mf.file_from_offset + (n - 1) * UNIT_SIZE
        return -1

    # -- recovery --------------------------------------------------------------------------

    def load(self) -> None:
        self.queue.load()

    def recover(self, check_from: int = 0) -> int:
        """Find the end of the complete units after a crash and cut the log there; returns
        that end. Files before the one holding ``check_from`` are trusted as full (RocketMQ
        starts its check one file before the checkpointed flush position)."""
        files = self.queue.files
        if not files:
            return 0
        first = min(
            len(files) - 1, max(0, (check_from - files[0].file_from_offset) // self.file_size)
        )
        end = files[first].file_from_offset
        for mf in files[first:]:
            view = mf.buf[: self.units_per_file * UNIT_SIZE].view(UNIT_DTYPE)
            valid = valid_units(view)
            n = self.units_per_file if valid.all() else int(np.argmin(valid))
            end = mf.file_from_offset + n * UNIT_SIZE
            if n < self.units_per_file:
                break
        self.truncate(end)
        return end

    def truncate(self, offset: int) -> None:
        """Drop every unit at and after ``offset`` (a unit start): later files are deleted and
        the rest of the file holding ``offset`` is zeroed, so the dropped units can never be
        read back as data by a later recovery."""
        self.queue.truncate(offset, _ZERO_GAP)

    # -- writing ---------------------------------------------------------------------------

    def append_batch(
        self,
        deliver_ms: np.ndarray,
        phys: np.ndarray,
        sizes: np.ndarray,
        prev: np.ndarray,
        queue_offsets: np.ndarray,
        *,
        write_ms: int | None = None,
        magic: np.ndarray | int = MAGIC_DEFAULT,
    ) -> np.ndarray:
        """Append one unit per entry; returns their positions (``next_positions``).

        ``write_ms`` (default: now) is the unit's WRITE MS, RocketMQ's enqueue time kept for
        tracing; each ``deliver_ms - write_ms`` must fit the int32 DELAY MS. ``magic`` is
        every unit's MAGIC, or one per entry. Every file the
        batch needs is created and given disk blocks before any unit is written, so a full
        disk (``DiskFullError``) leaves the log as it was.
        """
        count = len(deliver_ms)
        if not len(phys) == len(sizes) == len(prev) == len(queue_offsets) == count:
            raise ValueError(
                f"timer log batch columns differ in length: deliver_ms {count}, phys "
                f"{len(phys)}, sizes {len(sizes)}, prev {len(prev)}, queue_offsets "
                f"{len(queue_offsets)}"
            )
        positions = self.next_positions(count)
        if count == 0:
            return positions
        if write_ms is None:
            write_ms = time.time_ns() // 1_000_000
        delay = np.asarray(deliver_ms, dtype=np.int64) - write_ms
        if delay.min() < _INT32_MIN or delay.max() > _INT32_MAX:
            raise ValueError(
                f"timer log: deliver times {int(delay.min()) + write_ms}.."
                f"{int(delay.max()) + write_ms} ms are more than the int32 DELAY MS "
                f"({_INT32_MAX} ms) away from the write time {write_ms} ms"
            )
        starts = positions - positions % self.file_size
        cuts = np.flatnonzero(starts[1:] != starts[:-1]) + 1
        bounds = [0, *cuts.tolist(), count]
        runs = []
        for a, b in itertools.pairwise(bounds):  # every file before any byte
            start = int(starts[a])
            mf = self._file(start)
            local = int(positions[a]) - start
            mf.reserve(local + (b - a) * UNIT_SIZE)
            runs.append((mf, local, a, b))
        for mf, local, a, b in runs:
            if mf is not self.queue.last_file():
                self._roll(mf)
            units = mf.buf[local : local + (b - a) * UNIT_SIZE].view(UNIT_DTYPE)
            units["prev"] = prev[a:b]
            units["magic"] = magic if np.isscalar(magic) else magic[a:b]
            units["write_ms"] = write_ms
            units["delay_ms"] = delay[a:b]
            units["phys"] = phys[a:b]
            units["phys_size"] = sizes[a:b]
            units["topic_hash"] = 0
            units["queue_offset"] = queue_offsets[a:b]
            units["size"] = UNIT_SIZE  # last: a unit without its SIZE is cut by recover()
            mf.wrote_position = local + (b - a) * UNIT_SIZE
        return positions

    def _file(self, start: int) -> MappedFile:
        """The file starting at ``start``: the last one, or a new one made ready (not yet
        in the queue, so that a later failure leaves the queue as it was)."""
        last = self.queue.last_file()
        if last is not None and last.file_from_offset == start:
            return last
        return self.queue.prepare(start)

    def _roll(self, mf: MappedFile) -> None:
        """Close the last file with a blank over its unused tail and take ``mf`` as next."""
        last = self.queue.last_file()
        if last is not None and last.wrote_position < last.size:
            blank = last.buf[last.wrote_position : last.wrote_position + MIN_BLANK_LEN]
            blank[:] = np.frombuffer(
                np.array([(last.size - last.wrote_position, 0, BLANK_MAGIC)], ">i4,>i8,>i4"),
                np.uint8,
            )
            last.wrote_position = last.size
        self.queue.new_file(mf.file_from_offset)

    def flush(self) -> int:
        """msync what was written since the last flush; returns ``max_offset``."""
        self.queue.flush()
        return self.max_offset

    # -- reading ---------------------------------------------------------------------------

    def read(self, pos: int) -> np.void:
        """The unit at ``pos``, as one ``ENTRY_DTYPE`` record."""
        return self.read_many(np.array([pos], dtype=np.int64))[0]

    def read_many(self, positions: np.ndarray) -> np.ndarray:
        """The units at ``positions`` (any order), as an ``ENTRY_DTYPE`` array.
        ``CorruptStoreError`` when a position is not a complete unit of this log."""
        positions = np.asarray(positions, dtype=np.int64)
        out = np.empty(positions.shape[0], dtype=ENTRY_DTYPE)
        if not positions.size:
            return out
        starts = positions - positions % self.file_size
        for start in np.unique(starts).tolist():
            mf = self.queue.find_file(start)
            at = np.flatnonzero(starts == start)
            local = positions[at] - start
            limit = 0 if mf is None else min(mf.wrote_position // UNIT_SIZE, self.units_per_file)
            bad = (local % UNIT_SIZE != 0) | (local // UNIT_SIZE >= limit)
            units = None
            if not bad.any():
                units = mf.buf[: limit * UNIT_SIZE].view(UNIT_DTYPE)[local // UNIT_SIZE]
                bad = ~valid_units(units)
            if bad.any():
                raise CorruptStoreError(
                    f"timer log {self.queue.directory}: position "
                    f"{int(positions[at[np.argmax(bad)]])} is not a complete unit "
                    f"(log spans {self.min_offset}..{self.max_offset})"
                )
            out["pos"][at] = positions[at]
            out["prev"][at] = units["prev"]
            out["magic"][at] = units["magic"]
            out["write_ms"][at] = units["write_ms"]
            out["deliver_ms"][at] = units["write_ms"] + units["delay_ms"]
            out["phys"][at] = units["phys"]
            out["size"][at] = units["phys_size"]
            out["queue_offset"][at] = units["queue_offset"]
        return out

    def chain(self, last_pos: int, lo_ms: int, hi_ms: int, limit: int) -> np.ndarray:
        """Positions of the chain ending at ``last_pos``, oldest first, checking that each
        unit is complete and delivers in ``[lo_ms, hi_ms)`` (its wheel slot). At most
        ``limit`` units are expected: a longer chain is corruption."""
        out = np.empty(limit, dtype=np.int64)
        n, _ = self._walk(last_pos, lo_ms, hi_ms, out)
        if n > limit:
            raise CorruptStoreError(
                f"timer log {self.queue.directory}: the chain ending at {last_pos} holds "
                f"{n} units, more than the {limit} its wheel slot counts"
            )
        return out[limit - n :]

    def chain_length(self, last_pos: int, lo_ms: int, hi_ms: int) -> tuple[int, int]:
        """``(units, position of the oldest)`` of the chain ending at ``last_pos``, checked
        as ``chain`` checks it."""
        return self._walk(last_pos, lo_ms, hi_ms, np.empty(0, dtype=np.int64))

    def _walk(self, pos: int, lo_ms: int, hi_ms: int, out: np.ndarray) -> tuple[int, int]:
        """Walk a chain file by file (one kernel call per file it crosses)."""
        n, oldest = 0, -1
        while pos != -1:
            mf = self.queue.find_file(pos)
            if mf is None:
                raise CorruptStoreError(
                    f"timer log {self.queue.directory}: a chain points at {pos}, outside the "
                    f"log ({self.min_offset}..{self.max_offset})"
                )
            limit = min(mf.wrote_position // UNIT_SIZE, self.units_per_file) * UNIT_SIZE
            n, at, seen, error = _walk_file(
                mf.buf, mf.file_from_offset, limit, pos, lo_ms, hi_ms, out, n
            )
            if error:
                raise CorruptStoreError(
                    f"timer log {self.queue.directory}: unit at {at} {_WALK_ERRORS[error]} "
                    f"(chain of slot [{lo_ms}, {hi_ms}) ms)"
                )
            oldest = seen if seen != -1 else oldest
            pos = at
        return n, oldest

    def unit_views(
        self, start: int, end: int, *, reverse: bool = False
    ) -> Iterator[tuple[int, np.ndarray]]:
        """``(position of the first, UNIT_DTYPE view)`` of the units in ``[start, end)``, one
        pair per file, for vectorised scans; ``reverse`` goes from the last file back."""
        files = self.queue.files if not reverse else list(reversed(self.queue.files))
        for mf in files:
            lo = max(start, mf.file_from_offset) - mf.file_from_offset
            n = min(mf.wrote_position // UNIT_SIZE, self.units_per_file)
            hi = min(end - mf.file_from_offset, n * UNIT_SIZE)
            first = -(-lo // UNIT_SIZE) * UNIT_SIZE
            if hi > first:
                yield mf.file_from_offset + first, mf.buf[first:hi].view(UNIT_DTYPE)

    def close(self) -> None:
        self.queue.close()


@njit(cache=True, nogil=True)
def _walk_file(buf, base, limit, pos, lo_ms, hi_ms, out, n):
    """Follow PREV POS from ``pos`` while it stays in this file (bytes ``[0, limit)`` of
    ``buf``, at global offset ``base``); the i-th unit walked goes to ``out[-1 - i]`` while
    there is room. Returns ``(units so far, where the walk left the file or stopped,
    oldest unit seen or -1, error code)``."""
    cap = out.shape[0]
    seen = -1
    while pos >= base:
        local = pos - base
        if local >= limit or local % UNIT_SIZE != 0:
            return n, pos, seen, 1
        magic = get_i32(buf, local + 12)
        if get_i32(buf, local) != UNIT_SIZE or magic & ~MAGIC_FLAGS or not magic & MAGIC_DEFAULT:
            return n, pos, seen, 2
        deliver = get_i64(buf, local + 16) + get_i32(buf, local + 24)
        if deliver < lo_ms or deliver >= hi_ms:
            return n, pos, seen, 3
        prev = get_i64(buf, local + 4)
        if prev >= pos:
            return n, pos, seen, 4
        if n < cap:
            out[cap - 1 - n] = pos
        n += 1
        seen = pos
        pos = prev
    return n, pos, seen, 0
