"""ConsumeQueue: the per-(topic, queue) index of 20-byte units into the CommitLog.

Unit ``n`` (queue offset ``n``) is at byte ``n * 20`` of the queue's file sequence under
``consumequeue/{topic}/{queueId}/``. Written only by reput (dispatch); read by consumers.
"""

from __future__ import annotations

import logging
import os

import numpy as np

from shmq.codec.consume_queue import (
    BLANK_UNIT_SIZE,
    CQ_UNIT_DTYPE,
    CQ_UNIT_SIZE,
    count_valid_units,
    put_unit_rows,
    put_units,
)
from shmq.store.mapped_file import MappedFile
from shmq.store.mapped_file_queue import MappedFileQueue

log = logging.getLogger(__name__)

# Longer than any run of zero bytes inside valid units (a unit always has size > 0).
_UNIT_ZERO_GAP = 2 * CQ_UNIT_SIZE


def next_life_offset(max_offset: int, units_per_file: int) -> int:
    """The first queue offset of a deleted queue's next life (``topic_purge``): one past
    the consume-queue file boundary at or after ``max_offset``, whose unit is blank and
    marks where the life starts (``ConsumeQueue.purge_below``); 0 for a queue that had
    nothing."""
    if max_offset == 0:
        return 0
    return -(-max_offset // units_per_file) * units_per_file + 1


def blank_units(units: np.ndarray) -> np.ndarray:
    """Which of ``units`` (``CQ_UNIT_DTYPE``) are blank: padding before a queue's first
    message (``fillPreBlank``), pointing at no record."""
    return (units["offset"] == 0) & (units["size"] == BLANK_UNIT_SIZE)


def first_stored(units: np.ndarray, min_phys_offset: int) -> int:
    """The index of the first of ``units`` whose message is still stored: not blank, at or
    after the CommitLog's first offset ``min_phys_offset`` (RocketMQ's ``correctMinOffset``);
    ``units.size`` when none is."""
    alive = np.flatnonzero((units["offset"] >= min_phys_offset) & ~blank_units(units))
    return int(alive[0]) if alive.size else units.size


def is_blank_unit(offset: int, size: int) -> bool:
    """``blank_units`` for one unit's CommitLog offset and size."""
    return offset == 0 and size == BLANK_UNIT_SIZE


class ConsumeQueue:
    def __init__(
        self, root: str, topic: str, queue_id: int, file_size: int, *, readonly: bool = False
    ) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.units_per_file = file_size // CQ_UNIT_SIZE
        self.queue = MappedFileQueue(  # sparse, as RocketMQ's: blocks come as units do
            os.path.join(root, topic, str(queue_id)), file_size, readonly=readonly, sparse=True
        )
        self.min_logic_offset = 0  # in units
        self.max_physic_offset = -1  # offset + size of the last unit written

    # -- offsets ---------------------------------------------------------------------------

    @property
    def max_offset(self) -> int:
        """The next queue offset to be written (the number of units)."""
        return self.queue.max_offset // CQ_UNIT_SIZE

    @property
    def min_offset(self) -> int:
        return max(self.min_logic_offset, self.queue.min_offset // CQ_UNIT_SIZE)

    # -- recovery --------------------------------------------------------------------------

    def load(self) -> None:
        self.queue.load()

    def recover(self) -> None:
        """Walk units from the third-last file to the first invalid one; truncate there."""
        files = self.queue.files
        if not files:
            return
        first = max(0, len(files) - 3)
        end = files[first].file_from_offset
        for mf in files[first:]:
            n = count_valid_units(mf.buf, 0, self.units_per_file)
            end = mf.file_from_offset + n * CQ_UNIT_SIZE
            if n < self.units_per_file:
                break
        self.queue.truncate(end, _UNIT_ZERO_GAP)
        self._reload_max_physic_offset()

    def truncate_dirty(self, phys_offset: int) -> None:
        """Remove units pointing at or past ``phys_offset`` (a cut CommitLog tail)."""
        files = self.queue.files
        while len(files) > 1:
            first = np.frombuffer(files[-1].buf, dtype=CQ_UNIT_DTYPE, count=1)[0]
            if files[-1].wrote_position and int(first["offset"]) < phys_offset:
                break
            files.pop().destroy()
        if not files:
            return
        last = files[-1]
        units = np.frombuffer(last.buf, dtype=CQ_UNIT_DTYPE)[: last.wrote_position // CQ_UNIT_SIZE]
        beyond = np.nonzero(units["offset"] >= phys_offset)[0]
        keep = int(beyond[0]) if beyond.size else units.size
        self.queue.truncate(last.file_from_offset + keep * CQ_UNIT_SIZE, _UNIT_ZERO_GAP)
        self._reload_max_physic_offset()

    def _reload_max_physic_offset(self) -> None:
        """From the last unit; -1 when it is blank (a queue whose life starts with no
        message yet: its blank unit's size would hide every record from ``put``)."""
        unit = self.unit(self.max_offset - 1) if self.max_offset > self.min_offset else None
        blank = unit is not None and is_blank_unit(unit[0], unit[1])
        self.max_physic_offset = unit[0] + unit[1] if unit is not None and not blank else -1

    # -- writing ---------------------------------------------------------------------------

    def put(
        self,
        queue_offsets: np.ndarray,
        phys_offsets: np.ndarray,
        sizes: np.ndarray,
        tags_codes: np.ndarray,
    ) -> int:
        """Write units for records in queue-offset order; returns how many were written.

        Idempotent like RocketMQ's ``putMessagePositionInfo``: a unit whose record ends at or
        before the last one written, or whose queue offset is already taken, is skipped, so
        re-dispatching after recovery is harmless. The first unit of an empty queue may start
        past 0 (its file is padded with blank units, ``fillPreBlank``); a later gap cannot
        happen with a consistent log, so it is logged and the units are written next.
        """
        new = (phys_offsets + sizes > self.max_physic_offset) & (queue_offsets >= self.max_offset)
        if not new.any():
            return 0
        queue_offsets, phys_offsets = queue_offsets[new], phys_offsets[new]
        sizes, tags_codes = sizes[new].astype(np.int64), tags_codes[new]
        if not self.queue.files and queue_offsets[0] > 0:
            self._fill_pre_blank(int(queue_offsets[0]))
        elif queue_offsets[0] != self.max_offset:
            log.error(
                "consume queue %s-%d: record queue offset %d where %d was expected; "
                "written at %d (logic queue order maybe wrong)",
                self.topic,
                self.queue_id,
                int(queue_offsets[0]),
                self.max_offset,
                self.max_offset,
            )
        written = 0
        n = queue_offsets.shape[0]
        while written < n:
            unit = self.max_offset
            mf = self._file_for(unit)
            local = unit - mf.file_from_offset // CQ_UNIT_SIZE
            count = min(n - written, self.units_per_file - local)
            end = written + count
            mf.reserve((local + count) * CQ_UNIT_SIZE)  # DiskFullError before any byte
            put_units(
                mf.buf,
                local,
                phys_offsets[written:end],
                sizes[written:end],
                tags_codes[written:end],
            )
            mf.wrote_position = (local + count) * CQ_UNIT_SIZE
            written = end
        self.max_physic_offset = int(phys_offsets[-1] + sizes[-1])
        return written

    def put_rows(self, rows: np.ndarray, picks: np.ndarray, a: int, b: int, base: int) -> int:
        """``put`` for the records ``rows[picks[a:b]]`` of a scan batch (positions relative
        to physical offset ``base``): while they simply continue the queue, their units are
        written straight from the rows by one kernel call per file; anything else (a first
        unit past 0, a re-dispatched or out-of-order record) goes through ``put``."""
        done = a
        while done < b and self.queue.files:
            unit = self.max_offset
            mf = self._file_for(unit)
            local = unit - mf.file_from_offset // CQ_UNIT_SIZE
            count = min(b - done, self.units_per_file - local)
            mf.reserve((local + count) * CQ_UNIT_SIZE)  # DiskFullError before any byte
            n = put_unit_rows(mf.buf, local, rows, picks, done, done + count, base, unit,
                              self.max_physic_offset)  # fmt: skip
            if n == 0:
                break
            mf.wrote_position = (local + n) * CQ_UNIT_SIZE
            last = picks[done + n - 1]
            self.max_physic_offset = base + int(rows["pos"][last] + rows["size"][last])
            done += n
            if n < count:
                break
        written = done - a
        if done < b:
            idx = picks[done:b]
            written += self.put(rows["queue_offset"][idx], base + rows["pos"][idx],
                                rows["size"][idx], rows["tags_code"][idx])  # fmt: skip
        return written

    def run_target(self, count: int) -> tuple[MappedFile, int, int, int] | None:
        """Where up to ``count`` units that continue the queue go (``dispatch_run``): the
        file, the next unit's index in it, the room left there (at most ``count``, blocks
        reserved) and the next queue offset; None for a queue with no file yet (its first
        unit may need padding before it: ``put``)."""
        if not self.queue.files:
            return None
        unit = self.max_offset
        mf = self._file_for(unit)
        local = unit - mf.file_from_offset // CQ_UNIT_SIZE
        room = min(count, self.units_per_file - local)
        mf.reserve((local + room) * CQ_UNIT_SIZE)  # DiskFullError before any byte
        return mf, local, room, unit

    def ran(self, mf: MappedFile, end_unit: int, max_physic: int) -> None:
        """``dispatch_run`` wrote units into ``mf`` up to its unit index ``end_unit``, the
        last of them ending at physical offset ``max_physic``."""
        mf.wrote_position = end_unit * CQ_UNIT_SIZE
        self.max_physic_offset = max_physic

    def _file_for(self, unit: int):
        """The file that holds ``unit``, created when ``unit`` starts a new one."""
        last = self.queue.last_file()
        if last is not None and unit * CQ_UNIT_SIZE < last.file_end_offset:
            return last
        return self.queue.new_file(unit * CQ_UNIT_SIZE - (unit * CQ_UNIT_SIZE) % self.file_size)

    def _fill_pre_blank(self, first: int, tags_code: int = 0) -> None:
        """A queue whose first unit is ``first`` > 0 (its older files were cleaned, or its
        topic was deleted): create the file holding it and pad it with blank units
        ``(0, Integer.MAX_VALUE, tags_code)``."""
        mf = self._file_for(first)
        local = first - mf.file_from_offset // CQ_UNIT_SIZE
        mf.reserve(local * CQ_UNIT_SIZE)
        put_units(
            mf.buf,
            0,
            np.zeros(local, dtype=np.int64),
            np.full(local, BLANK_UNIT_SIZE, dtype=np.int64),
            np.full(local, tags_code, dtype=np.int64),
        )
        mf.wrote_position = local * CQ_UNIT_SIZE
        self.min_logic_offset = first

    def flush(self, least_pages: int = 0) -> int:
        return self.queue.flush(least_pages)

    # -- reading ---------------------------------------------------------------------------

    def units(self, start: int, max_count: int) -> tuple[np.ndarray, np.ndarray]:
        """Up to ``max_count`` units from queue offset ``start``, within one file.

        Returns ``(buffer, structured view)``: the file's uint8 buffer (for kernels) and a
        ``CQ_UNIT_DTYPE`` view of the units (copy it before the file can be deleted).
        """
        end = min(self.max_offset, start + max_count)
        mf = self.queue.find_file(start * CQ_UNIT_SIZE)
        if mf is None or end <= start:
            return np.empty(0, np.uint8), np.empty(0, CQ_UNIT_DTYPE)
        first = mf.file_from_offset // CQ_UNIT_SIZE
        count = min(end - start, first + self.units_per_file - start)
        view = np.frombuffer(
            mf.buf, dtype=CQ_UNIT_DTYPE, count=count, offset=(start - first) * CQ_UNIT_SIZE
        )
        return mf.buf, view

    def unit(self, offset: int) -> tuple[int, int, int] | None:
        """``(commitlog offset, size, tags code)`` of one unit, or None out of range."""
        if not self.min_offset <= offset < self.max_offset:
            return None
        _, view = self.units(offset, 1)
        if not view.size:
            return None
        u = view[0]
        return int(u["offset"]), int(u["size"]), int(u["tags_code"])

    # -- cleanup ---------------------------------------------------------------------------

    def delete_expired(self, min_phys_offset: int) -> int:
        """Delete whole files whose last unit points below ``min_phys_offset`` (never the
        last file); then move the min offset to the first unit at or after it."""
        files = self.queue.files
        count = 0
        for mf in files[:-1]:
            if self._unit_offset(mf, self.units_per_file - 1) >= min_phys_offset:
                break
            count += 1
        self.queue.delete_first_files(count)
        self.correct_min_offset(min_phys_offset)
        return count

    def purge_below(self, phys_offset: int) -> int:
        """The topic was deleted by the record at ``phys_offset``: start the queue's next
        life in a file of its own, its first unit blank with ``phys_offset`` as tags code
        (a replay of the record finds it done; a blank first unit tells the broker the
        queue still holds its first message), then delete every file before it. Returns
        the files deleted.

        The new file comes first: a crash in between leaves the old files, which replay
        purges again, never a queue that forgot its offsets."""
        files = self.queue.files
        if self.max_offset == 0:
            return 0
        life = next(
            (i for i, mf in enumerate(files) if self._life_started_by(mf) == phys_offset), None
        )
        if life is None:
            self._fill_pre_blank(next_life_offset(self.max_offset, self.units_per_file),
                                 phys_offset)  # fmt: skip
            life = len(files) - 1
        self.queue.delete_first_files(life)
        return life

    def _life_started_by(self, mf: MappedFile) -> int:
        """The deletion record's offset when ``mf`` starts a life (see ``purge_below``)."""
        if not mf.wrote_position:
            return -1
        unit = np.frombuffer(mf.buf, dtype=CQ_UNIT_DTYPE, count=1)[0]
        blank = is_blank_unit(int(unit["offset"]), int(unit["size"]))
        return int(unit["tags_code"]) if blank else -1

    @staticmethod
    def _unit_offset(mf: MappedFile, i: int) -> int:
        """The CommitLog offset unit ``i`` of ``mf`` points at."""
        unit = np.frombuffer(mf.buf, dtype=CQ_UNIT_DTYPE, count=1, offset=i * CQ_UNIT_SIZE)
        return int(unit[0]["offset"])

    def correct_min_offset(self, min_phys_offset: int) -> None:
        mf = self.queue.files[0] if self.queue.files else None
        if mf is None:
            return
        units = np.frombuffer(mf.buf, dtype=CQ_UNIT_DTYPE)[: mf.wrote_position // CQ_UNIT_SIZE]
        first = mf.file_from_offset // CQ_UNIT_SIZE
        self.min_logic_offset = first + first_stored(units, min_phys_offset)

    def close(self) -> None:
        self.queue.close()

    def destroy(self) -> None:
        self.queue.delete_all()
        self.queue.close()
