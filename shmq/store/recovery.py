"""Recovery at open: find where valid data ends and cut everything after it.

Normal path (no ``abort`` marker): walk CommitLog records from the third-last file, checking
magic, sizes, the length formula, the record's own position and (``checkCRCOnRecover``) the
body CRC; the first failure ends the log. Abnormal path (``abort`` left by a crash): start at
the newest file whose first record is older than the checkpoint, walk the same way, and have
reput re-dispatch everything from there (idempotent). Either way the CommitLog tail after the
last valid record is zeroed and consume-queue units pointing past it are removed. What was
cut is logged with offsets.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from shmq.codec import record as rec
from shmq.store.checkpoint import Checkpoint
from shmq.store.commitlog import CommitLog

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RecoveryReport:
    abnormal: bool
    scanned_from: int
    valid_end: int
    cut_bytes: int
    stop_reason: str
    redispatch_from: int | None


def recover_commitlog(
    commitlog: CommitLog,
    checkpoint: Checkpoint,
    *,
    abnormal: bool,
    check_crc: bool,
    max_record_size: int,
    message_index: bool = True,
) -> RecoveryReport:
    """Find the end of valid data, truncate the log there, and say where to re-dispatch."""
    files = commitlog.queue.files
    if not files:
        return RecoveryReport(abnormal, 0, 0, 0, rec.PARSE_REASONS[rec.PARSE_END], None)
    start = (
        _abnormal_start(commitlog, checkpoint, message_index)
        if abnormal
        else files[max(0, len(files) - 3)].file_from_offset
    )
    end_of_files = files[-1].file_end_offset
    for _ in commitlog.scan(start, end_of_files, check_crc=check_crc):
        pass
    valid_end, code = commitlog.last_scan
    if code == rec.PARSE_BLANK and valid_end >= end_of_files:
        code = rec.PARSE_END
    dirty = _dirty_bytes(commitlog, valid_end, max_record_size)
    if dirty:
        log.warning(
            "commitlog recovery cut %d dirty bytes at offset %d (%s); valid data ends there",
            dirty,
            valid_end,
            rec.PARSE_REASONS[code],
        )
    commitlog.queue.truncate(valid_end, max_record_size)
    _flush_valid_range(commitlog, start, valid_end)
    return RecoveryReport(
        abnormal,
        start,
        valid_end,
        dirty,
        rec.PARSE_REASONS[code],
        start if abnormal else None,
    )


def _flush_valid_range(commitlog: CommitLog, start: int, end: int) -> None:
    """Make the recovered data durable (after a process crash it may sit only in the page
    cache) so the flushed offset can honestly start at its end."""
    for mf in commitlog.queue.files:
        if mf.file_end_offset > start and mf.file_from_offset < end:
            mf.flush(0, min(end, mf.file_end_offset) - mf.file_from_offset)
    commitlog.queue.flushed_where = end


def _abnormal_start(commitlog: CommitLog, checkpoint: Checkpoint, message_index: bool) -> int:
    """The newest file whose first record was stored at or before the checkpoint's minimum
    timestamp (with the index: also at or before the index timestamp, since index files
    newer than it were dropped and must be rebuilt); the first file when none qualifies
    (RocketMQ 4.9 ``recoverAbnormally``)."""
    files = commitlog.queue.files
    limit = checkpoint.min_timestamp_index() if message_index else checkpoint.min_timestamp()
    row = np.zeros(1, dtype=rec.RECORD_ROW)
    for mf in reversed(files):
        code = rec.parse_one(mf.read_view, 0, mf.size, mf.file_from_offset, False, row, 0)
        store_ts = int(row["store_ts"][0])
        if code == rec.PARSE_OK and store_ts != 0 and store_ts <= limit:
            return mf.file_from_offset
    return files[0].file_from_offset


def _dirty_bytes(commitlog: CommitLog, offset: int, gap: int) -> int:
    """How many bytes after ``offset`` hold something (what truncation is about to zero);
    empty files allocated ahead of need count for nothing."""
    dirty = 0
    for mf in commitlog.queue.files:
        if mf.file_end_offset <= offset:
            continue
        local = max(0, offset - mf.file_from_offset)
        dirty += rec.dirty_end(mf.buf, local, gap) - local
    return dirty
