"""Delay levels for the schedule agent (RocketMQ's ``ScheduleMessageService``).

A message sent with delay level ``n`` sits in ``SCHEDULE_TOPIC_XXXX`` queue ``n - 1``; reput
wrote its delivery time into the unit's tag slot. Each level is read in queue order: the
units at the head whose time has come are due. ``delayOffset.json`` (RocketMQ's shape,
``offsetTable``: level → next queue offset) records the progress; units delivered beyond a
gap (a delivery the writer refused for now) are kept in ``done`` until the gap closes.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from shmq import json_file
from shmq.delay_topics import SCHEDULE_TOPIC
from shmq.ipc import queue_table as qt
from shmq.store.reader import StoreReader

FILE_NAME = "delayOffset.json"
BATCH = 4096  # units read per level and pass
_SCHEDULE = SCHEDULE_TOPIC.encode()
REMOVE = np.frombuffer(b"DELAY", dtype=np.uint8)  # a delivery drops DELAY, keeps REAL_*


class DelayLevels:
    """The levels' progress: ``offsets[level - 1]`` and the units delivered beyond it."""

    remove = REMOVE

    def __init__(
        self,
        path: str,
        delays: tuple[int, ...],
        reader: StoreReader,
        directory: qt.QueueDirectory,
        maxima: np.ndarray,
    ) -> None:
        self.path = path
        self.delays = delays
        self.levels = len(delays)
        self.reader = reader
        self.directory = directory
        self.maxima = maxima
        self.offsets = np.zeros(self.levels, dtype=np.int64)  # per queue id (level - 1)
        self.done: list[set[int]] = [set() for _ in range(self.levels)]

    def load(self) -> int:
        """The persisted progress; returns its ``shmqScanFrom`` (0 without a file)."""
        data = json_file.load(self.path, lambda t: json_file.loads_fastjson(t, int_keys=True))
        if not isinstance(data, dict):
            return 0
        for level, offset in (data.get("offsetTable") or {}).items():
            if isinstance(level, int) and 1 <= level <= self.levels and isinstance(offset, int):
                self.offsets[level - 1] = max(offset, 0)
        for level, offsets in (data.get("shmqDelivered") or {}).items():
            if isinstance(level, int) and 1 <= level <= self.levels and isinstance(offsets, list):
                self.done[level - 1] = {o for o in offsets if isinstance(o, int)}
        scan_from = data.get("shmqScanFrom", 0)
        return scan_from if isinstance(scan_from, int) and scan_from >= 0 else 0

    def snapshot(self) -> tuple[np.ndarray, list[list[int]]]:
        return self.offsets.copy(), [sorted(d) for d in self.done]

    def persist(self, state: tuple[np.ndarray, list[list[int]]], scan_from: int) -> None:
        offsets, done = state
        data: dict = {
            "offsetTable": {level + 1: int(o) for level, o in enumerate(offsets)},
            "shmqScanFrom": scan_from,
        }
        extra = {level + 1: d for level, d in enumerate(done) if d}
        if extra:
            data["shmqDelivered"] = extra
        json_file.persist(self.path, json_file.dumps_fastjson(data))

    # -- reading ----------------------------------------------------------------------------

    def _max_offset(self, qid: int) -> int:
        slot = self.directory.slot(_SCHEDULE, qid)
        return int(self.maxima[slot]) if slot >= 0 else 0

    def _units(self, qid: int, offset: int, end: int) -> np.ndarray | None:
        units, _ = self.reader.units(SCHEDULE_TOPIC, qid, offset, min(end, offset + BATCH))
        return units if units.size else None

    def _runs(self, qid: int, offset: int, units: np.ndarray) -> tuple[list[tuple], list]:
        """The records the units point at, per CommitLog file: ``[(buffer, rows, picks,
        ids)]`` with ids ``(queue id, queue offset)``, those already delivered left out;
        and the ids of units whose record is gone or broken (RocketMQ skips them too)."""
        n = units.shape[0]
        phys = units["offset"].astype(np.int64)
        sizes = units["size"].astype(np.int64)
        qoffs = offset + np.arange(n, dtype=np.int64)
        runs, found, done = [], set(), self.done[qid]
        for mf, rows, ok in self.reader.records(SCHEDULE_TOPIC, qid, phys, sizes, qoffs):
            offsets = rows["queue_offset"][ok].tolist()
            found.update(offsets)
            fresh = [k for k, o in enumerate(offsets) if o not in done]
            if fresh:
                picks = ok[fresh] if len(fresh) < len(offsets) else ok
                runs.append((mf.buf, rows, picks, [(qid, offsets[k]) for k in fresh]))
        return runs, [(qid, o) for o in range(offset, offset + n) if o not in found]

    def _due(self, qid: int, now: int) -> tuple[int, np.ndarray | None, int]:
        """``(offset, due units, next due ms)`` of one level: the leading units whose time
        has come (RocketMQ's ``correctDeliverTimestamp``: a time beyond now + the level's
        delay, a clock that jumped back, counts as now)."""
        offset, end = int(self.offsets[qid]), self._max_offset(qid)
        units = self._units(qid, offset, end) if offset < end else None
        if units is None:
            return offset, None, -1
        due_at = units["tags_code"].astype(np.int64)
        due_at[due_at > now + self.delays[qid]] = now
        due = int(np.count_nonzero(np.cumprod(due_at <= now)))
        if due < units.size:
            return offset, units[:due], int(due_at[due])
        return offset, units, now if offset + due < end else -1

    def due(self, now: int) -> tuple[list[tuple], list, int]:
        """``(runs to deliver, ids with no record to deliver, next due ms or -1)`` over
        all levels (runs as ``_runs`` gives them)."""
        runs: list[tuple] = []
        missing: list = []
        next_due = -1
        for qid in range(self.levels):
            offset, units, level_next = self._due(qid, now)
            if level_next >= 0:
                next_due = level_next if next_due < 0 else min(next_due, level_next)
            if units is not None and units.size:
                level_runs, level_missing = self._runs(qid, offset, units)
                runs += level_runs
                missing += level_missing
        return runs, missing, next_due

    def pending(self, now: int) -> Iterator[tuple]:
        """Every due, undelivered record, in runs (recovery looks for their deliveries)."""
        saved = self.offsets.copy()
        try:
            for qid in range(self.levels):
                while True:
                    offset, units, _ = self._due(qid, now)
                    if units is None or not units.size:
                        break
                    yield from self._runs(qid, offset, units)[0]
                    self.offsets[qid] = offset + units.size
        finally:
            self.offsets[:] = saved

    def settle(self, ids: list) -> int:
        """Count ``ids`` delivered (or given up); returns how far the offsets moved."""
        for qid, offset in ids:
            self.done[qid].add(offset)
        moved = 0
        for qid in {qid for qid, _ in ids}:
            done, offset = self.done[qid], int(self.offsets[qid])
            start = offset
            while offset in done:
                done.discard(offset)
                offset += 1
            self.offsets[qid] = offset
            moved += offset - start
        return moved
