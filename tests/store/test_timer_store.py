"""Timer store: TimerLog units and files, TimerWheel slots and chains, the checkpoint, and
recovery after crashes that leave the wheel ahead of, or behind, the log."""

from __future__ import annotations

import os
import struct
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shmq.errors import CorruptStoreError
from shmq.store.timer.log import UNIT_SIZE, TimerLog
from shmq.store.timer.wheel import (
    SLOT_SIZE,
    TimerCheckpoint,
    TimerWheel,
    commit,
    paths,
    recover,
    slots_total_for,
)

BASE = 1_700_000_000_000  # a realistic epoch ms, a multiple of the precision
PRECISION = 1000
SLOTS_TOTAL = 8  # a 16-slot wheel: a lap is 16 s, so tests go round it quickly
LAP = 2 * SLOTS_TOTAL * PRECISION
UNITS_PER_FILE = 7
LOG_FILE_SIZE = 16 + UNITS_PER_FILE * UNIT_SIZE + 3  # a 19-byte blank closes a full file


class Timer:
    """A timer store on a directory, plus the caller's side: the timer topic's consume
    queue (``queue``: deliver ms per queue offset, survives crashes), the enqueue and
    dequeue positions, and the queue offsets delivered so far (at least once)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.wheel_path, self.log_dir, self.checkpoint_path = paths(root)
        self.queue: list[int] = []
        self.enqueued = 0
        self.dequeue_ms = BASE
        self.delivered: set[int] = set()
        self.open()

    def open(self) -> None:
        self.log = TimerLog(self.log_dir, LOG_FILE_SIZE)
        self.log.load()
        self.wheel = TimerWheel(self.wheel_path, SLOTS_TOTAL, PRECISION)
        self.checkpoint = TimerCheckpoint.load(self.checkpoint_path)

    def close(self) -> None:
        """Unmap without flushing: what was written stays in the page cache, as after a
        crash of the process."""
        self.wheel.close()
        self.log.close()

    def reopen(self) -> int:
        self.close()
        self.open()
        self.enqueued = recover(self.wheel, self.log, self.checkpoint)
        return self.enqueued

    def add(self, offsets: list[int]) -> None:
        """New timer messages in the queue, ``offsets`` ms after the dequeue position."""
        self.queue.extend(self.dequeue_ms + o for o in offsets)

    def enqueue(self) -> int:
        """What the schedule agent does: enqueue the queue from ``enqueued``; a message
        already due is delivered at once (RocketMQ's rule) instead."""
        deliver = np.array(self.queue[self.enqueued :], dtype=np.int64)
        offsets = np.arange(self.enqueued, len(self.queue), dtype=np.int64)
        due = deliver // PRECISION >= self.dequeue_ms // PRECISION
        self.wheel.enqueue_batch(
            deliver[due], offsets[due] * 100, offsets[due] % 7 + 50, offsets[due],
            self.log, dequeue_ms=self.dequeue_ms, write_ms=self.dequeue_ms,
        )  # fmt: skip
        self.delivered.update(offsets[~due].tolist())
        self.enqueued = len(self.queue)
        return int(due.sum())

    def commit(self) -> None:
        commit(self.wheel, self.log, self.checkpoint, self.enqueued)

    def deliver(self, slots: int) -> None:
        for _ in range(slots):
            entries = self.wheel.entries(self.dequeue_ms, self.log)
            assert (entries["deliver_ms"] // PRECISION == self.dequeue_ms // PRECISION).all()
            self.delivered.update(entries["queue_offset"].tolist())
            self.dequeue_ms += PRECISION
        self.checkpoint.dequeue_ms = self.dequeue_ms
        self.checkpoint.persist()

    def wheel_contents(self) -> dict[int, list[int]]:
        """Queue offsets per slot time from the dequeue position on, as the wheel lists them."""
        out = {}
        for t in range(self.dequeue_ms, self.dequeue_ms + LAP, PRECISION):
            entries = self.wheel.entries(t, self.log)
            if entries.size:
                assert (entries["phys"] == entries["queue_offset"] * 100).all()
                assert (entries["size"] == entries["queue_offset"] % 7 + 50).all()
                assert (entries["deliver_ms"] // PRECISION == t // PRECISION).all()
                out[t] = entries["queue_offset"].tolist()
        return out

    def expected(self) -> dict[int, list[int]]:
        """Every queued message not yet due, in its slot, in queue order."""
        out: dict[int, list[int]] = {}
        for q, deliver in enumerate(self.queue):
            t = deliver - deliver % PRECISION
            if t >= self.dequeue_ms - self.dequeue_ms % PRECISION:
                out.setdefault(t, []).append(q)
        return out

    def snapshot(self) -> dict[str, bytes]:
        """The bytes of the wheel and log files (as a machine crash could find them)."""
        found = {self.wheel_path: Path(self.wheel_path).read_bytes()}
        for name in os.listdir(self.log_dir) if os.path.isdir(self.log_dir) else []:
            found[os.path.join(self.log_dir, name)] = Path(self.log_dir, name).read_bytes()
        return found


@pytest.fixture
def timer(tmp_path):
    t = Timer(str(tmp_path))
    recover(t.wheel, t.log, t.checkpoint)
    yield t
    t.close()


# -- formats -------------------------------------------------------------------------------


def test_unit_file_and_slot_layout(timer):
    timer.add([i * 300 for i in range(9)])  # 9 units: a full file, a blank, a second file
    timer.enqueue()
    names = sorted(os.listdir(timer.log_dir))
    assert names == [f"{0:020d}", f"{LOG_FILE_SIZE:020d}"]
    raw = Path(timer.log_dir, names[0]).read_bytes()
    assert len(raw) == LOG_FILE_SIZE
    unit = struct.unpack_from(">iqiqiqiiq", raw, 3 * UNIT_SIZE)
    # size, prev (unit 2 shares slot 0 with units 0..3), magic, write ms, delay ms,
    # commitlog offset, record size, topic hash, queue offset
    assert unit == (52, 2 * UNIT_SIZE, 1, BASE, 900, 300, 53, 0, 3)
    blank = struct.unpack_from(">iqI", raw, UNITS_PER_FILE * UNIT_SIZE)
    assert blank == (LOG_FILE_SIZE - UNITS_PER_FILE * UNIT_SIZE, 0, 0xCBD43194)
    timer.wheel.flush()
    wheel = Path(timer.wheel_path).read_bytes()
    assert len(wheel) == 2 * SLOTS_TOTAL * SLOT_SIZE
    index = BASE // PRECISION % (2 * SLOTS_TOTAL)
    slot = struct.unpack_from(">qqqii", wheel, index * SLOT_SIZE)
    assert slot == (BASE // PRECISION, 0, 3 * UNIT_SIZE, 4, 0)
    unused = struct.unpack_from(">qqqii", wheel, (index + 5) % 16 * SLOT_SIZE)
    assert unused == (-1, -1, -1, 0, 0)


def test_wheel_size_follows_max_delay(tmp_path):
    assert slots_total_for(3 * 24 * 3600, 1000) == 259_200  # the wheel file: 518,400 slots
    assert slots_total_for(10, 300) == 34
    TimerWheel(str(tmp_path / "w"), 4, 1000).close()
    with pytest.raises(CorruptStoreError, match="must be 512 bytes"):
        TimerWheel(str(tmp_path / "w"), 8, 1000)


def test_checkpoint_round_trip_and_layout(tmp_path):
    path = str(tmp_path / "config" / "timercheck")
    assert TimerCheckpoint.load(path) == TimerCheckpoint(path)
    cp = TimerCheckpoint(path, dequeue_ms=BASE, log_end=5200, enqueue_offset=77, scan_from=9)
    cp.persist()
    assert TimerCheckpoint.load(path) == cp
    raw = Path(path).read_bytes()
    assert len(raw) == 4096 and os.listdir(tmp_path / "config") == ["timercheck"]
    assert struct.unpack_from(">8q", raw) == (BASE, 5200, 77, 77, 0, 0, 0, 9)


def test_log_append_read_and_positions(tmp_path):
    log = TimerLog(str(tmp_path / "log"), LOG_FILE_SIZE)
    log.load()
    n = 20
    expected = log.next_positions(n)
    pos = log.append_batch(
        BASE + np.arange(n) * 10, np.arange(n) * 8, np.full(n, 60), np.full(n, -1),
        np.arange(n), write_ms=BASE - 5,
    )  # fmt: skip
    assert (pos == expected).all()
    assert pos[7] == LOG_FILE_SIZE and pos[14] == 2 * LOG_FILE_SIZE  # 7 units per file
    got = log.read_many(pos[::-1])[::-1]
    assert (got["pos"] == pos).all() and (got["deliver_ms"] == BASE + np.arange(n) * 10).all()
    assert (got["write_ms"] == BASE - 5).all() and (got["queue_offset"] == np.arange(n)).all()
    assert int(log.read(int(pos[9]))["phys"]) == 72
    for bad in (int(pos[3]) + 4, int(pos[-1]) + UNIT_SIZE, UNITS_PER_FILE * UNIT_SIZE):
        with pytest.raises(CorruptStoreError, match="not a complete unit"):
            log.read(bad)
    with pytest.raises(ValueError, match="int32 DELAY MS"):
        log.append_batch(np.array([BASE]), [0], [1], [-1], [0], write_ms=BASE - (1 << 31) - 1)
    assert log.max_offset == int(pos[-1]) + UNIT_SIZE
    log.close()


# -- the wheel -----------------------------------------------------------------------------


batches = st.lists(st.lists(st.integers(0, LAP - 1), max_size=40), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=batches)
def test_entries_per_slot_are_the_enqueued_ones_in_order(batches):
    with tempfile.TemporaryDirectory() as tmp:
        t = Timer(tmp)
        for batch in batches:
            t.add(batch)
            t.enqueue()
        assert t.wheel_contents() == t.expected()
        for time_ms, offsets in t.expected().items():
            slot = t.wheel.slot(time_ms + 999)
            assert slot.time_ms == time_ms and slot.num == len(offsets)
        t.close()
        t.open()  # unmapped without a flush and mapped again: the same
        assert t.wheel_contents() == t.expected()
        t.close()


def test_slots_are_reused_across_laps(timer):
    timer.add([0, 0, 2500])
    timer.enqueue()
    first = timer.wheel.slot(BASE)
    timer.deliver(3)  # slots 0..2 delivered: slot 0's index is free for the next lap
    timer.add([LAP - 3 * PRECISION, 0, LAP - 3 * PRECISION + 10])  # BASE + LAP and slot 3
    timer.enqueue()
    assert timer.wheel.slot(BASE) == (-1, -1, -1, 0)  # the old lap is no longer listed
    again = timer.wheel.slot(BASE + LAP)
    assert timer.wheel.slot_index(BASE + LAP) == timer.wheel.slot_index(BASE)
    assert again.num == 2 and again.first_pos > first.last_pos
    assert timer.wheel.entries(BASE + LAP, timer.log)["queue_offset"].tolist() == [3, 5]
    assert int(timer.log.read(again.first_pos)["prev"]) == -1  # a fresh chain
    assert timer.wheel_contents() == timer.expected()


def test_enqueue_window_is_enforced(timer):
    before = timer.log.max_offset
    for deliver in (BASE - 1, BASE + LAP):
        with pytest.raises(ValueError, match="outside the wheel's window"):
            timer.wheel.enqueue_batch(
                np.array([BASE + 5, deliver]), [0, 0], [1, 1], [0, 1], timer.log, dequeue_ms=BASE
            )
    assert timer.log.max_offset == before and timer.wheel.entries(BASE, timer.log).size == 0


def test_a_batch_of_100k_entries_takes_the_vectorised_path(tmp_path):
    log = TimerLog(str(tmp_path / "log"), 8 * 1024 * 1024)
    log.load()
    slots = slots_total_for(3 * 24 * 3600, 1000)
    wheel = TimerWheel(str(tmp_path / "wheel"), slots, 1000)
    n = 100_000
    deliver = BASE + np.random.default_rng(7).integers(0, slots * 1000, n)
    pos = wheel.enqueue_batch(deliver, np.arange(n) * 64, np.full(n, 64), np.arange(n), log,
                              dequeue_ms=BASE, write_ms=BASE)  # fmt: skip
    assert pos.shape == (n,) and len(log.queue.files) == 1
    for i in (0, n // 2, n - 1):
        entries = wheel.entries(int(deliver[i]), log)
        same = np.flatnonzero(deliver // 1000 == deliver[i] // 1000)
        assert entries["queue_offset"].tolist() == same.tolist()
    wheel.close()
    log.close()


def test_a_broken_chain_is_reported(timer):
    timer.add([0, 10, 20])
    timer.enqueue()
    mf = timer.log.queue.files[0]
    mf.buf[UNIT_SIZE : UNIT_SIZE + 4] = 0  # the middle unit loses its SIZE
    with pytest.raises(CorruptStoreError, match="no valid SIZE and MAGIC"):
        timer.wheel.entries(BASE, timer.log)


# -- recovery ------------------------------------------------------------------------------


def test_log_recover_cuts_a_torn_tail(tmp_path):
    log = TimerLog(str(tmp_path / "log"), LOG_FILE_SIZE)
    log.load()
    n = 17
    pos = log.append_batch(BASE + np.arange(n), np.arange(n), np.full(n, 9), np.full(n, -1),
                           np.arange(n), write_ms=BASE)  # fmt: skip
    log.queue.files[1].buf[3 * UNIT_SIZE : 3 * UNIT_SIZE + 4] = 0  # unit 10 lost its SIZE
    log.close()
    log = TimerLog(str(tmp_path / "log"), LOG_FILE_SIZE)
    log.load()
    assert log.recover() == pos[10] and log.max_offset == pos[10]
    assert len(log.queue.files) == 2  # the third file is gone
    assert not log.queue.files[1].buf[3 * UNIT_SIZE :].any()  # the cut units are zeroed
    again = log.append_batch(np.array([BASE]), [5], [5], [-1], [99], write_ms=BASE)
    assert again[0] == pos[10] and int(log.read(int(pos[10]))["queue_offset"]) == 99
    log.close()
    log = TimerLog(str(tmp_path / "log"), LOG_FILE_SIZE)
    log.load()
    assert log.recover() == pos[10] + UNIT_SIZE  # a zero tail: nothing more to cut
    log.close()


def crash_after_commit(timer: Timer) -> tuple[dict, dict]:
    """Commit a first part, enqueue a second part touching old, new and reused slots; return
    the snapshot at the commit and the bytes now."""
    timer.add([0, 0, 1500, 4000, 4100, 9000])
    timer.enqueue()
    timer.deliver(1)
    timer.commit()
    committed = timer.snapshot()
    # slots 1 and 4 grow, slots 2, 3, 7 and 11 are new, slot 0's index goes to the next lap
    timer.add([500, 3000, 2000, 6000, LAP - PRECISION, 10000, 1200])
    timer.enqueue()
    return committed, timer.snapshot()


def restore(files: dict[str, bytes], which: dict[str, bytes]) -> None:
    """Put the bytes ``which`` on disk; files of ``files`` not in it become all zero."""
    for path, data in which.items():
        Path(path).write_bytes(data)
    for path in files:
        if path not in which:
            Path(path).write_bytes(bytes(len(files[path])))


def test_crash_of_the_process_rolls_back_to_the_commit(timer):
    crash_after_commit(timer)
    timer.log.queue.files[1].buf[:4] = 0  # an append cut short: a unit without its SIZE
    assert timer.reopen() == 6  # the second part is enqueued again
    assert timer.enqueue() == 7
    assert timer.wheel_contents() == timer.expected()


def test_wheel_ahead_of_the_log(timer):
    """Slots written back after the commit, their units not (lost from the log)."""
    committed, now = crash_after_commit(timer)
    timer.close()
    restore(now, {**{p: d for p, d in committed.items() if p != timer.wheel_path},
                  timer.wheel_path: now[timer.wheel_path]})  # fmt: skip
    timer.open()
    timer.enqueued = recover(timer.wheel, timer.log, timer.checkpoint)
    assert timer.enqueued == 6
    timer.enqueue()
    assert timer.wheel_contents() == timer.expected()


def test_wheel_behind_the_log(timer):
    """Units written back after the commit, their slots not."""
    committed, now = crash_after_commit(timer)
    timer.close()
    restore(now, {**now, timer.wheel_path: committed[timer.wheel_path]})
    timer.open()
    timer.enqueued = recover(timer.wheel, timer.log, timer.checkpoint)
    assert timer.enqueued == 6 and timer.log.max_offset == timer.checkpoint.log_end
    timer.enqueue()
    assert timer.wheel_contents() == timer.expected()


def test_half_updated_slots_are_rolled_back(timer):
    """A crash inside an enqueue: the slots got LAST POS (written first) and nothing else."""
    timer.add([0, 2000, 2100])
    timer.enqueue()
    timer.commit()
    before = timer.wheel.slots.copy()
    timer.add([2200, 5000, LAP - 1])  # slot 2 grows; slot 5 and the last index are new
    timer.enqueue()
    after = timer.wheel.slots.copy()
    timer.wheel.slots[:] = before
    timer.wheel.slots["last"] = after["last"]
    assert timer.reopen() == 3
    timer.enqueue()
    assert timer.wheel_contents() == timer.expected()


def test_log_shorter_than_the_checkpoint(timer):
    """The log lost units the checkpoint counts: the data wins, enqueueing resumes after the
    last unit left."""
    timer.add([i * 700 for i in range(12)])
    timer.enqueue()
    timer.commit()
    timer.close()
    first = os.path.join(timer.log_dir, f"{LOG_FILE_SIZE:020d}")
    data = bytearray(Path(first).read_bytes())
    data[2 * UNIT_SIZE :] = bytes(len(data) - 2 * UNIT_SIZE)  # keep units 7 and 8
    Path(first).write_bytes(data)
    timer.open()
    assert recover(timer.wheel, timer.log, timer.checkpoint) == 9
    assert timer.checkpoint.log_end == LOG_FILE_SIZE + 2 * UNIT_SIZE
    assert TimerCheckpoint.load(timer.checkpoint_path).enqueue_offset == 9
    timer.enqueued = 9
    timer.enqueue()
    assert timer.wheel_contents() == timer.expected()


def test_a_lost_wheel_is_rebuilt_from_the_log(timer):
    timer.add([0, 0, 1500, 4000, 4100, 9000])
    timer.enqueue()
    timer.deliver(2)
    timer.add([500, 3000, 2000, 6000, 14000 - 2000, 10000, 1200])
    timer.enqueue()
    timer.commit()
    timer.close()
    os.unlink(timer.wheel_path)
    timer.open()
    assert timer.wheel.created
    assert recover(timer.wheel, timer.log, timer.checkpoint) == 13
    assert timer.wheel_contents() == timer.expected()


# -- crashes at random points, with random write-back ---------------------------------------

operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(st.integers(0, LAP - 1), max_size=12)),
        st.tuples(st.just("commit"), st.none()),
        st.tuples(st.just("deliver"), st.integers(1, 6)),
        st.tuples(st.just("crash"), st.integers(0, 2**32 - 1)),
    ),
    max_size=25,
)


def machine_crash(timer: Timer, committed: dict[str, bytes], seed: int) -> None:
    """Each wheel slot and each 8 bytes of the log, written after the commit, reach the disk
    or not, independently (a process crash keeps all of them, a power cut maybe none)."""
    rng = np.random.default_rng(seed)
    keep = rng.choice([0.0, 1.0, 0.5])
    now = timer.snapshot()
    for path, data in now.items():
        old = committed.get(path, bytes(len(data)))
        grain = SLOT_SIZE if path == timer.wheel_path else 8
        mixed = bytearray(old)
        for at in range(0, len(data), grain):
            if rng.random() < keep:
                mixed[at : at + grain] = data[at : at + grain]
        Path(path).write_bytes(mixed)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations)
def test_no_entry_is_lost_or_listed_twice_after_any_crash(ops):
    with tempfile.TemporaryDirectory() as tmp:
        t = Timer(tmp)
        recover(t.wheel, t.log, t.checkpoint)
        committed = t.snapshot()
        for op, arg in ops:
            if op == "add":
                t.add(arg)
                t.enqueue()
            elif op == "commit":
                t.commit()
                committed = t.snapshot()
            elif op == "deliver":
                t.deliver(arg)
            else:
                t.close()
                machine_crash(t, committed, arg)
                t.open()
                t.enqueued = recover(t.wheel, t.log, t.checkpoint)
                committed = t.snapshot()
                t.enqueue()
            assert t.wheel_contents() == t.expected()
        t.deliver(LAP // PRECISION)
        assert t.delivered == set(range(len(t.queue)))
        t.close()
