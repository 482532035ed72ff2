"""The cleaner agent: RocketMQ's clean services as a broker process.

Every ``cleanResourceInterval`` (10 s, the first round ``cleanResourceInitialDelay`` after
start) it measures the store's disk, publishes the used ratio and the disk-full flag (over
``diskSpaceWarningLevelRatio``, 90 %: the writer refuses puts until it drops back), and
deletes expired CommitLog files by the policy of ``shmq.store.cleanup``. An admin's
``deleteExpiredCommitLog`` (a new ``MANUAL_DELETES`` count) starts a round at once, and it
and the next rounds, ``MANUAL_DELETE_ROUNDS`` in all as in RocketMQ, delete expired files
whatever ``deleteWhen`` says.

Files of other owners stay with their owners: the cleaner publishes the CommitLog's new
first offset (``MIN_PHYSICAL_OFFSET``); reput deletes the consume-queue and index files
below it, and every reader unmaps the files below it, which frees their disk space.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time

from shmq.broker.agents.env import AgentEnv
from shmq.ipc import counters as cn
from shmq.ipc.idle import IdleConfig, IdleStrategy
from shmq.ipc.segment import open_semaphore
from shmq.store.cleanup import CleanDecision, commitlog_files_to_delete, disk_used_ratio
from shmq.store.mapped_file import file_name_to_offset

log = logging.getLogger(__name__)

PARK_US = 200_000  # how often a parked cleaner looks at the clock and the stop flag
MANUAL_DELETE_ROUNDS = 20  # RocketMQ's MAX_MANUAL_DELETE_FILE_TIMES


class Cleaner:
    def __init__(self, env: AgentEnv) -> None:
        self.env = env
        self.store = env.config.store
        self.words = env.words
        self.root = self.store.store_path_root_dir
        self.commitlog_dir = os.path.join(self.root, "commitlog")
        self.next_round = time.monotonic() + self.store.clean_resource_initial_delay / 1000
        self.sem = open_semaphore(env.names.agent_sem("cleaner"))
        self.idle = IdleStrategy(IdleConfig("park", park_us=PARK_US), self.sem)
        self.rounds = 0
        self.manual_seen = cn.load(self.words, cn.MANUAL_DELETES)  # asked before: not now
        self.manual_rounds = 0

    def has_work(self) -> bool:
        return time.monotonic() >= self.next_round or self._manual_asked()

    def _manual_asked(self) -> bool:
        return cn.load(self.words, cn.MANUAL_DELETES) != self.manual_seen

    def do_work(self) -> int:
        if self._manual_asked():
            self.manual_seen = cn.load(self.words, cn.MANUAL_DELETES)
            self.manual_rounds = MANUAL_DELETE_ROUNDS
            log.info("deleting expired CommitLog files now, as an admin asked")
        elif not self.has_work():
            return 0
        self.next_round = time.monotonic() + self.store.clean_resource_interval / 1000
        self.clean_round(time.time())
        return 1

    def clean_round(self, now: float) -> int:
        """One round: disk status, then CommitLog files; returns how many were deleted."""
        self.rounds += 1
        manual = self.manual_rounds > 0
        self.manual_rounds = max(0, self.manual_rounds - 1)
        decision = CleanDecision.of(self.store, now, disk_used_ratio(self.root), manual)
        self._publish_disk(decision)
        files = self._commitlog_files()
        if not files:
            return 0
        # only files wholly written, dispatched and flushed: the current file is the writer's,
        # and reput must have indexed a file's records before it goes
        words, size = self.words, self.store.mapped_file_size_commit_log
        done = min(cn.load(words, f) for f in (cn.WRITE_OFFSET, cn.DISPATCHED_OFFSET,
                                                  cn.FLUSHED_OFFSET))  # fmt: skip
        files = [f for f in files if f[0] + size <= done]
        files.append((done, "", now))  # stands for the current file
        count = commitlog_files_to_delete([m for _, _, m in files], self.store, now, decision)
        for start, path, _ in files[:count]:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            log.info("deleted CommitLog file %s (%s)", os.path.basename(path),
                     "disk full" if decision.clean_immediately else "expired")  # fmt: skip
            cn.publish(words, cn.MIN_PHYSICAL_OFFSET, start + size)
        return count

    def _commitlog_files(self) -> list[tuple[int, str, float]]:
        """``(start offset, path, mtime)`` of the CommitLog files, oldest first."""
        out = []
        try:
            names = os.listdir(self.commitlog_dir)
        except FileNotFoundError:
            return []
        for name in names:
            if len(name) != 20 or not name.isdigit():
                continue
            path = os.path.join(self.commitlog_dir, name)
            try:
                out.append((file_name_to_offset(name), path, os.stat(path).st_mtime))
            except FileNotFoundError:
                continue
        return sorted(out)

    def _publish_disk(self, decision: CleanDecision) -> None:
        words = self.words
        cn.publish(words, cn.DISK_USED_PERMILLE, int(decision.disk_used * 1000))
        if decision.disk_full != bool(words[cn.DISK_FULL]):
            if decision.disk_full:
                log.error(
                    "disk %.1f %% full: puts refused until it is below %d %%",
                    decision.disk_used * 100, self.store.disk_space_warning_level_ratio,
                )  # fmt: skip
            else:
                log.warning("disk %.1f %% full: puts accepted again", decision.disk_used * 100)
            cn.publish(words, cn.DISK_FULL, int(decision.disk_full))

    def drain(self) -> None:
        pass

    def close(self) -> None:
        self.sem.close()
