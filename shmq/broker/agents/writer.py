"""The writer agent: drains every producer ring into the CommitLog (the only CommitLog writer).

Per ring and pass, one kernel call (``shmq.codec.ring_append``) validates the published
records with the CommitLog parser (framing, topic alphabet), checks each against the topic
index (exists, writable, queue id, size, sysflag; with ``checkProducerCrc`` the producer's
CRC), copies it into the CommitLog stamping queue offset, physical offset, store time and
host and its own BODYCRC, and answers it in the ring's completion area; Python only steps in
for a topic it has not seen, a full CommitLog file, or bytes that are not records. Then it
publishes in this order: the ring's journal, the CommitLog write offset, the ring's head. A
restarted writer therefore neither loses nor repeats a record (see ``shmq.ipc.ring``).
"""

from __future__ import annotations

import functools
import logging
import os
import time

import numpy as np

from shmq.broker.acl.plain_file import PlainAclFile, acl_file_path
from shmq.broker.acl.rings import RingAcl
from shmq.broker.agents.env import AgentEnv
from shmq.broker.agents.reput import Reput
from shmq.broker.agents.wakeups import AgentWakeups
from shmq.broker.config.broker_config import RECORD_OVERHEAD_MAX
from shmq.codec import record as rec
from shmq.codec import ring_append as ra
from shmq.codec.consume_queue import CQ_UNIT_SIZE
from shmq.config import parse_host
from shmq.errors import DiskFullError, ShmqError
from shmq.ipc import counters as cn
from shmq.ipc import queue_table as qt
from shmq.ipc import registry as rg
from shmq.ipc import ring
from shmq.ipc import topic_table as tt
from shmq.ipc.parking import post_parked
from shmq.ipc.segment import Segment, fence, open_semaphore, post
from shmq.message import pack_host
from shmq.names import DELETED_TOPIC_LOG, MAX_TOPIC_LENGTH
from shmq.store.commitlog import CommitLog
from shmq.store.consume_queue import next_life_offset
from shmq.store.dispatch.topic_purge import append_deletion, deleted_topic

log = logging.getLogger(__name__)

PERM_WRITE = 2
MAX_PASS_RECORDS = 4096  # records per ring pass, so one busy producer cannot starve others
MAX_UNKNOWN_TOPICS = 4096  # refused topic names remembered before the index is rebuilt
ALLOC_RETRY_S = 1.0  # a full disk: how often the writer tries to allocate a file again
_NO_FILE = np.zeros(0, dtype=np.uint8)


@functools.cache  # once a process: an agent forked from the agent template has run it
def warm_up() -> None:
    """Run every kernel of the writer's hot path once on a scratch record, with the argument
    types of the real calls, so the numba compile (seconds when the cache is cold) happens
    before the broker serves producers instead of inside someone's send timeout."""
    ring_data = np.zeros(4096, dtype=np.uint8)
    rec.warm_up_encode(ring_data)
    ring_data.flags.writeable = False  # as ``RingView.data``
    index = ra.TopicIndex()
    index.set(b"WarmUp", 0, 1, [0])
    index.build()
    comp = np.zeros((16, 4), dtype=np.int64)
    params = np.zeros(1, dtype=ra.APPEND_PARAMS)
    args = ra.AppendParams.from_buffer(params)
    args.limit = args.dst_room = 4096
    args.max_records = 1
    args.max_body = 1 << 20
    result = np.zeros(1, dtype=ra.APPEND_RESULT)
    dst = np.zeros(4096, dtype=np.uint8)
    for check in (False, True):
        args.check_crc = check
        ra.append_from_ring(ring_data, index.names, index.name_offs, index.table, index.info,
                            index.slots, dst, np.zeros(1, np.int64), comp, params,
                            result)  # fmt: skip
    ra.reject_all(comp, 0, 1, ring.REASON_CORRUPT)
    rec.write_blank(dst, 0, 8)
    rec.parse_one(ring_data, 0, 4096, 0, False, np.zeros(1, dtype=rec.RECORD_ROW), 0)


class _RingFenced(ShmqError):
    """A ring's words break the ring's rules; ``code`` is the ``ring.FENCE_*`` value."""

    def __init__(self, code: int) -> None:
        super().__init__(ring.FENCES[code])
        self.code = code


class RingView:
    """The writer's handle on one producer ring."""

    def __init__(
        self, slot: int, gen: int, account: int, names_prefix: str, published_woff: int
    ) -> None:
        self.slot, self.gen = slot, gen
        self.account = account  # with ACL on: whose topics it may write (0: any)
        self.reg_base = rg.producer_base(slot)
        self.segment = Segment.attach(rg.ring_name(names_prefix, slot, gen))
        self.words = self.segment.words
        try:
            self.capacity, self.slots = ring.geometry(self.words, self.segment.size)
        except ShmqError:
            ring.publish_fence(self.words, ring.FENCE_GEOMETRY)
            self.segment.close()
            raise _RingFenced(ring.FENCE_GEOMETRY) from None
        # read-only: the writer only reads a producer's records, and its kernels are
        # compiled for read-only buffers (see ``MappedFile.read_view``)
        self.data = ring.data(self.segment.buf, self.capacity)
        self.data.flags.writeable = False
        self.completions = ring.completions(self.segment.buf, self.capacity, self.slots)
        self.head, self.seq = ring.resume_point(self.words, published_woff)
        # the ring's words without numpy scalars: a pass reads and publishes them per ring
        self.w = memoryview(self.segment.mm).cast("q")
        ring.publish_head(self.w, self.head, self.seq)
        self.sem = open_semaphore(rg.producer_sem_name(names_prefix, slot, gen))

    def close(self) -> None:
        self.sem.close()
        self.w.release()
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
        self.commitlog.queue.prefault_ahead()
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
        self.views: tuple[RingView, ...] = ()  # self.rings' values, kept for the pass loop
        self.fenced: set[tuple[int, int]] = set()  # (slot, gen) of rings no longer read
        self._alloc_retry_at = 0.0
        self._cleaned_to = 0
        self._registry_version = -1
        self.index = ra.TopicIndex()
        # with aclEnable: the topics each account's rings may write (plain_acl.yml)
        self.ring_acl = RingAcl(PlainAclFile(acl_file_path(cfg))) if cfg.acl_enable else None
        # the append kernel's records, kept for every call; ``args`` and ``out`` name their
        # fields for Python (``ring_append.AppendParams``)
        self.params = np.zeros(1, dtype=ra.APPEND_PARAMS)
        self.result = np.zeros(1, dtype=ra.APPEND_RESULT)
        self.args = args = ra.AppendParams.from_buffer(self.params)
        self.out = ra.AppendResult.from_buffer(self.result)
        # a record must also fit in one CommitLog file (tests run with small files)
        args.max_body = min(
            store.max_message_size, store.mapped_file_size_commit_log - RECORD_OVERHEAD_MAX
        )
        args.store_host = self.commitlog.store_host
        args.check_crc = cfg.check_producer_crc
        args.reason_queue = ring.REASON_QUEUE_ID
        args.reason_size = ring.REASON_TOO_LARGE
        args.reason_sysflag = ring.REASON_SYSFLAG
        args.reason_corrupt = ring.REASON_CORRUPT
        self._row = np.zeros(1, dtype=rec.RECORD_ROW)
        # word access without numpy scalars for what every pass reads or publishes
        self.cw = memoryview(env.counters.mm).cast("q")
        self.cw[cn.WRITER_RING] = 0  # no ring read yet: a predecessor's blame was taken
        self.rw = memoryview(self.registry.mm).cast("q")
        self.tw = memoryview(self.topics_seg.mm).cast("q")
        self.cq_units = store.consume_queue_file_size // CQ_UNIT_SIZE
        self.sync_flush = store.sync_flush
        # dispatchInline (ASYNC_FLUSH): this process owns the consume queues and the index
        # (reput's code, run after each pass) and wakes the consumers; no reput process runs
        self.dispatch = Reput(env) if cfg.dispatcher == "writer" else None
        followers = ("flush", "ha") if self.sync_flush else ("ha",)
        if cfg.dispatcher == "reput":
            followers = ("reput", *followers)
        self.followers = AgentWakeups(self.cw, env.names, followers)
        self.supervisor_sem = open_semaphore(env.names.supervisor_sem)
        self.sem = open_semaphore(env.names.agent_sem("writer"))
        self.idle = env.idle_strategy(self.sem)
        warm_up()
        self._recover_queue_offsets()
        self.commitlog.queue.unmap_below(self.write_offset)  # recovery's scan was the last read
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
                topic = batch.topic(i)
                slot = self._queue_slot(topic.encode(), int(batch.rows["queue_id"][i]))
                qoff = int(batch.rows["queue_offset"][i]) + 1
                self.next_qoff[slot] = max(self.next_qoff[slot], qoff)
                if topic == DELETED_TOPIC_LOG and (deleted := deleted_topic(batch, i)):
                    self._start_next_life(deleted.encode())
        log.info("writer resumes at CommitLog offset %d", self.write_offset)

    def _queue_slot(self, topic: bytes, queue_id: int) -> int:
        slot = self.directory.slot(topic, queue_id)
        if slot < 0:
            slot = qt.add_queue(self.queues_seg.buf, self.queues_seg.words, topic, queue_id)
            self.directory.slots[(topic, queue_id)] = slot
        return slot

    def _refresh_rings(self) -> None:
        version = self.rw[rg.VERSION]
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
                if self.rings.pop(slot, None) is view:  # not fenced while drained
                    view.close()
        for slot, (gen, state) in live.items():
            if slot in self.rings or state != rg.ACTIVE or (slot, gen) in self.fenced:
                continue
            account = int(self.registry.words[rg.producer_base(slot) + rg.ACCOUNT])
            try:
                self.rings[slot] = RingView(slot, gen, account, self.env.names.prefix,
                                            self.write_offset)  # fmt: skip
            except _RingFenced as exc:
                self._log_fence(slot, gen, exc.code)
                self.fenced.add((slot, gen))
            except Exception as exc:  # the producer went away while we attached
                log.warning("cannot attach ring %d.%d: %s", slot, gen, exc)
        self.views = tuple(self.rings.values())

    def _refresh_topics(self) -> None:
        """Take a new topic table; a topic it lacks was deleted: its deletion record goes
        into the CommitLog first (``topic_purge``), so every record the writer appended
        before belongs to the topic's old life and every one after to its next."""
        words = self.topics_seg.words
        if tt.load_version(words) == self._topics_version:
            return
        version, topics = tt.read_topics(self.topics_seg.buf, words)
        # the first table a writer reads is only taken: a topic deleted while no writer ran
        # is not seen, so TOPICS_APPLIED stays behind and that deletion fails (undone)
        first = self._topics_version < 0
        if not first:
            for name in sorted(self.topics.keys() - topics.keys()):
                if not self._append_deletion(name):
                    return  # the table is taken once the record is written
                del self.topics[name]
        self._topics_version, self.topics = version, topics
        self._rebuild_index()
        if not first:
            cn.publish(self.cw, cn.TOPICS_APPLIED, version)

    def _append_deletion(self, name: bytes) -> bool:
        """Append the record deleting topic ``name`` and start its queues' next life; False
        while no CommitLog file can be allocated."""
        log_slot = self._queue_slot(DELETED_TOPIC_LOG.encode(), 0)
        entry = int(self.next_qoff[log_slot])
        now = time.time_ns() // 1_000_000
        try:
            phys = append_deletion(self.commitlog, name.decode(), entry, now)
        except DiskFullError as exc:
            self._allocation_failed(exc)
            return False
        self.next_qoff[log_slot] += 1
        self._start_next_life(name)
        log.info("topic %s deleted: its stored messages are purged at CommitLog offset %d",
                 name.decode(), phys)  # fmt: skip
        self.write_offset = self.commitlog.max_offset
        cn.publish(self.cw, cn.WRITE_TIMESTAMP, now)
        cn.publish(self.cw, cn.WRITE_OFFSET, self.write_offset)
        self.followers.wake()
        return True

    def _start_next_life(self, name: bytes) -> None:
        """A deleted topic's queues go on from the next consume-queue file boundary."""
        for slot in self.directory.queues_of(name).values():
            self.next_qoff[slot] = next_life_offset(int(self.next_qoff[slot]), self.cq_units)

    def _rebuild_index(self) -> None:
        """The kernel's topic index from the topic table: writable topics with the queue
        slots used so far (the others get theirs on first use), the rest with the reason
        their records are refused. Names refused as unknown are forgotten here."""
        index = self.index
        index.clear()
        for name, (_, write_q, perm) in self.topics.items():
            if not perm & PERM_WRITE:
                index.set(name, ring.REASON_NO_PERMISSION, write_q, None)
            else:
                pool = self._slot_pools.get((name, write_q))
                index.set(name, 0, write_q, None if pool is None else pool.tolist())
        index.build()

    # -- the loop ---------------------------------------------------------------------------

    def has_work(self) -> bool:
        return (
            self.rw[rg.VERSION] != self._registry_version
            or self.tw[tt.VERSION] != self._topics_version
            or any(v.w[ring.TAIL] != v.head for v in self.views)
            or (self.dispatch is not None and self.dispatch.has_work())
        )

    def do_work(self) -> int:
        """One pass: every ring with published bytes is drained (a ring whose TAIL has not
        moved costs one word read; the broker keeps several rings of its own that are
        mostly idle)."""
        if self.rw[rg.VERSION] != self._registry_version:
            self._refresh_rings()
        self._refresh_topics()
        cleaned = self.cw[cn.MIN_PHYSICAL_OFFSET]
        if cleaned > self._cleaned_to:  # the cleaner deleted files: unmap them
            self._cleaned_to = cleaned
            self.commitlog.queue.release_below(cleaned)
        work = 0
        for view in self.views:
            if view.w[ring.TAIL] != view.head:
                work += self._drain_ring(view)
        if self.dispatch is not None:  # after the answers, so no sender waits for it
            dispatched = self.dispatch.do_work()
            work = work or dispatched
        if work:  # after the answers, so no sender waits for them
            queue = self.commitlog.queue
            queue.unmap_below(self.write_offset)  # the files it rolled off
            queue.prefault_ahead()
        return work

    def _drain_ring(self, view: RingView) -> int:
        """Append what the ring published. The writer's counters name the ring while it is
        read, so the supervisor can fence it if the writer dies on its bytes."""
        cw = self.cw
        cw[cn.WRITER_RING_GEN] = view.gen
        cw[cn.WRITER_RING] = view.slot + 1
        try:
            tail, seq_tail = ring.load_tail(view.w)
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
            cw[cn.WRITER_RING] = 0

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
            self.views = tuple(self.rings.values())
        view.close()

    def _log_fence(self, slot: int, gen: int, code: int) -> None:
        log.error("producer ring %d.%d fenced: %s", slot, gen, ring.FENCES[code])
        cn.publish(self.words, cn.REJECTED, int(self.words[cn.REJECTED]) + 1)

    def _drain_once(self, view: RingView, tail: int, seq_tail: int) -> int:
        """One pass over what ``view``'s ring published (up to ``MAX_PASS_RECORDS``);
        returns the records answered (0 when waiting for a topic to be created)."""
        cap = view.capacity
        local = view.head & (cap - 1)
        base = view.head - local
        limit = min(cap, local + (tail - view.head))
        published = seq_tail - view.seq
        todo = min(published, MAX_PASS_RECORDS)
        args, out = self.args, self.out
        now = time.time_ns() // 1_000_000
        args.store_ts = now
        args.limit = limit
        args.src_base = base
        refuse = self._store_refuses()
        mf = None if refuse else self._file_to_append()
        index = self.index
        p, n, kept = local, 0, 0
        while True:
            if mf is None:  # refuse puts: every record is answered SERVICE_NOT_AVAILABLE
                args.refuse = ring.REASON_SERVICE_NOT_AVAILABLE
                dst, dst_pos = _NO_FILE, 0
                args.dst_pos = args.dst_room = args.dst_base = 0
            else:
                args.refuse = 0
                dst, dst_pos = mf.buf, mf.wrote_position
                args.dst_pos = dst_pos
                args.dst_room = mf.size - dst_pos
                args.dst_base = mf.file_from_offset
            args.start = p
            args.max_records = todo - n
            args.seq = view.seq + n
            info = index.info if not view.account else self.ring_acl.info(view.account, index)
            ra.append_from_ring(
                view.data, index.names, index.name_offs, index.table, info, index.slots,
                dst, self.next_qoff, view.completions, self.params, self.result,
            )  # fmt: skip
            n += out.records
            kept += out.kept
            used, code, p = out.file_bytes, out.code, out.stop
            if mf is not None:
                mf.wrote_position = dst_pos + used
            if code == ra.APPEND_FILE_FULL:
                if dst_pos == 0 and used == 0:  # cannot happen: max_body fits a file
                    raise ShmqError(f"a ring record at {base + p} does not fit an empty file")
                mf = self._file_to_append(mf)
            elif code == ra.APPEND_TOPIC:
                if not self._resolve_topic(view, base, p):
                    break  # waiting for the supervisor to create it
            else:
                break
        if n == 0:
            return self._stopped_without_records(view, code, base, p, tail, seq_tail, published)
        end = base + p
        new_woff = self.commitlog.max_offset
        ring.write_journal(view.w, end, view.seq + n, new_woff)
        cw = self.cw
        cn.publish(cw, cn.WRITE_TIMESTAMP, now)
        cn.publish(cw, cn.WRITE_OFFSET, new_woff)
        cn.publish(cw, cn.MSGS_IN, cw[cn.MSGS_IN] + kept)
        if kept < n:
            cn.publish(cw, cn.REJECTED, cw[cn.REJECTED] + n - kept)
        self.write_offset = new_woff
        view.head, view.seq = end, view.seq + n
        ring.publish_head(view.w, view.head, view.seq)
        fence()
        rw, reg = self.rw, view.reg_base
        parked = rw[reg + rg.PARKED]
        if parked:
            post_parked(view.sem, parked)
        if rw[reg + rg.ANSWER_WAITERS]:
            self.idle.linger()
        self.followers.wake()
        return n

    def _stopped_without_records(
        self, view: RingView, code: int, base: int, p: int, tail: int, seq_tail: int,
        published: int,
    ) -> int:  # fmt: skip
        """A pass that answered nothing: the lap's closing blank, a topic being created, a
        record beyond the count the producer published, or bytes that are not records."""
        if code == rec.PARSE_BLANK:
            view.head = base + view.capacity
            ring.publish_head(view.words, view.head, view.seq)
            return 1
        if code == ra.APPEND_TOPIC:
            return 0
        if code == ra.APPEND_DONE and published <= 0:
            self._fence(view, ring.FENCE_SEQ)  # more records than SEQ_TAIL says
            return 0
        why = rec.PARSE_REASONS[code] if code < len(rec.PARSE_REASONS) else f"code {code}"
        self._reject_rest(view, tail, seq_tail, why)
        return 1

    def _file_to_append(self, full=None):
        """The CommitLog file to append to (after closing ``full`` with a blank record), or
        None, refusing puts, while files cannot be allocated."""
        try:
            mf = self.commitlog.writable_file() if full is None else self.commitlog.close_file(full)
        except DiskFullError as exc:
            self._allocation_failed(exc)
            return None
        self._allocation_ok()
        return mf

    def _allocation_ok(self) -> None:
        if self.words[cn.ALLOC_FAILED]:
            log.warning("CommitLog files can be allocated again: puts accepted")
            cn.publish(self.words, cn.ALLOC_FAILED, 0)

    def _resolve_topic(self, view: RingView, base: int, p: int) -> bool:
        """The record at ``p`` of this lap (ring position ``base + p``, which the kernel
        just parsed) names a topic the kernel's index cannot answer for: give it queue
        slots, refuse it as unknown, or ask the supervisor to create it. True when the index
        changed (append again), False while a creation is pending. A name no topic may have
        (RocketMQ's 127-byte limit) is refused, never asked for."""
        row = self._row
        rec.parse_one(view.data, p, view.capacity, base, False, row, 0)
        start = int(row["topic_start"][0])
        name = view.data[start : start + int(row["topic_len"][0])].tobytes()
        cfg = self.topics.get(name)
        denied = bool(view.account) and not self.ring_acl.may_publish(view.account, name)
        if (
            cfg is None
            and not denied  # no topic is created for an account that may not publish it
            and len(name) <= MAX_TOPIC_LENGTH
            and self._waiting_for_topic(name, view.slot)
        ):
            return False
        cfg = self.topics.get(name)  # created meanwhile (the table was re-read)
        index = self.index
        if cfg is None:
            if len(index) >= len(self.topics) + MAX_UNKNOWN_TOPICS:
                self._rebuild_index()
            index.set(name, ring.REASON_TOPIC_NOT_EXIST, 0, None)
        elif not cfg[2] & PERM_WRITE:
            index.set(name, ring.REASON_NO_PERMISSION, cfg[1], None)
        else:
            index.set(name, 0, cfg[1], self._topic_slots(name, cfg[1]).tolist())
        index.build()
        return True

    def _store_refuses(self) -> bool:
        """Whether puts are refused now (disk over 90 % per the cleaner, a failed fsync, or a
        CommitLog file that could not be allocated less than a second ago: the next try
        comes after that second)."""
        cw = self.cw
        if cw[cn.DISK_FULL] or cw[cn.FLUSH_FAILED]:
            return True
        return bool(cw[cn.ALLOC_FAILED]) and time.monotonic() < self._alloc_retry_at

    def _allocation_failed(self, exc: DiskFullError) -> None:
        """A new CommitLog file could not get disk blocks: refuse puts (producers see
        SERVICE_NOT_AVAILABLE and the reason), keep serving everything else, retry in 1 s."""
        if not self.words[cn.ALLOC_FAILED]:
            log.error("puts refused until disk space is back: %s", exc)
        cn.publish(self.words, cn.ALLOC_FAILED, 1)
        self._alloc_retry_at = time.monotonic() + ALLOC_RETRY_S

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
            ra.reject_all(view.completions, view.seq, seq_tail - view.seq, ring.REASON_CORRUPT)
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
        if self.dispatch is not None:
            self.dispatch.drain()

    def close(self) -> None:
        if self.dispatch is not None:
            self.dispatch.close()
        for view in self.rings.values():
            view.close()
        self.rings.clear()
        self.commitlog.close()
        self.followers.close()
        self.supervisor_sem.close()
        self.sem.close()
        self.cw.release()
        self.rw.release()
        self.tw.release()
        for seg in (self.topics_seg, self.queues_seg, self.registry):
            seg.close()
