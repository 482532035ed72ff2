"""Dispatch (RocketMQ's reput): build consume queues and the index from CommitLog records.

Used by ``MessageStore`` in one process and by the broker's reput agent in its own process.
"""

from __future__ import annotations

import logging
import os

import numpy as np

from shmq.codec import record as rec
from shmq.codec.dispatch_plan import plan_dispatch
from shmq.config import MessageStoreConfig
from shmq.delay_topics import SCHEDULE_TOPIC
from shmq.errors import InvalidMessageError
from shmq.message import validate_topic
from shmq.names import DELETED_TOPIC_LOG
from shmq.store.commitlog import CommitLog, ScanBatch
from shmq.store.consume_queue import ConsumeQueue
from shmq.store.dispatch import run as dr
from shmq.store.dispatch.topic_purge import deleted_topic
from shmq.store.index.file import KEYS_DONE
from shmq.store.index.service import IndexService

log = logging.getLogger(__name__)

MAX_QUEUE_ID = 65535
MAX_CACHED_TOPICS = 4096
# Transaction types that enter consume queues and the index (NOT and COMMIT).
_DISPATCHED_TX_TYPES = (0, rec.SYSFLAG_TRANSACTION_COMMIT)
_NO_INDEX = np.empty(0, dtype=np.uint8)


class Dispatcher:
    """Owns the consume queues under ``cq_root`` (and writes the index, when given one)."""

    def __init__(
        self,
        cq_root: str,
        cq_file_size: int,
        index: IndexService | None,
        delay_levels_ms: tuple[int, ...] | None = None,
    ) -> None:
        self.cq_root = cq_root
        self.cq_file_size = cq_file_size
        self.index = index
        self.delays = delay_levels_ms or MessageStoreConfig().delay_levels_ms
        self.consume_queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._topics: dict[bytes, tuple[str, bool]] = {}
        self._plan: _Scratch | None = None
        # the queue the last pass wrote, when it wrote only that one: (topic as uint8, queue
        # id, its consume queue), the run ``dispatch_run`` expects the next pass to continue
        self._run: tuple[np.ndarray, int, ConsumeQueue] | None = None
        # ``dispatch_run``'s records, kept for every pass; ``_args`` and ``_out`` name their
        # fields for Python (``dispatch_run.RunParams``)
        self._params = np.zeros(1, dtype=dr.RUN_PARAMS)
        self._result = np.zeros(1, dtype=dr.RUN_RESULT)
        self._args = dr.RunParams.from_buffer(self._params)
        self._out = dr.RunResult.from_buffer(self._result)

    def load(self) -> None:
        """Map every consume queue found on disk (their ends are found by ``recover``)."""
        if not os.path.isdir(self.cq_root):
            return
        for topic in sorted(os.listdir(self.cq_root)):
            for qid in sorted(os.listdir(os.path.join(self.cq_root, topic))):
                if qid.isdigit():
                    self.consume_queue(topic, int(qid)).load()

    def consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = self.consume_queues.get((topic, queue_id))
        if cq is None:
            cq = ConsumeQueue(self.cq_root, topic, queue_id, self.cq_file_size)
            self.consume_queues[(topic, queue_id)] = cq
        return cq

    def dispatch_range(
        self, commitlog: CommitLog, start: int, end: int, rows: np.ndarray
    ) -> tuple[int, dict[tuple[str, int], ConsumeQueue], int, int, int]:
        """Dispatch the valid records from ``start`` up to ``end``, parsed into ``rows``
        (a ``rec.RECORD_ROW`` table, kept by the caller): ``dispatch_run`` when they
        continue the last pass's queue, ``dispatch_batch`` of each scanned batch otherwise.
        Returns ``(records, queues written, last store timestamp or 0, position, parse
        code)``; position and code say where and why it stopped, as ``CommitLog.last_scan``.
        A run longer than ``rows`` (a ``send_bulk`` call's records) takes one
        ``dispatch_run`` per table of rows, not the general path after the first."""
        total, last_ts, code = 0, 0, rec.PARSE_END
        touched: dict[tuple[str, int], ConsumeQueue] = {}
        while start < end:
            run = self.dispatch_run(commitlog, start, end, rows)
            if run is None:
                break
            n, at, code, cq = run
            total += n
            if cq is not None:
                touched[(cq.topic, cq.queue_id)] = cq
                last_ts = int(rows["store_ts"][n - 1])
            if code not in (rec.PARSE_FULL, rec.PARSE_BLANK):
                return total, touched, last_ts, at, code
            if at == start:  # no progress: the general path below decides
                break
            start = at
        if start >= end:
            return total, touched, last_ts, start, code
        for batch in commitlog.scan(start, end, rows=rows):
            n, written = self.dispatch_batch(batch)
            total += n
            touched.update(written)
            last_ts = int(batch.rows["store_ts"][-1])
        position, code = commitlog.last_scan
        return total, touched, last_ts, position, code

    def dispatch_run(
        self, commitlog: CommitLog, start: int, end: int, rows: np.ndarray
    ) -> tuple[int, int, int, ConsumeQueue | None] | None:
        """Dispatch the records from ``start`` to ``end`` in one kernel call when they all
        continue the queue the last pass wrote (``dispatch_run``), parsed into ``rows``.
        Returns ``(records, next offset, parse code, the queue written or None)`` (a blank
        record's code comes with the next file's offset, as ``CommitLog.scan`` goes on
        there); None when they are not such a run: nothing was written, ``dispatch_batch``
        takes them."""
        run = self._run
        if run is None:
            return None
        raw, queue_id, cq = run
        mf = commitlog.queue.find_file(start)
        target = cq.run_target(rows.shape[0]) if mf is not None else None
        if target is None:
            return None
        args, out = self._args, self._out
        index = _NO_INDEX  # no index, or no file yet: the general path below makes it
        f = self.index.run_file() if self.index is not None else None
        if f is not None:
            index = f.buf
            args.slot_num, args.index_num = f.hash_slot_num, f.index_num
            args.entry_limit = f.entry_limit()
        units, unit_at, room, next_unit = target
        base = mf.file_from_offset
        picks = self._scratch(room).picks
        args.start = start - base
        args.limit = min(mf.size, end - base)
        args.base = base
        args.cap = room
        args.queue_id = queue_id
        args.unit_at = unit_at
        args.next_unit = next_unit
        args.max_physic = cq.max_physic_offset
        dr.dispatch_run(mf.read_view, rows, raw, units.buf, index, picks, self._params,
                        self._result)  # fmt: skip
        n = out.records
        if n == dr.NOT_A_RUN:
            self._run = None
            return None
        if n:
            last = rows[n - 1]
            cq.ran(units, unit_at + n, base + int(last["pos"] + last["size"]))
        code = out.parse_code
        if out.keys_code != KEYS_DONE and self.index is not None:  # a full index file, its
            # reserved entries used up, or none yet
            self.index.build_index_batch(
                mf.read_view, rows, picks[: out.indexed], base, out.keys_next, out.keys_skip
            )
        offset = mf.file_end_offset if code == rec.PARSE_BLANK else base + out.position
        return n, offset, code, cq if n else None

    def dispatch_batch(self, batch: ScanBatch) -> tuple[int, dict[tuple[str, int], ConsumeQueue]]:
        """Write one scanned batch into consume queues (one kernel plans the groups, one
        call per queue writes its units) and the index (one call for all keys). Returns the
        records seen and the queues written."""
        touched: dict[tuple[str, int], ConsumeQueue] = {}
        rows = batch.rows
        n = rows.shape[0]
        if n == 0:
            return 0, touched
        s = self._scratch(n)
        groups, distinct, n_indexed, bad = plan_dispatch(
            batch.buf, rows, MAX_QUEUE_ID, s.ids, s.first, s.picks, s.starts, s.keys, s.indexed
        )
        topics = [self._topic(batch, int(s.first[t])) for t in range(distinct)]
        deletion = next((t for t in range(distinct) if topics[t][0] == DELETED_TOPIC_LOG), -1)
        if deletion >= 0:
            first = int(np.flatnonzero(s.ids[:n] == deletion)[0])
            if first < n - 1:  # the records up to it, its purge, then the rest
                return self._split(batch, first + 1)
        base = batch.file.file_from_offset
        refused = False
        for g in range(groups):
            t, qid = divmod(int(s.keys[g]), MAX_QUEUE_ID + 1)
            topic, ok = topics[t]
            a, b = int(s.starts[g]), int(s.starts[g + 1])
            if not ok:
                refused = True
                self._refuse(batch, s.picks[a:b], topic)
                continue
            if topic == SCHEDULE_TOPIC:  # the tag slot holds the delivery time
                picked = s.picks[a:b]
                delay = self.delays[min(qid, len(self.delays) - 1)]
                rows["tags_code"][picked] = rows["store_ts"][picked] + delay
            cq = self.consume_queue(topic, qid)
            cq.put_rows(rows, s.picks, a, b, base)
            touched[(topic, qid)] = cq
        if bad:
            self._refuse_queue_ids(batch, topics, s.ids[:n])
        if self.index is not None and n_indexed:
            indexed = s.indexed[:n_indexed]
            if refused:  # no key of a record that entered no queue
                ok = np.array([topics[int(s.ids[i])][1] for i in indexed.tolist()])
                indexed = indexed[ok]
            if indexed.size:
                self.index.build_index_batch(batch.buf, rows, indexed, base)
        if deletion >= 0:  # the batch's last record deletes a topic
            self._purge(batch, n - 1, touched)
        run = None
        if groups == 1 and not (refused or bad or deletion >= 0) and topic != SCHEDULE_TOPIC:
            run = self._run
            if run is None or run[2] is not cq:
                run = (np.frombuffer(topic.encode(), dtype=np.uint8), qid, cq)
        self._run = run
        return n, touched

    def _split(self, batch: ScanBatch, at: int) -> tuple[int, dict[tuple[str, int], ConsumeQueue]]:
        """Dispatch ``batch`` as its rows before ``at`` and from ``at`` on, in order."""
        n, touched = self.dispatch_batch(ScanBatch(batch.file, batch.rows[:at]))
        n2, touched2 = self.dispatch_batch(ScanBatch(batch.file, batch.rows[at:]))
        touched.update(touched2)
        return n + n2, touched

    def _purge(self, batch: ScanBatch, row: int, touched: dict[tuple[str, int], ConsumeQueue]):
        """Record ``row`` deleted a topic: purge its queues of everything stored before."""
        phys = batch.file.file_from_offset + int(batch.rows["pos"][row])
        topic = deleted_topic(batch, row)
        if topic is None:
            log.error("record at %d in %s names no topic: nothing purged", phys, DELETED_TOPIC_LOG)
            return
        files = 0
        for key, cq in self.consume_queues.items():
            if key[0] == topic and (deleted := cq.purge_below(phys)):
                files += deleted
                touched[key] = cq
        log.info("topic %s deleted at CommitLog offset %d: %d consume-queue file(s) removed",
                 topic, phys, files)  # fmt: skip

    def _scratch(self, n: int) -> _Scratch:
        """Output arrays for ``plan_dispatch`` (reused: one batch at a time)."""
        if self._plan is None or self._plan.ids.shape[0] < n:
            self._plan = _Scratch(max(n, 64))
        return self._plan

    def _topic(self, batch: ScanBatch, row: int) -> tuple[str, bool]:
        """The topic of ``row`` and whether records of it may enter a queue: it becomes a
        directory name, so a damaged one must never reach the filesystem (cached by
        bytes; at most ``MAX_CACHED_TOPICS`` names)."""
        start = int(batch.rows["topic_start"][row])
        raw = batch.buf[start : start + int(batch.rows["topic_len"][row])].tobytes()
        known = self._topics.get(raw)
        if known is None:
            topic = raw.decode("utf-8", "replace")
            if len(self._topics) >= MAX_CACHED_TOPICS:
                self._topics.clear()
            known = self._topics[raw] = (topic, _dispatchable_topic(topic))
        return known

    def _refuse(self, batch: ScanBatch, picked: np.ndarray, topic: str) -> None:
        for i in picked.tolist():
            log.error("record at %d has topic %r, which no queue may have: not dispatched",
                      batch.file.file_from_offset + int(batch.rows["pos"][i]),
                      topic[:140])  # fmt: skip

    def _refuse_queue_ids(self, batch: ScanBatch, topics: list, ids: np.ndarray) -> None:
        rows = batch.rows
        qids = rows["queue_id"]
        tx = rows["sysflag"] & rec.SYSFLAG_TRANSACTION_MASK
        wrong = np.isin(tx, _DISPATCHED_TX_TYPES) & ((qids < 0) | (qids > MAX_QUEUE_ID))
        for i in np.flatnonzero(wrong).tolist():
            log.error("record at %d has topic %r queue %d, which no queue may have: not "
                      "dispatched", batch.file.file_from_offset + int(rows["pos"][i]),
                      topics[int(ids[i])][0][:140], int(qids[i]))  # fmt: skip

    def flush(self, least_pages: int = 0) -> None:
        for cq in self.consume_queues.values():
            cq.flush(least_pages)

    def close(self) -> None:
        for cq in self.consume_queues.values():
            cq.close()


class _Scratch:
    """The output arrays of ``plan_dispatch`` for batches of up to ``n`` records."""

    def __init__(self, n: int) -> None:
        self.ids = np.empty(n, dtype=np.int64)
        self.first = np.empty(n, dtype=np.int64)
        self.picks = np.empty(n, dtype=np.int64)
        self.starts = np.empty(n + 1, dtype=np.int64)
        self.keys = np.empty(n, dtype=np.int64)
        self.indexed = np.empty(n, dtype=np.int64)


def _dispatchable_topic(topic: str) -> bool:
    """A stored record's topic must be one a put accepts: it becomes a directory name, so a
    damaged one must never reach the filesystem."""
    try:
        validate_topic(topic)
    except InvalidMessageError:
        return False
    return True
