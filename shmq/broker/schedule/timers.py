"""Timer messages for the schedule agent (RocketMQ 5's ``TimerMessageStore``).

A message with a delivery time (``TIMER_DELIVER_MS``) is stored in ``rmq_sys_wheel_timer``
queue 0 with its real topic and queue in ``REAL_TOPIC`` / ``REAL_QID`` and the time in
``TIMER_OUT_MS``. The agent moves new ones onto the timing wheel (``store.timer_wheel``:
the wheel file and the timer log under the store, committed by the timer checkpoint), and
delivers every entry whose time has come, slot by slot: ``dequeue_ms`` is the first slot not
yet wholly delivered. An entry is delivered at its own time, not its slot's, so lateness is
the agent's wake-up, not the precision.

A recall's delete marker (a timer message with ``TIMER_DEL_UNIQKEY``, RocketMQ 5.3) goes
on the wheel like any other, with the DELETE flag in its unit's MAGIC. A slot holding
markers drops, instead of delivering, the markers themselves and every message whose real
topic and unique key one of them names (RocketMQ's ``deleteUniqKeys`` of a slot), each at
its own time: so a message is recalled when its marker reached the wheel before the message
was due, across restarts too (the marker is a unit of the timer log).

Exactly once across a crash: the checkpoint's ``dequeue_ms`` and ``scan_from`` are written
only at quiet, flushed moments (by the agent), and ``scan_from`` is the CommitLog write
offset from before the first delivery of the slot at ``dequeue_ms``: whatever of that slot
and later ones was delivered is found again by the agent's CommitLog scan.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator

import numpy as np

from shmq.codec.record_rebuild import property_value
from shmq.config import MessageStoreConfig
from shmq.delay_topics import TIMER_TOPIC, delete_key
from shmq.ipc import queue_table as qt
from shmq.store.reader import StoreReader
from shmq.store.timer.log import ENTRY_DTYPE, MAGIC_DEFAULT, MAGIC_DELETE, TimerLog
from shmq.store.timer.wheel import (
    TimerCheckpoint,
    TimerWheel,
    commit,
    paths,
    recover,
    slots_total_for,
)

log = logging.getLogger(__name__)

OPEN_RETRY_S = 10.0  # after the timer store could not be opened (a full disk)
ENQUEUE_BATCH = 16384  # timer-topic units moved onto the wheel per pass
DELIVER_BATCH = 16384  # entries delivered per pass
_TIMER = TIMER_TOPIC.encode()
_OUT_MS = b"TIMER_OUT_MS"
_DEL_UNIQKEY, _REAL_TOPIC, _UNIQ_KEY = b"TIMER_DEL_UNIQKEY", b"REAL_TOPIC", b"UNIQ_KEY"


class Timers:
    """The wheel, its log and checkpoint, and what of the current slots was delivered."""

    remove = np.empty(0, dtype=np.uint8)  # a delivery keeps every property

    def __init__(
        self,
        root: str,
        store: MessageStoreConfig,
        reader: StoreReader,
        directory: qt.QueueDirectory,
        maxima: np.ndarray,
        write_offset: Callable[[], int],
        now_ms: int,
    ) -> None:
        self.reader = reader
        self.directory = directory
        self.maxima = maxima
        self.write_offset = write_offset
        self.store = store
        self.precision = store.timer_precision_ms
        self.paths = paths(root)
        self.wheel: TimerWheel | None = None
        self._open_after = 0.0
        self.done: set[int] = set()  # timer log positions delivered at or after dequeue_ms
        self.slot_scan_from = -1  # the write offset before the current slot's first delivery
        # (slot ms, count, entries, mask of those dropped: delete markers and recalled)
        self._cache: tuple[int, int, np.ndarray, np.ndarray] | None = None
        self._keys: dict[int, str | None] = {}  # timer log position -> its delete key
        self.waiting = 0  # entries on the wheel not yet delivered or dropped
        if os.path.exists(self.paths[0]):  # timers were used: recover them now
            self._open(now_ms)

    def _open(self, now_ms: int) -> bool:
        """Open (creating when absent) the wheel, log and checkpoint, and recover them. The
        store gets its 16 MiB wheel only once a timer message arrives; a full disk then
        delays timers (retried every ``OPEN_RETRY_S``), and stops nothing else."""
        if self.wheel is not None:
            return True
        if time.monotonic() < self._open_after:
            return False
        wheel_path, log_dir, checkpoint_path = self.paths
        timer_log = wheel = None
        try:
            timer_log = TimerLog(log_dir)
            timer_log.load()
            slots = slots_total_for(self.store.timer_max_delay_sec, self.precision)
            wheel = TimerWheel(wheel_path, slots, self.precision)
            checkpoint = TimerCheckpoint.load(checkpoint_path)
            self.enqueue_offset = recover(wheel, timer_log, checkpoint)
        except OSError as exc:  # DiskFullError among them
            log.error("timer messages wait: cannot open the timer store: %s", exc)
            self._open_after = time.monotonic() + OPEN_RETRY_S
            for opened in (wheel, timer_log):
                if opened is not None:
                    opened.close()
            return False
        self.log, self.wheel, self.checkpoint = timer_log, wheel, checkpoint
        if not checkpoint.dequeue_ms:
            # a new timer store: nothing on it is due before now; persisted at once, as a
            # restart must not start later than a message that was enqueued meanwhile
            checkpoint.dequeue_ms = self._slot_start(now_ms)
            checkpoint.scan_from = self.write_offset()
            checkpoint.persist()
        # a slot a whole lap old is gone from the wheel (RocketMQ starts no earlier either)
        floor = now_ms - wheel.lap_ms + self.precision
        self.dequeue_ms = self._slot_start(max(checkpoint.dequeue_ms, floor))
        first = self.dequeue_ms // self.precision
        live = (wheel.slots["time"] >= first) & (wheel.slots["time"] < first + wheel.slot_count)
        self.waiting = int(wheel.slots["num"][live].sum())
        return True

    def _slot_start(self, ms: int) -> int:
        return ms - ms % self.precision

    def load(self) -> int:
        """Where the recovery scan must start for timers (nowhere: not yet in use)."""
        return self.checkpoint.scan_from if self.wheel is not None else 1 << 62

    # -- enqueue ------------------------------------------------------------------------------

    def enqueue(self, now: int) -> int:
        """Move new timer-topic messages onto the wheel; returns how many."""
        slot = self.directory.slot(_TIMER, 0)
        end = int(self.maxima[slot]) if slot >= 0 else 0
        if not end or not self._open(now):
            return 0
        offset = self.enqueue_offset
        if offset >= end:
            return 0
        units, _ = self.reader.units(TIMER_TOPIC, 0, offset, min(end, offset + ENQUEUE_BATCH))
        if not units.size:
            return 0
        n = units.shape[0]
        phys = units["offset"].astype(np.int64)
        sizes = units["size"].astype(np.int64)
        qoffs = offset + np.arange(n, dtype=np.int64)
        deliver = np.full(n, -1, dtype=np.int64)
        magic = np.full(n, MAGIC_DEFAULT, dtype=np.int32)
        for at, props in self._properties(phys, sizes, qoffs):
            out = property_value(props, _OUT_MS)
            deliver[at] = int(out) if out is not None and out.isdigit() else now
            if property_value(props, _DEL_UNIQKEY) is not None:
                magic[at] |= MAGIC_DELETE
        kept = deliver >= 0  # units whose record is gone are skipped
        # due already: the current slot delivers it at once; beyond the wheel: its last slot
        low, high = self.dequeue_ms, self.dequeue_ms + self.wheel.lap_ms - self.precision
        placed = np.clip(deliver[kept], low, high)
        self.wheel.enqueue_batch(
            placed, phys[kept], sizes[kept], qoffs[kept], self.log,
            dequeue_ms=self.dequeue_ms, magic=magic[kept],
        )  # fmt: skip
        self.enqueue_offset = offset + n
        commit(self.wheel, self.log, self.checkpoint, self.enqueue_offset)
        added = int(kept.sum())
        self.waiting += added
        return added

    def _properties(
        self, phys: np.ndarray, sizes: np.ndarray, qoffs: np.ndarray
    ) -> Iterator[tuple[int, bytes]]:
        """``(index, properties)`` of the timer-topic records at ``phys`` / ``sizes`` /
        ``qoffs`` (in queue order), leaving out those whose record is gone."""
        for mf, rows, ok in self.reader.records(TIMER_TOPIC, 0, phys, sizes, qoffs):
            at = np.searchsorted(qoffs, rows["queue_offset"][ok]).tolist()
            for i, row in zip(at, rows[ok], strict=True):
                s = int(row["props_start"])
                yield i, mf.buf[s : s + int(row["props_len"])].tobytes()

    # -- dequeue ------------------------------------------------------------------------------

    def _entries(self, slot_ms: int) -> tuple[np.ndarray, np.ndarray]:
        """The slot's entries and the mask of those it drops (``_dropped``)."""
        count = self.wheel.slot(slot_ms).num
        cached = self._cache
        if cached is None or cached[0] != slot_ms or cached[1] != count:
            entries = self.wheel.entries(slot_ms, self.log)
            self._cache = cached = (slot_ms, count, entries, self._dropped(entries))
        return cached[2], cached[3]

    def _dropped(self, entries: np.ndarray) -> np.ndarray:
        """Mask of a slot's entries that are not delivered: its delete markers, and the
        messages whose delete key one of them names. The keys are read from the records
        only for a slot with a marker, and once per entry (``_keys``, until the slot is
        passed)."""
        markers = (entries["magic"] & MAGIC_DELETE) != 0
        if not markers.any():
            return markers
        keys = self._keys
        positions = entries["pos"].tolist()
        unknown = np.flatnonzero([p not in keys for p in positions])
        if unknown.size:
            new = entries[unknown]
            new = new[np.argsort(new["queue_offset"], kind="stable")]  # one queue: like phys
            ids, marks = new["pos"].tolist(), (new["magic"] & MAGIC_DELETE).tolist()
            keys.update(dict.fromkeys(ids))  # a record gone: no key
            for i, props in self._properties(new["phys"].astype(np.int64),
                                             new["size"].astype(np.int64),
                                             new["queue_offset"].astype(np.int64)):  # fmt: skip
                keys[ids[i]] = _delete_key(props, bool(marks[i]))
        named = {keys[p] for p, m in zip(positions, markers.tolist(), strict=True) if m}
        named.discard(None)
        recalled = np.fromiter((keys[p] in named for p in positions), bool, len(positions))
        return markers | recalled

    def _due_entries(self, now: int, limit: int) -> tuple[np.ndarray, list, int]:
        """Undelivered entries whose time has come, oldest time first (at most ``limit``),
        the ids of those due that are dropped instead (``_dropped``), and the next due time
        (-1: the next slot's start)."""
        picked, dropped = [], []
        count = 0
        next_due = -1
        slot_ms = self.dequeue_ms
        while slot_ms <= now and count < limit:
            entries, drop = self._entries(slot_ms)
            if entries.size:
                fresh = ~np.isin(entries["pos"], np.fromiter(self.done, np.int64))
                due = fresh & (entries["deliver_ms"] <= now)
                later = entries["deliver_ms"][fresh & ~due]
                if later.size:
                    first = int(later.min())
                    next_due = first if next_due < 0 else min(next_due, first)
                dropped += entries["pos"][due & drop].tolist()
                deliver = due & ~drop
                picked.append(entries[deliver][: limit - count])
                count += int(deliver.sum())
            slot_ms += self.precision
        if not picked:
            return np.empty(0, dtype=ENTRY_DTYPE), dropped, next_due
        found = np.concatenate(picked)
        return found[np.argsort(found["deliver_ms"], kind="stable")], dropped, next_due

    def _runs(self, entries: np.ndarray) -> tuple[list[tuple], list]:
        """The entries' records per CommitLog file, ``[(buffer, rows, picks, ids)]`` with
        ids their timer log positions, and the ids of entries whose record is gone."""
        by_phys = entries[np.argsort(entries["phys"], kind="stable")]
        qoffs = by_phys["queue_offset"].astype(np.int64)  # one queue: sorted like phys
        runs, found = [], []
        for mf, rows, ok in self.reader.records(
            TIMER_TOPIC, 0, by_phys["phys"].astype(np.int64),
            by_phys["size"].astype(np.int64), qoffs,
        ):  # fmt: skip
            if ok.size:
                at = np.searchsorted(qoffs, rows["queue_offset"][ok])
                ids = by_phys["pos"][at].tolist()
                found += ids
                runs.append((mf.buf, rows, ok, ids))
        missing = set(by_phys["pos"].tolist()).difference(found)
        return runs, list(missing)

    def due(self, now: int) -> tuple[list[tuple], list, int]:
        """``(runs to deliver, ids not delivered: no record, or dropped by a recall, next
        due ms)`` (runs as ``_runs``)."""
        if self.wheel is None:
            return [], [], -1
        self.advance(now)
        entries, dropped, next_due = self._due_entries(now, DELIVER_BATCH)
        if next_due < 0:  # nothing more in the slots up to now: the next slot's start
            next_due = self._slot_start(now) + self.precision
        if not entries.size:
            return [], dropped, next_due
        if self.slot_scan_from < 0:
            self.slot_scan_from = self.write_offset()
        runs, missing = self._runs(entries)
        return runs, missing + dropped, now if entries.size >= DELIVER_BATCH else next_due

    def pending(self, now: int) -> Iterator[tuple]:
        """Every due, undelivered entry (recovery looks for their deliveries)."""
        if self.wheel is None:
            return
        entries, _, _ = self._due_entries(now, 1 << 62)
        if entries.size:
            yield from self._runs(entries)[0]

    def settle(self, ids: list) -> int:
        """Count ``ids`` delivered; move ``dequeue_ms`` over the slots wholly delivered."""
        before = len(self.done)
        self.done.update(ids)
        self.waiting -= len(self.done) - before
        self.advance(time.time_ns() // 1_000_000)
        return 0

    def advance(self, now: int) -> None:
        while self.dequeue_ms + self.precision <= now:
            entries, _ = self._entries(self.dequeue_ms)
            positions = entries["pos"].tolist() if entries.size else []
            if not self.done.issuperset(positions):
                return
            self.done.difference_update(positions)
            for pos in positions:
                self._keys.pop(pos, None)
            self.dequeue_ms += self.precision
            self.slot_scan_from = -1
            self._cache = None

    def distribution(self, now: int, bounds_ms: np.ndarray) -> np.ndarray:
        """The ``waiting`` entries by when they are due: element i counts those due before
        ``now + bounds_ms[i]`` and not before the previous bound (element 0: from
        ``dequeue_ms`` on, so the overdue too); those due later are in none. Read from the
        wheel's slot counts (one vectorised pass over the slots up to the last bound, not
        per entry), less what of the current slots was delivered."""
        none = np.zeros(bounds_ms.shape[0], dtype=np.int64)
        if self.wheel is None or not self.waiting:
            return none
        slots, count = self.wheel.slots, self.wheel.slot_count
        first = self.dequeue_ms // self.precision
        edges = np.clip((now + bounds_ms) // self.precision - first, 0, count)
        n = int(edges[-1])
        if not n:
            return none
        start = first % count
        window = slots[start : start + n]
        if window.shape[0] < n:  # the range wraps round the wheel's end
            window = np.concatenate((window, slots[: n - window.shape[0]]))
        live = window["time"] == np.arange(first, first + n)
        totals = np.cumsum(np.where(live, window["num"], 0), dtype=np.int64)
        at_edges = np.where(edges > 0, totals[np.maximum(edges - 1, 0)], 0)
        counts = np.diff(at_edges, prepend=0)
        counts[0] = max(int(counts[0]) - len(self.done), 0)
        return counts

    def snapshot(self) -> tuple[int, int] | None:
        if self.wheel is None:
            return None
        scan_from = self.slot_scan_from if self.slot_scan_from >= 0 else self.write_offset()
        return self.dequeue_ms, scan_from

    def persist(self, state: tuple[int, int] | None, scan_from: int) -> None:
        if state is None:
            return
        self.checkpoint.dequeue_ms, timer_scan_from = state
        self.checkpoint.scan_from = min(scan_from, timer_scan_from)
        self.checkpoint.persist()

    def close(self) -> None:
        if self.wheel is not None:
            self.wheel.close()
            self.log.close()


def _delete_key(props: bytes, marker: bool) -> str | None:
    """The key a marker names (its ``TIMER_DEL_UNIQKEY``), or the one a message is known
    by (RocketMQ's ``buildDeleteKey`` of its real topic and unique key); None without one."""
    if marker:
        return property_value(props, _DEL_UNIQKEY)
    topic, uniq = property_value(props, _REAL_TOPIC), property_value(props, _UNIQ_KEY)
    return None if topic is None or uniq is None else delete_key(topic, uniq)
