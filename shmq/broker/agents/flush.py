"""The flush agent: makes the CommitLog durable and publishes the flushed offset.

ASYNC_FLUSH (RocketMQ's ``FlushRealTimeService``): every ``flushIntervalCommitLog`` it
flushes when at least ``flushCommitLogLeastPages`` pages are dirty, and everything every
``flushCommitLogThoroughInterval``. SYNC_FLUSH (``GroupCommitService``): whenever the write
offset moved, it flushes all of it at once, so every producer waiting on that range is
answered by one ``fdatasync`` (group commit). It then wakes the producers parked on the flush
and reput (which in SYNC_FLUSH never passes the flushed offset), or with ``dispatchInline``
runs reput's dispatch itself. It also owns the checkpoint.
"""

from __future__ import annotations

import logging
import os
import time

from shmq.broker.agents.env import AgentEnv
from shmq.broker.agents.producer_wakeups import ProducerWakeups
from shmq.broker.agents.reput import Reput
from shmq.broker.agents.wakeups import AgentWakeups
from shmq.ipc import counters as cn
from shmq.ipc.idle import IdleConfig, IdleStrategy
from shmq.ipc.segment import Segment, fence, open_semaphore
from shmq.store.checkpoint import Checkpoint
from shmq.store.mapped_file import PAGE_SIZE, offset_to_file_name
from shmq.store.mapped_file_queue import first_file_from

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
        # SYNC_FLUSH: flushed bytes may be dispatched, here (dispatchInline) or by reput
        self.dispatch = Reput(env) if env.config.dispatcher == "flush" else None
        self.reput = AgentWakeups(self.words, env.names, ("reput",) if self.sync and
                                  self.dispatch is None else ())  # fmt: skip
        self._fds: dict[int, int] = {}
        self.sync_master = env.config.broker_role == "SYNC_MASTER"
        self.wakeups = ProducerWakeups(self.registry, env.names.prefix, env.config.max_producers)
        self._last_thorough = time.monotonic()
        self._last_checkpoint = 0.0
        if not self.sync:
            sem = open_semaphore(env.names.agent_sem("flush"))
            every = IdleConfig("park", park_us=store.flush_interval_commit_log * 1000)
            self.idle = IdleStrategy(every, sem)

    def has_work(self) -> bool:
        if self.dispatch is not None and self.dispatch.has_work():
            return True
        return (
            self.sync
            and not self.words[cn.FLUSH_FAILED]
            and cn.load(self.words, cn.WRITE_OFFSET) > self.flushed
        )

    def do_work(self) -> int:
        flushed = self._flush()
        if self.dispatch is not None:  # after the producers are answered
            return self.dispatch.do_work() or flushed
        return flushed

    def _flush(self) -> int:
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
            if start not in self._fds and not os.path.exists(self._path(start)):
                start = first_file_from(self.dir, start, write) or start  # a slave's start
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
            self.wakeups.wake(write)  # they see FLUSH_ERRORS and fail the send
            return 0
        self.flushed = write
        cn.publish(self.words, cn.FLUSHED_TIMESTAMP, timestamp)
        cn.publish(self.words, cn.FLUSHES, cn.load(self.words, cn.FLUSHES) + 1)
        cn.publish(self.words, cn.FLUSHED_OFFSET, write)
        fence()
        self.reput.wake()  # SYNC_FLUSH with a reput process: flushed bytes to dispatch
        self._wake_producers(write)
        self._maybe_checkpoint()
        return 1

    def _path(self, file_start: int) -> str:
        return os.path.join(self.dir, offset_to_file_name(file_start))

    def _fd(self, file_start: int) -> int:
        fd = self._fds.get(file_start)
        if fd is None:
            fd = os.open(self._path(file_start), os.O_RDONLY)
            for old in [s for s in self._fds if s < file_start]:
                os.close(self._fds.pop(old))
            self._fds[file_start] = fd
        return fd

    def _wake_producers(self, flushed: int) -> None:
        """Wake the producers this flush released (with SYNC_MASTER only those the slave
        acknowledged too; the HA agent wakes the rest when the ack comes)."""
        if self.sync_master:
            flushed = min(flushed, cn.load(self.words, cn.CONFIRMED_OFFSET))
        self.wakeups.wake(flushed)

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
        if self.dispatch is not None:
            self.dispatch.drain()
        self._maybe_checkpoint(force=True)

    def close(self) -> None:
        if self.dispatch is not None:
            self.dispatch.close()
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        self.wakeups.close()
        self.reput.close()
        self.registry.close()
        self.checkpoint.close()
