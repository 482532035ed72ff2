"""The schedule agent: delivers delayed messages when their level's delay has passed.

RocketMQ's ``ScheduleMessageService``. A message sent with delay level ``n`` sits in
``SCHEDULE_TOPIC_XXXX`` queue ``n - 1``; reput wrote its delivery time into the unit's tag
slot. For each level, in queue order, the agent reads the units whose time has come, rebuilds
each record under its ``REAL_TOPIC`` / ``REAL_QID`` without ``DELAY`` (``REAL_*`` stay, as in
RocketMQ) and sends it through its own ring to the writer, like any producer. It sleeps until
the next unit is due, or until reput posts it because a schedule message arrived.

Exactly once, across a SIGKILL of this agent or of the whole broker: ``delayOffset.json``
(RocketMQ's ``offsetTable``, level → next queue offset) is written only at a quiet moment
(every delivery answered) together with the CommitLog write offset of that moment
(``shmqScanFrom``), and only once the flush agent has flushed past it. Deliveries made after
it are found again at start: the agent waits until its ring is drained, then scans the
CommitLog from ``shmqScanFrom`` for records equal to a pending unit's delivery (born time,
body CRC, queue, topic and properties) and counts those units as delivered.
"""

from __future__ import annotations

import logging
import os
import time
from collections import defaultdict

import numpy as np

from shmq.broker import json_file
from shmq.broker.agent import AgentEnv
from shmq.codec import record as rec
from shmq.codec.delay_levels import SCHEDULE_TOPIC
from shmq.codec.record_rebuild import edit_properties, property_value, rebuild_record
from shmq.errors import SendTimeoutError, ShmqError
from shmq.ipc import counters as cn
from shmq.ipc import queue_table as qt
from shmq.ipc import registry as rg
from shmq.ipc import ring
from shmq.ipc.ring_appender import RingAppender
from shmq.ipc.segment import Segment, fence, open_semaphore, wait
from shmq.names import MAX_TOPIC_LENGTH, name_problem
from shmq.store.commitlog import CommitLog
from shmq.store.reader import StoreReader

log = logging.getLogger(__name__)

FILE_NAME = "delayOffset.json"
BATCH = 4096  # units read per level and pass
MAX_PARK_S = 1.0  # a park ends at reput's post or the next due time; this bounds both
PERSIST_INTERVAL_S = 0.2
RESCAN_BYTES = 64 << 20  # advance shmqScanFrom while idle once the log grew this much
ANSWER_TIMEOUT_S = 30.0
RETRY_AFTER_S = 1.0  # the writer refused for now (disk full): try the same units again
DRAIN_TIMEOUT_S = 30.0
TRANS_HALF_TOPIC = b"RMQ_SYS_TRANS_HALF_TOPIC"
_REAL_TOPIC, _REAL_QID, _DELAY = b"REAL_TOPIC", b"REAL_QID", b"DELAY"
_SCHEDULE = SCHEDULE_TOPIC.encode()


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


class Schedule:
    def __init__(self, env: AgentEnv) -> None:
        self.env = env
        store = env.config.store
        self.root = store.store_path_root_dir
        self.path = os.path.join(self.root, "config", FILE_NAME)
        self.delays = store.delay_levels_ms
        self.levels = len(self.delays)
        self.words = env.words
        self.reader = StoreReader(
            self.root, store.mapped_file_size_commit_log, store.consume_queue_file_size
        )
        self.queues_seg = Segment.attach(env.names.queues)
        self.directory = qt.QueueDirectory(self.queues_seg.buf, self.queues_seg.words)
        self.maxima = qt.max_offsets(self.queues_seg.buf)
        self.registry = Segment.attach(env.names.registry)
        self.ring = RingAppender(
            ring_info(env.names, self.words, "schedule"), env.counters, self.registry
        )
        self.offsets = np.zeros(self.levels, dtype=np.int64)  # per queue id (level - 1)
        self.done: list[set[int]] = [set() for _ in range(self.levels)]  # beyond a gap
        self.next_due_ms = 0
        self._retry_at = 0.0
        self._persisted = (self.offsets.copy(), 0)
        self._pending: tuple[np.ndarray, list, int] | None = None
        self._last_persist = 0.0
        self.delivered = 0
        self._recover()
        self.idle = ScheduleIdle(self)

    # -- start: find what was delivered since the last persisted state ------------------

    def _recover(self) -> None:
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while self.ring.w[ring.SEQ_HEAD] < self.ring.w[ring.SEQ_TAIL]:
            if self.ring.stopped() or time.monotonic() > deadline:
                raise ShmqError("the schedule agent's ring did not drain: cannot recover")
            time.sleep(0.001)
        scan_from = self._load()
        end = cn.load(self.words, cn.WRITE_OFFSET)
        pending = self._pending_keys()
        if pending and scan_from < end:
            found = self._find_deliveries(pending, scan_from, end)
            if found:
                log.info("recovered %d deliveries made after the last persisted state", found)
        self._take_snapshot()

    def _load(self) -> int:
        data = json_file.load(self.path, lambda t: json_file.loads_fastjson(t, int_keys=True))
        if not isinstance(data, dict):
            return 0
        for level, offset in (data.get("offsetTable") or {}).items():
            if isinstance(level, int) and 1 <= level <= self.levels and isinstance(offset, int):
                self.offsets[level - 1] = max(offset, 0)
        for level, offsets in (data.get("shmqDelivered") or {}).items():
            if isinstance(level, int) and 1 <= level <= self.levels:
                self.done[level - 1] = {o for o in offsets if isinstance(o, int)}
        scan_from = data.get("shmqScanFrom", 0)
        return scan_from if isinstance(scan_from, int) and scan_from >= 0 else 0

    def _pending_keys(self) -> dict[tuple, list[tuple[int, int]]]:
        """Identity of each due, undelivered unit's delivery → ``[(queue id, offset)]``."""
        keys: dict[tuple, list[tuple[int, int]]] = defaultdict(list)
        now = _now_ms()
        for qid in range(self.levels):
            offset, end = int(self.offsets[qid]), self._max_offset(qid)
            while offset < end:
                units = self._units(qid, offset, end)
                if units is None:
                    break
                due = int(np.count_nonzero(units["tags_code"] <= now))
                for o, key in self._delivery_keys(qid, offset, units[:due]):
                    if o not in self.done[qid]:
                        keys[key].append((qid, o))
                if due < units.size:
                    break
                offset += units.size
        return keys

    def _delivery_keys(self, qid: int, offset: int, units: np.ndarray):
        for o, buf, row in self._records(qid, offset, units):
            built = self._rebuild(buf, row)
            if built is not None:
                yield o, _identity(row, built[1], built[2], built[3])

    def _find_deliveries(self, pending: dict, start: int, end: int) -> int:
        born = np.fromiter((k[0] for k in pending), dtype=np.int64)
        commitlog = CommitLog(
            os.path.join(self.root, "commitlog"),
            self.env.config.store.mapped_file_size_commit_log,
            readonly=True,
        )
        found = 0
        try:
            start = max(start, commitlog.min_offset)
            for batch in commitlog.scan(start, end):
                rows, buf = batch.rows, batch.buf
                for i in np.flatnonzero(np.isin(rows[:, rec.R_BORN_TS], born)).tolist():
                    row = rows[i]
                    topic = _slice(buf, row, rec.R_TOPIC_START, rec.R_TOPIC_LEN)
                    props = _slice(buf, row, rec.R_PROPS_START, rec.R_PROPS_LEN)
                    units = pending.get(_identity(row, topic, int(row[rec.R_QUEUE_ID]), props))
                    if units:
                        qid, offset = units.pop(0)
                        self.done[qid].add(offset)
                        found += 1
        finally:
            commitlog.close()
        for qid in range(self.levels):
            self._advance(qid)
        return found

    def _advance(self, qid: int) -> None:
        """Move the level's offset over units delivered beyond it."""
        done = self.done[qid]
        offset = int(self.offsets[qid])
        while offset in done:
            done.discard(offset)
            offset += 1
        self.offsets[qid] = offset

    # -- delivering -------------------------------------------------------------------------

    def _max_offset(self, qid: int) -> int:
        slot = self.directory.slot(_SCHEDULE, qid)
        return int(self.maxima[slot]) if slot >= 0 else 0

    def _units(self, qid: int, offset: int, end: int) -> np.ndarray | None:
        units, _ = self.reader.units(SCHEDULE_TOPIC, qid, offset, min(end, offset + BATCH))
        return units if units.size else None

    def _records(self, qid: int, offset: int, units: np.ndarray):
        """``(queue offset, buffer, row)`` of the records the units point at; units whose
        record is gone or broken are left out (RocketMQ skips them too)."""
        n = units.shape[0]
        phys = units["offset"].astype(np.int64)
        sizes = units["size"].astype(np.int64)
        qoffs = offset + np.arange(n, dtype=np.int64)
        for mf, rows, ok in self.reader.records(SCHEDULE_TOPIC, qid, phys, sizes, qoffs):
            for i in ok.tolist():
                yield int(rows[i, rec.R_QUEUE_OFFSET]), mf.buf, rows[i]

    def _rebuild(self, buf: np.ndarray, row: np.ndarray):
        """``(record, real topic, real queue id, properties)`` of a unit's delivery, or None
        for a record that names no valid real topic and queue (skipped, logged)."""
        props = _slice(buf, row, rec.R_PROPS_START, rec.R_PROPS_LEN)
        topic = property_value(props, _REAL_TOPIC)
        qid = property_value(props, _REAL_QID)
        problem = name_problem("topic", topic, MAX_TOPIC_LENGTH) if topic else "no REAL_TOPIC"
        if problem or qid is None or not qid.isdigit() or int(qid) > 65535:
            log.error("schedule record at queue offset %d cannot be delivered: %s",
                      int(row[rec.R_QUEUE_OFFSET]), problem or f"REAL_QID {qid!r}")  # fmt: skip
            return None
        real = topic.encode()
        new_props = edit_properties(props, remove={_DELAY})
        return rebuild_record(buf, row, real, int(qid), new_props), real, int(qid), new_props

    def has_work(self) -> bool:
        return time.time() * 1000 >= self.next_due_ms and time.monotonic() >= self._retry_at

    def do_work(self) -> int:
        if time.monotonic() < self._retry_at:
            return 0
        now = _now_ms()
        next_due = now + int(MAX_PARK_S * 1000)
        work = 0
        for qid in range(self.levels):
            offset, end = int(self.offsets[qid]), self._max_offset(qid)
            units = self._units(qid, offset, end) if offset < end else None
            if units is None:
                continue
            due_at = units["tags_code"].astype(np.int64)
            # RocketMQ's correctDeliverTimestamp: a time beyond now + the level's delay
            # (a clock that jumped back) counts as now
            due_at[due_at > now + int(self.delays[qid])] = now
            due = int(np.count_nonzero(np.cumprod(due_at <= now)))
            if due:
                work += self._deliver(qid, offset, units[:due])
            if due < units.size:
                next_due = min(next_due, int(due_at[due]))
            elif offset + due < end:
                next_due = now
        self.next_due_ms = next_due
        if work:
            self._take_snapshot()
        self._persist_if_flushed()
        return work

    def _deliver(self, qid: int, offset: int, units: np.ndarray) -> int:
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        sent: list[tuple[int, int]] = []  # (queue offset, ring sequence)
        skipped = set(range(offset, offset + units.shape[0]))  # left: no record to send
        for o, buf, row in self._records(qid, offset, units):
            if o in self.done[qid]:
                continue
            built = self._rebuild(buf, row)
            if built is None or built[1] == TRANS_HALF_TOPIC:
                continue  # a half message's delivery is dropped (RocketMQ)
            skipped.discard(o)
            sent.append((o, self.ring.append_raw(built[0], deadline)))
        done = self.done[qid]
        done.update(skipped)
        for o, seq in sent:
            try:
                answer = self.ring.wait_answer(seq, deadline)
            except SendTimeoutError:
                raise ShmqError("the writer did not answer the schedule agent") from None
            refused = answer.status == ring.REJECTED
            if refused and answer.reason == ring.REASON_SERVICE_NOT_AVAILABLE:
                self._retry_at = time.monotonic() + RETRY_AFTER_S
                continue  # stored nothing: delivered again later
            if refused:
                log.error("delivery of schedule queue %d offset %d refused: %s",
                          qid, o, ring.REASONS.get(answer.reason, answer.reason))  # fmt: skip
            done.add(o)
        before = int(self.offsets[qid])
        self._advance(qid)
        self.delivered += len(sent)
        return int(self.offsets[qid]) - before + len(sent)

    # -- persisting -------------------------------------------------------------------------

    def _take_snapshot(self) -> None:
        """Note the state now (nothing in flight) with the write offset it holds for."""
        self._pending = (
            self.offsets.copy(),
            [sorted(d) for d in self.done],
            cn.load(self.words, cn.WRITE_OFFSET),
        )

    def _persist_if_flushed(self, force: bool = False) -> None:
        now = time.monotonic()
        if self._pending is None:
            persisted_from = self._persisted[1]
            if cn.load(self.words, cn.WRITE_OFFSET) - persisted_from > RESCAN_BYTES:
                self._take_snapshot()
            return
        offsets, done, scan_from = self._pending
        if not force and now - self._last_persist < PERSIST_INTERVAL_S:
            return
        if cn.load(self.words, cn.FLUSHED_OFFSET) < scan_from:
            return  # a power loss could take deliveries back: keep the older state
        table = {level + 1: int(o) for level, o in enumerate(offsets)}
        data = {"offsetTable": table, "shmqScanFrom": scan_from}
        extra = {level + 1: d for level, d in enumerate(done) if d}
        if extra:
            data["shmqDelivered"] = extra
        try:
            json_file.persist(self.path, json_file.dumps_fastjson(data))
        except OSError as exc:  # a full disk: the older state and the scan cover it
            log.error("cannot persist %s: %s", FILE_NAME, exc)
            return
        self._persisted = (offsets, scan_from)
        self._pending = None
        self._last_persist = now

    def park_timeout(self) -> float:
        """Until the next unit is due (at most ``MAX_PARK_S``); sooner while a state
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
        self.ring.close()
        self.reader.close()
        self.queues_seg.close()
        self.registry.close()


class ScheduleIdle:
    """Park on the agent's semaphore until the next due time (reput posts it when a
    schedule message arrives, the supervisor when the agent should stop)."""

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


def _slice(buf: np.ndarray, row: np.ndarray, start: int, length: int) -> bytes:
    s = int(row[start])
    return buf[s : s + int(row[length])].tobytes()


def _identity(row: np.ndarray, topic: bytes, queue_id: int, props: bytes) -> tuple:
    """What a delivery shares with its schedule record: born time, body CRC, and the
    real topic, queue and properties it was rebuilt with."""
    return int(row[rec.R_BORN_TS]), int(row[rec.R_BODY_CRC]), topic, queue_id, props
