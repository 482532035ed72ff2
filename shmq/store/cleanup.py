"""File cleanup, as RocketMQ's ``CleanCommitLogService`` and ``CleanConsumeQueueService``.

CommitLog files are deleted oldest first, never the one being written, when the local hour is
one of ``deleteWhen`` or the disk is fuller than ``diskMaxUsedSpaceRatio``: a file goes once
it is older than ``fileReservedTime`` hours, or at once when the disk is fuller than
``diskSpaceCleanForciblyRatio``; at most ``deleteFilesBatchMax`` per round, stopping at the
first file that must stay. Then consume-queue and index files wholly below the new minimum
offset go, and each queue's minimum offset moves to its first surviving message.
"""

from __future__ import annotations

import logging
import shutil
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shmq.store.message_store import MessageStore

log = logging.getLogger(__name__)


def disk_used_ratio(path: str) -> float:
    usage = shutil.disk_usage(path)
    return usage.used / usage.total if usage.total else 0.0


def is_time_to_delete(delete_when: str, now: float) -> bool:
    hour = time.localtime(now).tm_hour
    return any(int(h) == hour for h in delete_when.split(";") if h.strip())


def clean_expired(store: MessageStore, now: float, disk_used: float | None) -> dict[str, Any]:
    cfg = store.config
    ratio = disk_used_ratio(store.root) if disk_used is None else disk_used
    time_up = is_time_to_delete(cfg.delete_when, now)
    space_full = ratio > cfg.disk_max_used_space_ratio / 100
    clean_now = cfg.clean_file_forcibly_enable and ratio > cfg.disk_space_clean_forcibly_ratio / 100
    report: dict[str, Any] = {
        "disk_used": ratio,
        "time_to_delete": time_up,
        "space_to_delete": space_full,
        "clean_immediately": clean_now,
        "commitlog_files": 0,
        "consume_queue_files": 0,
        "index_files": 0,
    }
    if not (time_up or space_full):
        return report
    files = store.commitlog.queue.files
    reserved_s = cfg.file_reserved_time * 3600
    count = 0
    for mf in files[:-1][: cfg.delete_files_batch_max]:
        if not (clean_now or now >= mf.last_modified + reserved_s):
            break
        count += 1
    if count:
        gone = store.commitlog.queue.delete_first_files(count)
        log.info(
            "deleted %d commitlog file(s) [%d, %d) (%s)",
            len(gone),
            gone[0].file_from_offset,
            gone[-1].file_end_offset,
            "disk full" if clean_now else "expired",
        )
    report["commitlog_files"] = count
    min_phys = store.commitlog.min_offset
    report["consume_queue_files"] = sum(
        cq.delete_expired(min_phys) for cq in store.consume_queues.values()
    )
    report["index_files"] = store.index.delete_expired(min_phys)
    report["min_physical_offset"] = min_phys
    return report
