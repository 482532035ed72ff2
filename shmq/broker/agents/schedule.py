"""The schedule agent: delivers delayed messages when their time has come.

Two kinds of delayed message, each a part of this agent: delay levels
(``schedule_levels``, RocketMQ 4.9's ``ScheduleMessageService``) and timer messages with
any delivery time (``schedule_timers``, RocketMQ 5's timing wheel). A due message's record
is rebuilt under its ``REAL_TOPIC`` / ``REAL_QID`` and sent through the agent's own ring to
the writer, like any producer's. The agent sleeps until the next message is due, or until
reput posts it because a delayed message arrived.

Exactly once, across a SIGKILL of this agent or of the whole broker: each part's progress
is written only at a quiet moment (every delivery answered), together with the CommitLog
write offset of that moment (``scan_from``), and only once the flush agent has flushed past
it. Deliveries made after it are found again at start: the agent waits until its ring is
drained, then scans the CommitLog from ``scan_from`` for records equal to a due,
undelivered message's delivery (born time, body CRC, queue, topic and properties) and
counts those messages as delivered.
"""

from __future__ import annotations

import functools
import logging
import os
import tempfile
import time
from collections import defaultdict

import numpy as np

from shmq.broker.agents.env import AgentEnv
from shmq.broker.schedule.delay_levels import FILE_NAME, DelayLevels
from shmq.broker.schedule.timers import Timers
from shmq.codec import record as rec
from shmq.codec.record_rebuild import (
    HALF_MESSAGE,
    PROBLEMS,
    rebuild_deliveries,
    stamp_positions,
)
from shmq.errors import SendTimeoutError, ShmqError
from shmq.ipc import counters as cn
from shmq.ipc import queue_table as qt
from shmq.ipc import registry as rg
from shmq.ipc import ring
from shmq.ipc.ring_appender import RingAppender
from shmq.ipc.segment import Segment, fence, open_semaphore, wait
from shmq.names import MAX_TOPIC_LENGTH
from shmq.store.commitlog import CommitLog
from shmq.store.reader import StoreReader
from shmq.store.timer.log import TimerLog
from shmq.store.timer.wheel import TimerWheel

log = logging.getLogger(__name__)

MAX_PARK_S = 1.0  # a park ends at reput's post or the next due time; this bounds both
PERSIST_INTERVAL_S = 0.2
PERSIST_RETRY_S = 10.0  # after a failed persist (a full disk)
RESCAN_BYTES = 64 << 20  # a new scan_from while idle once the CommitLog grew this much
ANSWER_TIMEOUT_S = 30.0
RETRY_AFTER_S = 1.0  # the writer refused for now (disk full): try the same messages again
DRAIN_TIMEOUT_S = 30.0
SNAPSHOT_INTERVAL_S = 0.5  # the timer snapshot's wheel pass, at most this often
_BOUNDS_MS = np.array(cn.TIMER_BOUNDS_S, dtype=np.int64) * 1000


def ring_info(names, words: np.ndarray, kind: str) -> dict:
    """The registration info of the producer slot the supervisor gave agent ``kind``."""
    slot = cn.load(words, cn.agent_word(kind, cn.RING_SLOT))
    gen = cn.load(words, cn.agent_word(kind, cn.RING_GEN))
    return {
        "ring": rg.ring_name(names.prefix, slot, gen),
        "sem": rg.producer_sem_name(names.prefix, slot, gen),
        "writerSem": names.agent_sem("writer"),
        "slot": slot,
    }


@functools.cache  # once a process: an agent forked from the agent template has run it
def warm_up() -> None:
    """Run the delivery kernels once on scratch data, so they are compiled (or loaded from
    numba's cache) before the first message is due rather than when it is."""
    record = np.zeros(256, dtype=np.uint8)
    rows = np.zeros(1, dtype=rec.RECORD_ROW)
    ends = np.zeros(2, dtype=np.int64)
    picks = np.zeros(1, dtype=np.int64)
    rebuild_deliveries(record, rows, picks, np.zeros(0, np.uint8), record, ends, picks)
    stamp_positions(record, 0, ends, 0, 0, 0)
    with tempfile.TemporaryDirectory(prefix="shmq-warm-up-") as tmp:
        timer_log = TimerLog(os.path.join(tmp, "log"), 64 * 1024)
        wheel = TimerWheel(os.path.join(tmp, "wheel"), 4, 1000)
        try:
            one = np.ones(1, dtype=np.int64)
            wheel.enqueue_batch(one * 1000, one, one, one, timer_log, dequeue_ms=1000, write_ms=0)
            wheel.entries(1000, timer_log)
        finally:
            wheel.close()
            timer_log.close()


class Schedule:
    def __init__(self, env: AgentEnv) -> None:
        warm_up()
        self.env = env
        store = env.config.store
        self.root = store.store_path_root_dir
        self.words = env.words
        self.reader = StoreReader(
            self.root, store.mapped_file_size_commit_log, store.consume_queue_file_size
        )
        self.queues_seg = Segment.attach(env.names.queues)
        directory = qt.QueueDirectory(self.queues_seg.buf, self.queues_seg.words)
        maxima = qt.max_offsets(self.queues_seg.buf)
        self.registry = Segment.attach(env.names.registry)
        self.ring = RingAppender(
            ring_info(env.names, self.words, "schedule"), env.counters, self.registry
        )
        self.levels = DelayLevels(
            os.path.join(self.root, "config", FILE_NAME),
            store.delay_levels_ms,
            self.reader,
            directory,
            maxima,
        )
        self.timers = Timers(
            self.root, store, self.reader, directory, maxima, self._write_offset, _now_ms()
        )
        self.parts = (self.levels, self.timers)
        self.next_due_ms = 0
        self._retry_at = 0.0
        self._persisted_from = 0
        self._pending: tuple[list, int] | None = None
        self._last_persist = 0.0
        self._snapshot_at = 0.0
        self.delivered = 0
        self._recover()
        self.idle = ScheduleIdle(self)

    def _write_offset(self) -> int:
        return cn.load(self.words, cn.WRITE_OFFSET)

    # -- start: find what was delivered since the last persisted state ------------------

    def _recover(self) -> None:
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while self.ring.w[ring.SEQ_HEAD] < self.ring.w[ring.SEQ_TAIL]:
            if self.ring.stopped() or time.monotonic() > deadline:
                raise ShmqError("the schedule agent's ring did not drain: cannot recover")
            time.sleep(0.001)
        scan_from = min(part.load() for part in self.parts)
        self.timers.enqueue(_now_ms())
        end = self._write_offset()
        pending: dict[tuple, list] = defaultdict(list)
        now = _now_ms()
        for part in self.parts:
            for buf, rows, picks, ids in part.pending(now):
                out, ends, good = self._rebuild(buf, rows, picks, part.remove)
                for k in good.tolist():
                    record = out[ends[k] : ends[k + 1]]
                    pending[_identity(record, rows[picks[k]])].append((part, ids[k]))
        if pending and scan_from < end:
            found = self._find_deliveries(pending, scan_from, end)
            if found:
                log.info("recovered %d deliveries made after the last persisted state", found)
        self._persisted_from = scan_from
        self._take_snapshot()

    def _find_deliveries(self, pending: dict, start: int, end: int) -> int:
        born = np.fromiter((k[0] for k in pending), dtype=np.int64)
        commitlog = CommitLog(
            os.path.join(self.root, "commitlog"),
            self.env.config.store.mapped_file_size_commit_log,
            readonly=True,
        )
        settled: dict[object, list] = defaultdict(list)
        try:
            start = max(start, commitlog.min_offset)
            for batch in commitlog.scan(start, end):
                rows, buf = batch.rows, batch.buf
                for i in np.flatnonzero(np.isin(rows["born_ts"], born)).tolist():
                    pos = int(rows["pos"][i])
                    record = buf[pos : pos + int(rows["size"][i])]
                    waiting = pending.get(_identity(record, rows[i]))
                    if waiting:
                        part, entry_id = waiting.pop(0)
                        settled[part].append(entry_id)
        finally:
            commitlog.close()
        for part, ids in settled.items():
            part.settle(ids)
        return sum(map(len, settled.values()))

    # -- delivering -------------------------------------------------------------------------

    def _rebuild(
        self, buf: np.ndarray, rows: np.ndarray, picks: np.ndarray, remove: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The deliveries of records ``rows[picks]`` (``rebuild_deliveries``): ``(bytes,
        ends, indices of the records delivered)``; the others are logged."""
        n = picks.shape[0]
        sizes = rows["size"][picks]
        out = np.empty(int(sizes.sum()) + n * MAX_TOPIC_LENGTH, dtype=np.uint8)
        ends = np.zeros(n + 1, dtype=np.int64)
        problems = np.zeros(n, dtype=np.int64)
        rebuild_deliveries(buf, rows, picks, remove, out, ends, problems)
        for k in np.flatnonzero(problems).tolist():
            problem = int(problems[k])
            if problem != HALF_MESSAGE:
                log.error("delayed record at CommitLog offset %d is not delivered: %s",
                          int(rows["phys_offset"][picks[k]]), PROBLEMS[problem])  # fmt: skip
        return out, ends, np.flatnonzero(problems == 0)

    def has_work(self) -> bool:
        return time.time() * 1000 >= self.next_due_ms and time.monotonic() >= self._retry_at

    def do_work(self) -> int:
        if time.monotonic() < self._retry_at:
            return 0
        now = _now_ms()
        work = self.timers.enqueue(now)
        next_due = now + int(MAX_PARK_S * 1000)
        timers_next = -1
        for part in self.parts:
            runs, missing, part_next = part.due(now)
            if part_next >= 0:
                next_due = min(next_due, part_next)
            done = list(missing)
            for run in runs:
                done += self._send(*run, part.remove)
            if done:
                part.settle(done)
                work += len(done)
            if part is self.timers:
                timers_next = part_next
        self.next_due_ms = next_due
        self._publish_timers(now, timers_next)
        if work:
            self._take_snapshot()
        self._persist_if_flushed()
        return work

    def _send(
        self, buf: np.ndarray, rows: np.ndarray, picks: np.ndarray, ids: list, remove: np.ndarray
    ) -> list:
        """Deliver the records ``rows[picks]`` (ids ``ids``); returns the ids delivered or
        given up (not to be delivered, or refused by the writer for good); those the
        writer refused for now are left out."""
        out, ends, good = self._rebuild(buf, rows, picks, remove)
        given_up = set(range(len(ids))).difference(good.tolist())
        done = [ids[k] for k in sorted(given_up)]
        if not good.size:
            return done
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        first = self.ring.append_many(out, np.append(ends[good], ends[good[-1] + 1]), deadline)
        try:
            self.ring.wait_answer(first + good.size - 1, deadline)
        except SendTimeoutError:
            raise ShmqError("the writer did not answer the schedule agent") from None
        words = self.ring.answered_words(first, good.size)
        status, reason = words & 0xFFFF, (words >> 16) & 0xFFFF
        later = (status == ring.REJECTED) & (reason == ring.REASON_SERVICE_NOT_AVAILABLE)
        if later.any():
            self._retry_at = time.monotonic() + RETRY_AFTER_S  # stored nothing: again later
        refused = (status == ring.REJECTED) & ~later
        for k in np.flatnonzero(refused).tolist():
            log.error("delivery of %s refused: %s", ids[int(good[k])],
                      ring.REASONS.get(int(reason[k]), int(reason[k])))  # fmt: skip
        self.delivered += int(good.size)
        return done + [ids[k] for k in good[~later].tolist()]

    def _publish_timers(self, now: int, next_due: int) -> None:
        """Publish the wheel's live state for the metrics endpoint (the counters' timer
        lines): ``timercheck`` holds the dequeue position only as of the last quiet, flushed
        moment after a pass that worked, so read from it an idle broker would look behind.
        ``next_due`` is the timers' next due time after this pass at ``now`` (``now``: due
        entries were left for the next pass). The snapshot's pass over the wheel's slots
        runs at most every ``SNAPSHOT_INTERVAL_S``, and at once when the wheel empties."""
        timers = self.timers
        if timers.wheel is None:
            return
        behind = next_due <= now or time.monotonic() < self._retry_at
        cn.publish(self.words, cn.TIMER_DELIVERED_MS, timers.dequeue_ms if behind else next_due)
        cn.publish(self.words, cn.TIMER_WAITING, timers.waiting)
        if timers.waiting:
            clock = time.monotonic()
            if clock - self._snapshot_at < SNAPSHOT_INTERVAL_S:
                return
            self._snapshot_at = clock
        counts = timers.distribution(now, _BOUNDS_MS).tolist()
        for k, count in enumerate(counts):
            cn.publish(self.words, cn.TIMER_SNAPSHOT + k, count)

    # -- persisting -------------------------------------------------------------------------

    def _take_snapshot(self) -> None:
        """Note the state now (nothing in flight) with the write offset it holds for."""
        self._pending = ([part.snapshot() for part in self.parts], self._write_offset())

    def _persist_if_flushed(self, force: bool = False) -> None:
        now = time.monotonic()
        if self._pending is None:
            if self._write_offset() - self._persisted_from > RESCAN_BYTES:
                self._take_snapshot()
            return
        states, scan_from = self._pending
        if not force and now - self._last_persist < PERSIST_INTERVAL_S:
            return
        if cn.load(self.words, cn.FLUSHED_OFFSET) < scan_from:
            return  # a power loss could take deliveries back: keep the older state
        try:
            for part, state in zip(self.parts, states, strict=True):
                part.persist(state, scan_from)
        except OSError as exc:  # a full disk: the older state and the scan cover it
            log.error("cannot persist the schedule state (again in %.0f s): %s",
                      PERSIST_RETRY_S, exc)  # fmt: skip
            self._last_persist = now + PERSIST_RETRY_S  # not every pass
            return
        self._persisted_from = scan_from
        self._pending = None
        self._last_persist = now

    def park_timeout(self) -> float:
        """Until the next message is due (at most ``MAX_PARK_S``); sooner while a state
        waits to be persisted."""
        left = (self.next_due_ms - time.time() * 1000) / 1000
        if self._pending is not None:
            left = min(left, PERSIST_INTERVAL_S)
        if self._retry_at:
            left = min(left, self._retry_at - time.monotonic())
        return min(max(left, 0.0), MAX_PARK_S)

    def drain(self) -> None:
        self._take_snapshot()
        self._persist_if_flushed(force=True)

    def close(self) -> None:
        self.idle.sem.close()
        self.timers.close()
        self.ring.close()
        self.reader.close()
        self.queues_seg.close()
        self.registry.close()


class ScheduleIdle:
    """Park on the agent's semaphore until the next due time (reput posts it when a
    delayed message arrives, the supervisor when the agent should stop)."""

    def __init__(self, agent: Schedule) -> None:
        self.agent = agent
        env = agent.env
        self.words = env.words
        self.parked = cn.agent_word("schedule", cn.AGENT_PARKED)
        self.sem = open_semaphore(env.names.agent_sem("schedule"))

    def idle(self, work: int, has_work) -> None:
        if work:
            return
        cn.publish(self.words, self.parked, 1)
        fence()
        try:
            if not has_work():
                wait(self.sem, self.agent.park_timeout())
        finally:
            cn.publish(self.words, self.parked, 0)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _identity(record: np.ndarray, row: np.void) -> tuple:
    """What a delivery and its delayed record's rebuilt copy share: born time and body CRC
    (``row``, either's), queue id, and every byte from the topic on (``record``: the
    delivery's bytes, or the rebuilt copy's)."""
    tail = int(row["body_start"]) - int(row["pos"]) + int(row["body_len"])
    queue_id = int.from_bytes(record[12:16].tobytes(), "big", signed=True)
    return int(row["born_ts"]), int(row["body_crc"]), queue_id, record[tail:].tobytes()
