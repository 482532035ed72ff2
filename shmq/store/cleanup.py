"""File cleanup, as RocketMQ's ``CleanCommitLogService`` and ``CleanConsumeQueueService``.

CommitLog files are deleted oldest first, never the one being written, when the local hour is
one of ``deleteWhen`` or the disk is fuller than ``diskMaxUsedSpaceRatio``: a file goes once
it is older than ``fileReservedTime`` hours, or at once when the disk is fuller than
``diskSpaceCleanForciblyRatio``; at most ``deleteFilesBatchMax`` per round, stopping at the
first file that must stay. Then consume-queue and index files wholly below the new minimum
offset go, and each queue's minimum offset moves to its first surviving message. Over
``diskSpaceWarningLevelRatio`` the disk counts as full and puts are refused.

``commitlog_files_to_delete`` is the one policy: ``MessageStore.clean_expired`` applies it
to a store opened in this process, the broker's cleaner agent to the files on disk while the
writer and reput own them (they drop what the cleaner deleted).
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shmq.config import MessageStoreConfig

if TYPE_CHECKING:
    from shmq.store.message_store import MessageStore

log = logging.getLogger(__name__)


def disk_used_ratio(path: str) -> float:
    usage = shutil.disk_usage(path)
    return usage.used / usage.total if usage.total else 0.0


def is_time_to_delete(delete_when: str, now: float) -> bool:
    hour = time.localtime(now).tm_hour
    return any(int(h) == hour for h in delete_when.split(";") if h.strip())


@dataclass(frozen=True)
class CleanDecision:
    """What one round may do, from the clock and the disk's used ratio."""

    disk_used: float
    time_to_delete: bool
    space_to_delete: bool
    clean_immediately: bool
    disk_full: bool
    manual: bool = False  # asked by an admin (mqadmin deleteExpiredCommitLog)

    @property
    def delete(self) -> bool:
        return self.time_to_delete or self.space_to_delete or self.manual

    @classmethod
    def of(
        cls, cfg: MessageStoreConfig, now: float, ratio: float, manual: bool = False
    ) -> CleanDecision:
        return cls(
            manual=manual,
            disk_used=ratio,
            time_to_delete=is_time_to_delete(cfg.delete_when, now),
            space_to_delete=ratio > cfg.disk_max_used_space_ratio / 100,
            clean_immediately=cfg.clean_file_forcibly_enable
            and ratio > cfg.disk_space_clean_forcibly_ratio / 100,
            disk_full=ratio > cfg.disk_space_warning_level_ratio / 100,
        )


def commitlog_files_to_delete(
    mtimes: Sequence[float], cfg: MessageStoreConfig, now: float, decision: CleanDecision
) -> int:
    """How many of the oldest CommitLog files (modification times ``mtimes``, oldest first,
    the last one being written) this round deletes."""
    if not decision.delete:
        return 0
    reserved_s = cfg.file_reserved_time * 3600
    count = 0
    for mtime in mtimes[:-1][: cfg.delete_files_batch_max]:
        if not (decision.clean_immediately or now >= mtime + reserved_s):
            break
        count += 1
    return count


def clean_expired(store: MessageStore, now: float, disk_used: float | None) -> dict[str, Any]:
    cfg = store.config
    ratio = disk_used_ratio(store.root) if disk_used is None else disk_used
    decision = CleanDecision.of(cfg, now, ratio)
    report: dict[str, Any] = {
        "disk_used": ratio,
        "time_to_delete": decision.time_to_delete,
        "space_to_delete": decision.space_to_delete,
        "clean_immediately": decision.clean_immediately,
        "commitlog_files": 0,
        "consume_queue_files": 0,
        "index_files": 0,
    }
    if not decision.delete:
        return report
    files = store.commitlog.queue.files
    count = commitlog_files_to_delete([mf.last_modified for mf in files], cfg, now, decision)
    if count:
        gone = store.commitlog.queue.delete_first_files(count)
        log.info(
            "deleted %d commitlog file(s) [%d, %d) (%s)",
            len(gone),
            gone[0].file_from_offset,
            gone[-1].file_end_offset,
            "disk full" if decision.clean_immediately else "expired",
        )
    report["commitlog_files"] = count
    min_phys = store.commitlog.min_offset
    report["consume_queue_files"] = sum(
        cq.delete_expired(min_phys) for cq in store.consume_queues.values()
    )
    report["index_files"] = store.index.delete_expired(min_phys)
    report["min_physical_offset"] = min_phys
    return report
