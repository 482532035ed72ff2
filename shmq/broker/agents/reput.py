"""The reput agent: dispatches CommitLog records into consume queues and the index.

It reads the CommitLog read-only up to the writer's published write offset (in SYNC_FLUSH
only up to the flushed offset, so consumers never see what a crash could take back), then
publishes per-queue max offsets in the queue table, then its dispatched offset, and wakes
the consumers parked on a queue that advanced. It owns the consume-queue and index files and
flushes them every ``flushIntervalConsumeQueue``.

It runs in a process of its own on a slave; on a master the agent that makes records
visible runs it once its producers are answered (``dispatchInline``): the writer after each
pass in ASYNC_FLUSH, the flush agent after each flush in SYNC_FLUSH. The same object and
files, one parked hand-off fewer between a producer and its consumers, and one process
fewer taking turns on a small host's cores.
"""

from __future__ import annotations

import functools
import logging
import os
import time

import numpy as np

from shmq.broker.agents.env import AgentEnv
from shmq.broker.config.broker_config import RECORD_OVERHEAD_MAX
from shmq.codec import record as rec
from shmq.delay_topics import SCHEDULE_TOPIC, TIMER_TOPIC
from shmq.errors import DiskFullError
from shmq.ipc import counters as cn
from shmq.ipc import queue_table as qt
from shmq.ipc import registry as rg
from shmq.ipc.parking import post_parked
from shmq.ipc.segment import Segment, close_gone, fence, open_semaphore, post
from shmq.store.commitlog import SCAN_ROWS, CommitLog
from shmq.store.dispatch.dispatcher import Dispatcher
from shmq.store.index.service import IndexService
from shmq.store.mapped_file_queue import first_file_from
from shmq.store.warm_up import TOPIC as SCRATCH_TOPIC
from shmq.store.warm_up import scratch_store

log = logging.getLogger(__name__)
DISK_FULL_RETRY_S = 1.0

DELAYED_TOPICS = (SCHEDULE_TOPIC, TIMER_TOPIC)  # a message there wakes the schedule agent
MAX_DISPATCH_BYTES = 4 << 20  # per pass, so consumers see progress during a backlog


@functools.cache  # once a process: an agent forked from the agent template has run it
def warm_up() -> None:
    """Run reput's path once on a scratch store (a read-only CommitLog scan, consume-queue
    and index writes) so its numba kernels are compiled, or loaded from the cache, before the
    broker serves anyone: a cold compile takes seconds, and consumers would wait for it."""
    with scratch_store() as (tmp, store):
        store.get(SCRATCH_TOPIC, 0, 0)  # the consumers' read path, compiled into the cache
        second = store.put(SCRATCH_TOPIC, 0, b"y", keys=["k"]).physical_offset  # not dispatched
        end = store.max_physical_offset
        cfg = store.config
        commitlog = CommitLog(os.path.join(tmp, "commitlog"), 64 * 1024, readonly=True)
        index = IndexService(os.path.join(tmp, "index2"), 16, 32, 64)
        dispatcher = Dispatcher(os.path.join(tmp, "cq2"), cfg.consume_queue_file_size, index)
        rows = np.empty(SCAN_ROWS, dtype=rec.RECORD_ROW)
        try:  # the general path, then the run that continues its queue
            dispatcher.dispatch_range(commitlog, 0, second, rows)
            dispatcher.dispatch_range(commitlog, second, end, rows)
        finally:
            dispatcher.close()
            index.close()
            commitlog.close()


class Reput:
    def __init__(self, env: AgentEnv) -> None:
        self.env = env
        warm_up()
        store = env.config.store
        root = store.store_path_root_dir
        self.words = env.words
        self.commitlog = CommitLog(
            os.path.join(root, "commitlog"), store.mapped_file_size_commit_log, readonly=True
        )
        self.index = IndexService(
            os.path.join(root, "index"),
            store.max_hash_slot_num,
            store.max_index_num,
            store.max_msgs_num_batch,
            on_file_full=lambda ts: cn.publish(self.words, cn.INDEX_TIMESTAMP, ts),
            disk_reserve=store.mapped_file_size_commit_log,  # the CommitLog's next file first
        )
        self.index.load(True, 0)
        self.dispatcher = Dispatcher(
            os.path.join(root, "consumequeue"),
            store.consume_queue_file_size,
            self.index if store.message_index_enable else None,
            store.delay_levels_ms,
        )
        self.dispatcher.load()
        self.dispatched = cn.load(self.words, cn.DISPATCHED_OFFSET)
        for cq in self.dispatcher.consume_queues.values():
            cq.recover()  # after a reput crash: find each queue's end again
        self.queues_seg = Segment.attach(env.names.queues)
        self.directory = qt.QueueDirectory(self.queues_seg.buf, self.queues_seg.words)
        self.maxima = qt.max_offsets(self.queues_seg.buf)
        self._slots: dict[tuple[str, int], int] = {}  # (topic, queue id) -> queue-table slot
        self._rows = np.empty(SCAN_ROWS, dtype=rec.RECORD_ROW)  # kept for each scan
        self.registry = Segment.attach(env.names.registry)
        # word access without numpy scalars for what every pass reads or publishes
        self.cw = memoryview(env.counters.mm).cast("q")
        self.rw = memoryview(self.registry.mm).cast("q")
        self.sync_flush = store.sync_flush
        self.is_slave = env.config.is_slave
        self.flush_interval_ms = store.flush_interval_consume_queue
        self.least_pages = store.flush_consume_queue_least_pages
        self._last_flush = time.monotonic()
        self._consumer_sems: dict[tuple[int, int], object] = {}
        self._schedule_sem = None
        self._consumers_version = -1
        self._consumers: list[tuple[int, int, int]] = []
        self._disk_full_until = 0.0
        self._cleaned_to = 0
        # a pass reads at most this much, but always a whole record of the largest size
        self.window = MAX_DISPATCH_BYTES + store.max_message_size + RECORD_OVERHEAD_MAX

    def limit(self) -> int:
        write = self.cw[cn.WRITE_OFFSET]
        if self.sync_flush:
            return min(write, self.cw[cn.FLUSHED_OFFSET])
        return write

    def has_work(self) -> bool:
        return self.limit() > self.dispatched and time.monotonic() >= self._disk_full_until

    def do_work(self) -> int:
        cleaned = self.cw[cn.MIN_PHYSICAL_OFFSET]
        if cleaned > self._cleaned_to:
            self._clean_below(cleaned)
        if time.monotonic() < self._disk_full_until:
            return 0
        try:
            work = self._dispatch(self.limit())
        except DiskFullError as exc:
            # a consume-queue or index file has no room: nothing is lost (the CommitLog holds
            # the records and dispatch is idempotent), consumers wait; retry in a second
            if not self._disk_full_until:
                log.error("reput paused: %s", exc)
            self._disk_full_until = time.monotonic() + DISK_FULL_RETRY_S
            return 0
        if self._disk_full_until:
            log.warning("reput resumed: disk space is back")
            self._disk_full_until = 0.0
        now = time.monotonic()
        if (now - self._last_flush) * 1000 >= self.flush_interval_ms:
            self._last_flush = now
            self._flush(self.least_pages)
        return work

    def _clean_below(self, min_phys: int) -> None:
        """The cleaner deleted CommitLog files below ``min_phys``: unmap them, and delete
        the consume-queue and index files (reput's own) that only point below it."""
        self._cleaned_to = min_phys
        self.commitlog.queue.release_below(min_phys)
        cq_files = sum(
            cq.delete_expired(min_phys) for cq in self.dispatcher.consume_queues.values()
        )
        index_files = self.index.delete_expired(min_phys)
        if cq_files or index_files:
            log.info("deleted %d consume-queue and %d index file(s) below CommitLog offset %d",
                     cq_files, index_files, min_phys)  # fmt: skip

    def _dispatch(self, limit: int) -> int:
        if limit <= self.dispatched:
            return 0
        if self.commitlog.queue.find_file(self.dispatched) is None:
            self._skip_to_first_file(limit)
        end = min(limit, self.dispatched + self.window)
        total, touched_all, last_ts, position, code = self.dispatcher.dispatch_range(
            self.commitlog, self.dispatched, end, self._rows
        )
        # A record cut by the 4 MiB window looks corrupt; only a cut at the limit is real.
        if code == rec.PARSE_CORRUPT and position < end == limit:
            log.error("CommitLog record at %d does not validate: reput waits there", position)
        if any(topic in DELAYED_TOPICS for topic, _ in touched_all):
            self._wake_schedule()
        changed = set()
        for key, cq in touched_all.items():
            slot = self._slots.get(key)
            if slot is None:
                slot = self._queue_slot(*key)
            if slot >= 0:
                self.maxima[slot] = cq.max_offset
                changed.add(slot)
        before = self.dispatched
        self.dispatched = max(self.dispatched, position)
        self.commitlog.queue.unmap_below(self.dispatched)  # files it dispatched to the end
        cw = self.cw
        if last_ts:
            cn.publish(cw, cn.LOGICS_TIMESTAMP, last_ts)
        cn.publish(cw, cn.MSGS_DISPATCHED, cw[cn.MSGS_DISPATCHED] + total)
        cn.publish(cw, cn.DISPATCHED_OFFSET, self.dispatched)
        if changed:
            fence()
            self._wake_consumers(changed)
        return total or int(self.dispatched > before)

    def _queue_slot(self, topic: str, queue_id: int) -> int:
        """The queue-table slot of a queue (-1 when the table has none for it), remembered
        once it has one."""
        raw = topic.encode()
        slot = self.directory.slot(raw, queue_id)
        if slot < 0 and self.is_slave:  # no writer adds a slave's queues: reput does
            slot = qt.add_queue(self.queues_seg.buf, self.queues_seg.words, raw, queue_id)
            self.directory.slots[(raw, queue_id)] = slot
        if slot >= 0:
            self._slots[(topic, queue_id)] = slot
        return slot

    def _skip_to_first_file(self, limit: int) -> None:
        """No CommitLog file holds the dispatched offset: a slave that started empty
        receives the master's CommitLog from a later file on; dispatch starts there."""
        start = first_file_from(self.commitlog.queue.directory, self.dispatched, limit)
        if start is not None:
            log.info("no CommitLog file at %d: dispatch starts at %d", self.dispatched, start)
            self.dispatched = start

    def _active_consumers(self) -> list[tuple[int, int, int]]:
        """``[(slot, word base, gen)]`` of registered consumers, re-read only when the
        registry changed (this runs after every dispatch pass); the semaphores of consumers
        that left are closed then, so the cache never outgrows the registered clients."""
        rwords = self.registry.words
        version = self.rw[rg.VERSION]
        if version != self._consumers_version:
            self._consumers_version = version
            cfg = self.env.config
            self._consumers = [
                (i, base, int(rwords[base + rg.GEN]))
                for i in range(cfg.max_consumers)
                if int(rwords[(base := rg.consumer_base(cfg.max_producers, i)) + rg.STATE])
                == rg.ACTIVE
            ]
            close_gone(self._consumer_sems, {(i, gen) for i, _, gen in self._consumers})
        return self._consumers

    def _wake_consumers(self, changed: set[int]) -> None:
        rwords = self.rw
        for i, base, gen in self._active_consumers():
            parked = rg.wants_wake(rwords, base, changed)
            if not parked:
                continue
            key = (i, gen)
            sem = self._consumer_sems.get(key)
            if sem is None:
                try:
                    sem = open_semaphore(rg.consumer_sem_name(self.env.names.prefix, *key))
                except Exception:  # the consumer is leaving
                    continue
                self._consumer_sems[key] = sem
            post_parked(sem, parked)

    def _wake_schedule(self) -> None:
        """A schedule message arrived: the schedule agent may sleep past its due time."""
        if cn.load(self.words, cn.agent_word("schedule", cn.AGENT_PARKED)):
            if self._schedule_sem is None:
                self._schedule_sem = open_semaphore(self.env.names.agent_sem("schedule"))
            post(self._schedule_sem)

    def _flush(self, least_pages: int) -> None:
        self.dispatcher.flush(least_pages)
        if least_pages == 0:
            self.index.flush()

    def drain(self) -> None:
        """Clean stop: dispatch everything the writer published, then flush."""
        while self._dispatch(self.limit()):
            pass
        self._flush(0)

    def close(self) -> None:
        for sem in self._consumer_sems.values():
            sem.close()
        if self._schedule_sem is not None:
            self._schedule_sem.close()
        self.dispatcher.close()
        self.index.close()
        self.commitlog.close()
        self.cw.release()
        self.rw.release()
        self.queues_seg.close()
        self.registry.close()
