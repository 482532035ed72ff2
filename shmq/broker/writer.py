"""The writer agent: drains every producer ring into the CommitLog (the only CommitLog writer).

Per ring and pass: validate the published records with the CommitLog parser (framing, CRC,
topic alphabet), check each against the topic table (exists, writable, queue id, size,
sysflag), stamp queue offsets, physical offsets, store time and host while copying them into
the CommitLog, answer each record in the ring's completion area, then publish in this order:
the ring's journal, the CommitLog write offset, the ring's head. A restarted writer therefore
neither loses nor repeats a record (see ``shmq.ipc.ring``).
"""

from __future__ import annotations

import logging
import os
import time

import numpy as np

from shmq.broker.agent import AgentEnv
from shmq.codec import record as rec
from shmq.config import parse_host
from shmq.errors import DiskFullError, ShmqError
from shmq.ipc import counters as cn
from shmq.ipc import queue_table as qt
from shmq.ipc import registry as rg
from shmq.ipc import ring
from shmq.ipc import topic_table as tt
from shmq.ipc.segment import Segment, fence, open_semaphore, post
from shmq.message import pack_host
from shmq.store.commitlog import CommitLog

log = logging.getLogger(__name__)

PERM_WRITE = 2
MAX_ROWS = 4096
ALLOC_RETRY_S = 1.0  # a full disk: how often the writer tries to allocate a file again
_BAD_SYSFLAG = rec.SYSFLAG_STOREHOST_V6 | rec.SYSFLAG_TRANSACTION_MASK
_NO_SLOTS = np.zeros(1, dtype=np.int64)


def warm_up() -> None:
    """Run every kernel of the writer's hot path once on a scratch record, with the argument
    types of the real calls, so the numba compile (seconds when the cache is cold) happens
    before the broker serves producers instead of inside someone's send timeout."""
    from shmq.client.ring_producer import warm_up as warm_producer

    ring_data = np.zeros(4096, dtype=np.uint8)
    warm_producer(ring_data)
    rows = np.zeros((4, rec.N_COLS), dtype=np.int64)
    n, _, _ = rec.parse_records(ring_data, 0, 4096, 0, True, rows)
    rows = rows[:n]
    ids, first = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    rec.topic_ids(ring_data, rows, ids, first)
    keep, reasons, qslots = np.zeros(n, np.bool_), np.zeros(n, np.int64), np.zeros(n, np.int64)
    one = np.zeros(1, dtype=np.int64)
    rec.check_ingest(rows, ids, one, one + 1, one, one, 1 << 20, _BAD_SYSFLAG,
                     3, 4, 5, reasons, keep, qslots)  # fmt: skip
    dst, out = np.zeros(4096, dtype=np.uint8), np.zeros((n, 2), dtype=np.int64)
    rec.copy_records(ring_data, rows, keep, 0, qslots, np.zeros(1, np.int64), 0, 0, dst, 0, 4096,
                     0, out)  # fmt: skip
    rec.write_completions(np.zeros((16, 4), np.int64), 0, rows, keep, reasons, out, 1, 3, 0)
    rec.write_blank(dst, 0, 8)


class RingFenced(ShmqError):
    """A ring's words break the ring's rules; ``code`` is the ``ring.FENCE_*`` value."""

    def __init__(self, code: int) -> None:
        super().__init__(ring.FENCES[code])
        self.code = code


class RingView:
    """The writer's handle on one producer ring."""

    def __init__(self, slot: int, gen: int, names_prefix: str, published_woff: int) -> None:
        self.slot, self.gen = slot, gen
        self.segment = Segment.attach(rg.ring_name(names_prefix, slot, gen))
        self.words = self.segment.words
        try:
            self.capacity, self.slots = ring.geometry(self.words, self.segment.size)
        except ShmqError:
            ring.publish_fence(self.words, ring.FENCE_GEOMETRY)
            self.segment.close()
            raise RingFenced(ring.FENCE_GEOMETRY) from None
        self.data = ring.data(self.segment.buf, self.capacity)
        self.completions = ring.completions(self.segment.buf, self.capacity, self.slots)
        self.head, self.seq = ring.resume_point(self.words, published_woff)
        ring.publish_head(self.words, self.head, self.seq)
        self.sem = open_semaphore(rg.producer_sem_name(names_prefix, slot, gen))

    def close(self) -> None:
        self.sem.close()
        self.data = self.completions = self.words = None
        self.segment.close()


class Writer:
    def __init__(self, env: AgentEnv) -> None:
        self.env = env
        cfg = env.config
        store = cfg.store
        self.words = env.words
        self.buf = env.counters.buf
        host, port = parse_host(store.store_host)
        self.commitlog = CommitLog(
            os.path.join(store.store_path_root_dir, "commitlog"),
            store.mapped_file_size_commit_log,
            store_host=pack_host(host, port),
            preallocate=store.preallocate_mapped_file_enable,
            warm=store.warm_mapped_file_enable,
            mlock=store.mlock_mapped_file_enable,
        )
        self.commitlog.load()
        self.write_offset = cn.load(self.words, cn.WRITE_OFFSET)
        self.commitlog.set_write_offset(self.write_offset, store.max_message_size + 64 * 1024)
        self.topics_seg = Segment.attach(env.names.topics)
        self.queues_seg = Segment.attach(env.names.queues)
        self.registry = Segment.attach(env.names.registry)
        self.directory = qt.QueueDirectory(self.queues_seg.buf, self.queues_seg.words)
        self.next_qoff = np.zeros(int(self.queues_seg.words[qt.CAPACITY]), dtype=np.int64)
        self._topics_version = -1
        self.topics: dict[bytes, tuple[int, int, int]] = {}
        self._requested: tuple[bytes, int] | None = None
        self._slot_pools: dict[tuple[bytes, int], np.ndarray] = {}
        self.rings: dict[int, RingView] = {}
        self.fenced: set[tuple[int, int]] = set()  # (slot, gen) of rings no longer read
        self._alloc_retry_at = 0.0
        self._cleaned_to = 0
        self._registry_version = -1
        self.rows = np.zeros((MAX_ROWS, rec.N_COLS), dtype=np.int64)
        self.out = np.zeros((MAX_ROWS, 2), dtype=np.int64)
        self.keep = np.zeros(MAX_ROWS, dtype=np.bool_)
        self.reasons = np.zeros(MAX_ROWS, dtype=np.int64)
        self.qslots = np.zeros(MAX_ROWS, dtype=np.int64)
        self.ids = np.zeros(MAX_ROWS, dtype=np.int64)
        self.first = np.zeros(MAX_ROWS, dtype=np.int64)
        self.max_body = store.max_message_size
        self.sync_flush = store.sync_flush
        self.reput_sem = open_semaphore(env.names.agent_sem("reput"))
        self.flush_sem = open_semaphore(env.names.agent_sem("flush"))
        self.supervisor_sem = open_semaphore(env.names.supervisor_sem)
        warm_up()
        self._recover_queue_offsets()
        self._refresh_rings()

    # -- start-up ---------------------------------------------------------------------------

    def _recover_queue_offsets(self) -> None:
        """Next queue offsets: what reput has dispatched, plus records it has not reached."""
        dispatched = cn.load(self.words, cn.DISPATCHED_OFFSET)
        self.directory.refresh()
        maxima = qt.max_offsets(self.queues_seg.buf)
        self.next_qoff[:] = maxima
        for batch in self.commitlog.scan(dispatched, self.write_offset):
            for i in range(batch.rows.shape[0]):
                slot = self._queue_slot(batch.topic(i).encode(), int(batch.rows[i, rec.R_QUEUE_ID]))
                qoff = int(batch.rows[i, rec.R_QUEUE_OFFSET]) + 1
                self.next_qoff[slot] = max(self.next_qoff[slot], qoff)
        log.info("writer resumes at CommitLog offset %d", self.write_offset)

    def _queue_slot(self, topic: bytes, queue_id: int) -> int:
        slot = self.directory.slot(topic, queue_id)
        if slot < 0:
            slot = qt.add_queue(self.queues_seg.buf, self.queues_seg.words, topic, queue_id)
            self.directory.slots[(topic, queue_id)] = slot
        return slot

    def _refresh_rings(self) -> None:
        version = int(self.registry.words[rg.VERSION])
        if version == self._registry_version:
            return
        self._registry_version = version
        producers = self.env.config.max_producers
        live = {
            slot: (gen, state)
            for slot, gen, state in rg.active_producers(self.registry.words, producers)
        }
        self.fenced &= {(slot, gen) for slot, (gen, _) in live.items()}
        for slot, view in list(self.rings.items()):
            gen, state = live.get(slot, (None, rg.FREE))
            if gen == view.gen and state == rg.FENCED:  # fenced by the supervisor
                self.fenced.add((slot, gen))
                self.rings.pop(slot).close()
            elif gen != view.gen:
                self._drain_ring(view)
                self.rings.pop(slot).close()
        for slot, (gen, state) in live.items():
            if slot in self.rings or state != rg.ACTIVE or (slot, gen) in self.fenced:
                continue
            try:
                self.rings[slot] = RingView(slot, gen, self.env.names.prefix, self.write_offset)
            except RingFenced as exc:
                self._log_fence(slot, gen, exc.code)
                self.fenced.add((slot, gen))
            except Exception as exc:  # the producer went away while we attached
                log.warning("cannot attach ring %d.%d: %s", slot, gen, exc)

    def _refresh_topics(self) -> None:
        words = self.topics_seg.words
        if tt.load_version(words) != self._topics_version:
            self._topics_version, self.topics = tt.read_topics(self.topics_seg.buf, words)

    # -- the loop ---------------------------------------------------------------------------

    def has_work(self) -> bool:
        return int(self.registry.words[rg.VERSION]) != self._registry_version or any(
            int(v.words[ring.TAIL]) != v.head for v in self.rings.values()
        )

    def do_work(self) -> int:
        self._refresh_rings()
        self._refresh_topics()
        cleaned = int(self.words[cn.MIN_PHYSICAL_OFFSET])
        if cleaned > self._cleaned_to:  # the cleaner deleted files: unmap them
            self._cleaned_to = cleaned
            self.commitlog.queue.release_below(cleaned)
        work = 0
        for view in list(self.rings.values()):
            work += self._drain_ring(view)
        return work

    def _drain_ring(self, view: RingView) -> int:
        """Append what the ring published. The writer's counters name the ring while it is
        read, so the supervisor can fence it if the writer dies on its bytes."""
        words = self.words
        words[cn.WRITER_RING_GEN] = view.gen
        words[cn.WRITER_RING] = view.slot + 1
        try:
            tail, seq_tail = ring.load_tail(view.words)
            why = ring.fence_reason(view.head, view.seq, tail, seq_tail, view.capacity, view.slots)
            if why:
                self._fence(view, why)
                return 1
            done = 0
            while view.head < tail:
                n = self._drain_once(view, tail, seq_tail)
                if n <= 0:
                    break
                done += n
            return done
        finally:
            words[cn.WRITER_RING] = 0

    def _fence(self, view: RingView, code: int) -> None:
        """Stop reading ``view``'s ring for good: the producer's sends fail naming ``code``
        (it may register again for a new ring); no other ring is affected."""
        self._log_fence(view.slot, view.gen, code)
        ring.publish_fence(view.words, code)
        fence()
        post(view.sem)
        self.fenced.add((view.slot, view.gen))
        if self.rings.get(view.slot) is view:
            del self.rings[view.slot]
        view.close()

    def _log_fence(self, slot: int, gen: int, code: int) -> None:
        log.error("producer ring %d.%d fenced: %s", slot, gen, ring.FENCES[code])
        cn.publish(self.words, cn.REJECTED, int(self.words[cn.REJECTED]) + 1)

    def _drain_once(self, view: RingView, tail: int, seq_tail: int) -> int:
        cap = view.capacity
        local = view.head & (cap - 1)
        base = view.head - local
        limit = min(cap, local + (tail - view.head))
        rows = self.rows
        n, _, code = rec.parse_records(view.data, local, limit, base, True, rows)
        if n > seq_tail - view.seq:  # more records than the producer says it published
            self._fence(view, ring.FENCE_SEQ)
            return 0
        if n == 0:
            if code == rec.PARSE_BLANK:
                view.head = base + cap
                ring.publish_head(view.words, view.head, view.seq)
                return 1
            self._reject_rest(view, tail, seq_tail, rec.PARSE_REASONS[code])
            return 1
        n, kept = self._check(view, rows[:n])
        if n == 0:
            return 0  # waiting for a topic to be created
        rows, keep, qslots = rows[:n], self.keep[:n], self.qslots[:n]
        now = time.time_ns() // 1_000_000
        out = self.out[:n]
        out[:] = -1
        if kept and self._store_refuses():
            kept = 0
        elif kept:
            try:
                self.commitlog.append_records(
                    view.data, rows, keep, qslots, self.next_qoff, now, out
                )
                if self.words[cn.ALLOC_FAILED]:
                    log.warning("CommitLog files can be allocated again: puts accepted")
                    cn.publish(self.words, cn.ALLOC_FAILED, 0)
            except DiskFullError as exc:
                self._allocation_failed(exc)
                kept = 0
        if not kept:
            keep[:] = False
            self.reasons[:n] = np.where(
                self.reasons[:n] == ring.REASON_NONE, ring.REASON_SERVICE_NOT_AVAILABLE,
                self.reasons[:n],
            )  # fmt: skip
        rec.write_completions(
            view.completions, view.seq, rows, keep, self.reasons[:n], out, ring.SEND_OK,
            ring.REJECTED, now,
        )  # fmt: skip
        end = base + int(rows[-1, rec.R_POS] + rows[-1, rec.R_SIZE])
        new_woff = self.commitlog.max_offset
        ring.write_journal(view.words, end, view.seq + n, new_woff)
        words = self.words
        cn.publish(words, cn.WRITE_TIMESTAMP, now)
        cn.publish(words, cn.WRITE_OFFSET, new_woff)
        cn.publish(words, cn.MSGS_IN, int(words[cn.MSGS_IN]) + kept)
        if kept < n:
            cn.publish(words, cn.REJECTED, int(words[cn.REJECTED]) + n - kept)
        self.write_offset = new_woff
        view.head, view.seq = end, view.seq + n
        ring.publish_head(view.words, view.head, view.seq)
        fence()
        if self.registry.words[rg.producer_base(view.slot) + rg.WAITING]:
            post(view.sem)
        if words[cn.REPUT_PARKED]:
            post(self.reput_sem)
        if self.sync_flush and words[cn.FLUSH_PARKED]:
            post(self.flush_sem)
        return n

    def _store_refuses(self) -> bool:
        """Whether puts are refused now (disk over 90 % per the cleaner, a failed fsync, or a
        CommitLog file that could not be allocated less than a second ago: the next try
        comes after that second)."""
        words = self.words
        if words[cn.DISK_FULL] or words[cn.FLUSH_FAILED]:
            return True
        return bool(words[cn.ALLOC_FAILED]) and time.monotonic() < self._alloc_retry_at

    def _allocation_failed(self, exc: DiskFullError) -> None:
        """A new CommitLog file could not get disk blocks: refuse puts (producers see
        SERVICE_NOT_AVAILABLE and the reason), keep serving everything else, retry in 1 s."""
        if not self.words[cn.ALLOC_FAILED]:
            log.error("puts refused until disk space is back: %s", exc)
        cn.publish(self.words, cn.ALLOC_FAILED, 1)
        self._alloc_retry_at = time.monotonic() + ALLOC_RETRY_S

    def _check(self, view: RingView, rows: np.ndarray) -> tuple[int, int]:
        """Validate against the topic table, filling ``keep``, ``reasons`` and ``qslots``;
        returns how many rows to process now (fewer when a topic must first be
        auto-created) and how many of those are kept."""
        n, data = rows.shape[0], view.data
        ids, first = self.ids[:n], self.first[:n]
        distinct = rec.topic_ids(data, rows, ids, first)
        limit = n
        topic_reason = np.zeros(distinct, dtype=np.int64)
        write_q = np.zeros(distinct, dtype=np.int64)
        slot0 = np.zeros(distinct, dtype=np.int64)
        pools = []
        used = 0
        for t in range(distinct):
            r = int(first[t])
            start = int(rows[r, rec.R_TOPIC_START])
            name = data[start : start + int(rows[r, rec.R_TOPIC_LEN])].tobytes()
            cfg = self.topics.get(name)
            if cfg is None and self._waiting_for_topic(name, view.slot):
                limit = min(limit, r)
                continue
            if cfg is None:
                topic_reason[t] = ring.REASON_TOPIC_NOT_EXIST
            elif not cfg[2] & PERM_WRITE:
                topic_reason[t] = ring.REASON_NO_PERMISSION
            else:
                write_q[t] = cfg[1]
                pool = self._topic_slots(name, cfg[1])
                slot0[t] = used
                used += pool.shape[0]
                pools.append(pool)
        if limit == 0:
            return 0, 0
        slots = pools[0] if len(pools) == 1 else np.concatenate(pools or [_NO_SLOTS])
        kept = rec.check_ingest(
            rows[:limit], ids, topic_reason, write_q, slot0, slots, self.max_body, _BAD_SYSFLAG,
            ring.REASON_QUEUE_ID, ring.REASON_TOO_LARGE, ring.REASON_SYSFLAG,
            self.reasons, self.keep, self.qslots,
        )  # fmt: skip
        return limit, kept

    def _topic_slots(self, topic: bytes, write_q: int) -> np.ndarray:
        """Queue-table slots of the topic's write queues (created on first use)."""
        pool = self._slot_pools.get((topic, write_q))
        if pool is None:
            pool = np.array([self._queue_slot(topic, q) for q in range(write_q)], dtype=np.int64)
            self._slot_pools[(topic, write_q)] = pool
        return pool

    def _waiting_for_topic(self, topic: bytes, slot: int) -> bool:
        """With autoCreateTopicEnable, ask the supervisor to create ``topic`` with the queue
        count producer ``slot`` asked for; True while the request is outstanding, False once
        it was answered without creating it."""
        if not self.env.config.auto_create_topic_enable:
            return False
        words = self.words
        done = int(words[cn.TOPIC_REQUEST_DONE])
        if self._requested is None:
            if done != int(words[cn.TOPIC_REQUEST_SEQ]):
                return True
            queues = int(self.registry.words[rg.producer_base(slot) + rg.DEFAULT_QUEUE_NUMS])
            self._requested = (topic, cn.write_topic_request(self.buf, words, topic, queues))
            post(self.supervisor_sem)
            return True
        name, seq = self._requested
        if done < seq:
            return True
        self._requested = None
        self._refresh_topics()
        if name != topic:
            return True  # another topic's request finished; this one is asked next pass
        return topic in self.topics  # created meanwhile: process it on the next pass

    # -- replies ----------------------------------------------------------------------------

    def _reject_rest(self, view: RingView, tail: int, seq_tail: int, why: str) -> None:
        """The ring holds bytes that are not a valid record: a broken producer. Answer every
        outstanding record (at most one ring of slots: ``fence_reason`` checked) with a
        rejection and skip to the tail."""
        log.error(
            "producer ring %d: %s at ring offset %d; %d record(s) rejected",
            view.slot, why, view.head, seq_tail - view.seq,
        )  # fmt: skip
        if seq_tail > view.seq:
            idx = np.arange(view.seq, seq_tail, dtype=np.int64) & (view.slots - 1)
            view.completions[idx, 0] = ring.REJECTED | (ring.REASON_CORRUPT << 16)
        view.head, view.seq = tail, max(seq_tail, view.seq)
        ring.write_journal(view.words, view.head, view.seq, 0)
        ring.publish_head(view.words, view.head, view.seq)
        post(view.sem)

    # -- stopping ---------------------------------------------------------------------------

    def drain(self) -> None:
        """Clean stop: write what every ring has published (bounded by one pass each)."""
        self._refresh_topics()
        for view in list(self.rings.values()):
            self._drain_ring(view)

    def close(self) -> None:
        for view in self.rings.values():
            view.close()
        self.rings.clear()
        self.commitlog.close()
        for sem in (self.reput_sem, self.flush_sem, self.supervisor_sem):
            sem.close()
        for seg in (self.topics_seg, self.queues_seg, self.registry):
            seg.close()
