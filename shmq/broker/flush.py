"""The flush agent: makes the CommitLog durable and publishes the flushed offset.

ASYNC_FLUSH (RocketMQ's ``FlushRealTimeService``): every ``flushIntervalCommitLog`` it
flushes when at least ``flushCommitLogLeastPages`` pages are dirty, and everything every
``flushCommitLogThoroughInterval``. SYNC_FLUSH (``GroupCommitService``): whenever the write
offset moved, it flushes all of it at once, so every producer waiting on that range is
answered by one ``fdatasync`` (group commit). It then wakes reput (which in SYNC_FLUSH never
passes the flushed offset) and the producers parked on the flush. It also owns the checkpoint.
"""

from __future__ import annotations

import logging
import os
import time

from shmq.broker.agent import AgentEnv
from shmq.ipc import counters as cn
from shmq.ipc import registry as rg
from shmq.ipc.idle import IdleConfig, IdleStrategy
from shmq.ipc.parking import post_parked
from shmq.ipc.segment import Segment, close_gone, fence, open_semaphore, post
from shmq.store.checkpoint import Checkpoint
from shmq.store.mapped_file import PAGE_SIZE, offset_to_file_name

log = logging.getLogger(__name__)

CHECKPOINT_INTERVAL_MS = 1_000


class Flush:
    def __init__(self, env: AgentEnv) -> None:
        self.env = env
        store = env.config.store
        self.store = store
        self.words = env.words
        self.dir = os.path.join(store.store_path_root_dir, "commitlog")
        self.file_size = store.mapped_file_size_commit_log
        self.sync = store.sync_flush
        self.flushed = cn.load(self.words, cn.FLUSHED_OFFSET)
        self.checkpoint = Checkpoint(os.path.join(store.store_path_root_dir, "checkpoint"))
        self.registry = Segment.attach(env.names.registry)
        self.reput_sem = open_semaphore(env.names.agent_sem("reput"))
        self._fds: dict[int, int] = {}
        self._producer_sems: dict[tuple[int, int], object] = {}
        self._registry_version = -1
        self._last_thorough = time.monotonic()
        self._last_checkpoint = 0.0
        if not self.sync:
            sem = open_semaphore(env.names.agent_sem("flush"))
            every = IdleConfig("park", park_us=store.flush_interval_commit_log * 1000)
            self.idle = IdleStrategy(every, sem)

    def has_work(self) -> bool:
        return (
            self.sync
            and not self.words[cn.FLUSH_FAILED]
            and cn.load(self.words, cn.WRITE_OFFSET) > self.flushed
        )

    def do_work(self) -> int:
        if self.words[cn.FLUSH_FAILED]:
            return 0  # nothing is known to be on disk past the last good flush
        write = cn.load(self.words, cn.WRITE_OFFSET)
        if write <= self.flushed:
            self._maybe_checkpoint()
            return 0
        if not self.sync:
            now = time.monotonic()
            thorough = (now - self._last_thorough) * 1000 >= (
                self.store.flush_commit_log_thorough_interval
            )
            dirty_pages = write // PAGE_SIZE - self.flushed // PAGE_SIZE
            if not thorough and dirty_pages < self.store.flush_commit_log_least_pages:
                return 0
            self._last_thorough = now if thorough else self._last_thorough
        return self._flush_to(write)

    def _flush_to(self, write: int) -> int:
        timestamp = cn.load(self.words, cn.WRITE_TIMESTAMP)
        try:
            start = self.flushed - self.flushed % self.file_size
            for file_start in range(start, write, self.file_size):
                os.fdatasync(self._fd(file_start))
        except OSError as exc:
            # After a failed fdatasync the kernel may have dropped the dirty pages and a
            # retry "succeeds" without writing them (fsyncgate): never flush again, never
            # publish a flushed offset past this point; the broker refuses puts until a
            # restart, whose recovery reads what really is on disk.
            cn.publish(self.words, cn.FLUSH_FAILED, 1)
            cn.publish(self.words, cn.FLUSH_ERRORS, cn.load(self.words, cn.FLUSH_ERRORS) + 1)
            log.critical(
                "flush of the CommitLog up to %d failed: %s; puts are refused and SYNC_FLUSH "
                "sends fail until the broker is restarted",
                write,
                exc,
            )
            fence()
            self._wake_producers(write)  # they see FLUSH_ERRORS and fail the send
            return 0
        self.flushed = write
        cn.publish(self.words, cn.FLUSHED_TIMESTAMP, timestamp)
        cn.publish(self.words, cn.FLUSHES, cn.load(self.words, cn.FLUSHES) + 1)
        cn.publish(self.words, cn.FLUSHED_OFFSET, write)
        fence()
        if self.sync and self.words[cn.REPUT_PARKED]:
            post(self.reput_sem)
        self._wake_producers(write)
        self._maybe_checkpoint()
        return 1

    def _fd(self, file_start: int) -> int:
        fd = self._fds.get(file_start)
        if fd is None:
            fd = os.open(os.path.join(self.dir, offset_to_file_name(file_start)), os.O_RDONLY)
            for old in [s for s in self._fds if s < file_start]:
                os.close(self._fds.pop(old))
            self._fds[file_start] = fd
        return fd

    def _wake_producers(self, flushed: int) -> None:
        words = self.registry.words
        active = rg.active_producers(words, self.env.config.max_producers)
        version = int(words[rg.VERSION])
        if version != self._registry_version:  # a producer left: drop its semaphore
            self._registry_version = version
            close_gone(self._producer_sems, {(slot, gen) for slot, gen, _ in active})
        for slot, gen, _ in active:
            base = rg.producer_base(slot)
            want = int(words[base + rg.WAIT_FLUSH_OFFSET])
            parked = int(words[base + rg.PARKED])
            if parked <= 0 or not 0 < want <= flushed:
                continue
            sem = self._producer_sems.get((slot, gen))
            if sem is None:
                try:
                    sem = open_semaphore(rg.producer_sem_name(self.env.names.prefix, slot, gen))
                except Exception:  # the producer is leaving
                    continue
                self._producer_sems[(slot, gen)] = sem
            post_parked(sem, parked)

    def _maybe_checkpoint(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and (now - self._last_checkpoint) * 1000 < CHECKPOINT_INTERVAL_MS:
            return
        self._last_checkpoint = now
        cp, words = self.checkpoint, self.words
        cp.physic_msg_timestamp = max(cp.physic_msg_timestamp, cn.load(words, cn.FLUSHED_TIMESTAMP))
        cp.logics_msg_timestamp = max(cp.logics_msg_timestamp, cn.load(words, cn.LOGICS_TIMESTAMP))
        cp.index_msg_timestamp = max(cp.index_msg_timestamp, cn.load(words, cn.INDEX_TIMESTAMP))
        cp.flush()

    def drain(self) -> None:
        """Clean stop: flush everything written (retrying as RocketMQ does), checkpoint; after
        a failed flush, nothing (the next start recovers from what is on disk)."""
        if self.words[cn.FLUSH_FAILED]:
            return
        for _ in range(10):
            write = cn.load(self.words, cn.WRITE_OFFSET)
            if write <= self.flushed or self._flush_to(write):
                break
        self._maybe_checkpoint(force=True)

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        for sem in self._producer_sems.values():
            sem.close()
        self.reput_sem.close()
        self.registry.close()
        self.checkpoint.close()
