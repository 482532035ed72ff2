"""The index service: message keys (``KEYS`` and ``UNIQ_KEY``) → CommitLog offsets, over a
sequence of IndexFiles that roll when full (RocketMQ's ``IndexService``).

The index is worth less than the CommitLog: a query by key misses without it, while puts
stop without the CommitLog's next file. So the index takes disk space (a new file, more
entry blocks) only while what stays free still holds ``disk_reserve`` bytes (the
CommitLog's next file); otherwise, or when an allocation fails, keys go unindexed, said in
the log, and dispatch goes on as RocketMQ's store does when it cannot create an index file.
Indexing takes up again with later records once there is room; the records in between stay
unindexed.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable, Iterable
from typing import Any

from shmq import files
from shmq.codec.jhash import java_hash
from shmq.errors import DiskFullError
from shmq.store.index.file import (
    IndexFile,
    index_file_name,
    index_file_size,
    put_record_keys,
)
from shmq.store.mapped_file import RESERVE_STEP

log = logging.getLogger(__name__)

RESERVE_AHEAD = 4096  # index entries given disk blocks at a time by a batch
PAUSED_RETRY_S = 1.0  # while paused for want of disk space: how often it looks for room


def key_hash(key: str) -> int:
    """``abs(java_hash(key))``, with ``Integer.MIN_VALUE`` mapped to 0 as RocketMQ does."""
    h = java_hash(key)
    return 0 if h == -(2**31) else abs(h)


class IndexService:
    def __init__(
        self,
        index_dir: str,
        hash_slot_num: int,
        index_num: int,
        max_msgs_num_batch: int = 64,
        on_file_full: Callable[[int], None] | None = None,
        disk_reserve: int = 0,
    ) -> None:
        self.index_dir = index_dir
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.max_msgs_num_batch = max_msgs_num_batch
        self.on_file_full = on_file_full
        self.disk_reserve = disk_reserve  # bytes the index leaves free (module docstring)
        self.files: list[IndexFile] = []
        self.unindexed = 0  # records whose keys were left out for want of disk space
        self._paused: str | None = None  # why keys are left out now
        self._paused_from = -1  # CommitLog offset of the first record left out since then
        self._paused_count = 0  # records left out since then
        self._retry_at = 0.0  # monotonic time of the next look for room while paused

    def load(self, last_exit_ok: bool, index_msg_timestamp: int) -> None:
        """Open the existing files; after a crash drop those newer than the checkpoint (the
        reput that follows rebuilds them)."""
        if not os.path.isdir(self.index_dir):
            return
        for name in sorted(os.listdir(self.index_dir)):
            if not (len(name) == 17 and name.isdigit()):
                continue
            f = IndexFile(os.path.join(self.index_dir, name), self.hash_slot_num, self.index_num)
            if not last_exit_ok and f.end_timestamp > index_msg_timestamp:
                log.info("index file %s is newer than the checkpoint: rebuilt by reput", name)
                f.destroy()
                continue
            self.files.append(f)

    def build_index(
        self,
        topic: str,
        keys: Iterable[str],
        uniq_key: str | None,
        phy_offset: int,
        store_timestamp: int,
    ) -> None:
        """Index ``topic#uniq_key`` and ``topic#key`` for each key of one record. A record
        before the last file's end offset is already indexed (idempotent rebuild)."""
        if self.files and phy_offset < self.files[-1].end_phy_offset:
            return
        for key in ([uniq_key] if uniq_key else []) + [k for k in keys if k]:
            h = key_hash(f"{topic}#{key}")
            while True:  # a full file: the next one takes the key
                f = self._room_file()
                if f is None:
                    self._left_out(phy_offset, 1)
                    return
                if f.put_key(h, phy_offset, store_timestamp):
                    break

    def build_index_batch(self, src, rows, picks, base: int, k: int = 0, skip: int = 0) -> None:
        """``build_index`` for the records ``rows[picks]`` parsed from ``src`` (a CommitLog
        file starting at physical offset ``base``), one kernel call per index file; from
        pick ``k`` on, its first ``skip`` keys excepted, when a kernel call already put the
        ones before (``put_record_keys``' outcome). Without disk space for the index, the
        rest of them stay unindexed."""
        while k < picks.shape[0]:
            f = self._room_file()
            if f is None:
                self._left_out(base + int(rows["pos"][picks[k]]), picks.shape[0] - k)
                return
            k, skip, _ = put_record_keys(
                f.buf, f.hash_slot_num, f.index_num, f.entry_limit(), src, rows, picks, k, skip,
                base,
            )  # fmt: skip

    def run_file(self) -> IndexFile | None:
        """The file the next keys go into, if there is one (``dispatch_run`` puts keys
        into it until it is full or its reserved entries run out)."""
        return self.files[-1] if self.files else None

    def _room_file(self) -> IndexFile | None:
        """The file the next key goes into, with disk blocks for at least one more entry (a
        new file when the last is full, more blocks when its reserved ones are used up);
        None while the index has no disk space for them (module docstring)."""
        if self._paused is not None and time.monotonic() < self._retry_at:
            return None
        f = self.files[-1] if self.files else None
        try:
            if f is None or f.is_full:
                f = self._roll()
            elif f.index_count >= f.entry_limit():
                self._may_take(min(RESERVE_STEP, f.unreserved))
                f.reserve_entries(RESERVE_AHEAD)
        except DiskFullError as exc:  # its text only: its frames hold views of the files
            if self._paused is None:
                self._paused, self._paused_from, self._paused_count = str(exc), -1, 0
                log.error("index paused: %s; keys are not indexed until there is room",
                          self._paused)  # fmt: skip
            self._retry_at = time.monotonic() + PAUSED_RETRY_S
            return None
        if self._paused is not None:
            log.warning(
                "index resumed: keys of %d record(s) from CommitLog offset %d on were not "
                "indexed (no disk space); later records are indexed again",
                self._paused_count, self._paused_from,
            )  # fmt: skip
            self._paused = None
        return f

    def _may_take(self, size: int) -> None:
        """``DiskFullError`` unless what stays free after ``size`` more bytes for the index
        still holds ``disk_reserve`` (the CommitLog's next file)."""
        files.makedirs(self.index_dir)
        free = shutil.disk_usage(self.index_dir).free
        if free - size < self.disk_reserve:
            raise DiskFullError(
                f"{size} bytes wanted for the index, {free} free, {self.disk_reserve} kept for "
                "the CommitLog's next file"
            )

    def _left_out(self, phy_offset: int, records: int) -> None:
        """``records`` from ``phy_offset`` on went unindexed while the index is paused."""
        if self._paused_from < 0:
            self._paused_from = phy_offset
        self._paused_count += records
        self.unindexed += records

    def _roll(self) -> IndexFile:
        """A new file after the last; ``DiskFullError`` when the index may not take its
        header and slots (``_may_take``)."""
        self._may_take(index_file_size(self.hash_slot_num, 0))  # entries: ``_room_file``
        previous = self.files[-1] if self.files else None
        stamp = int(time.time() * 1000)
        while os.path.exists(os.path.join(self.index_dir, index_file_name(stamp))):
            stamp += 1  # two files in one millisecond must still get distinct names
        new = IndexFile.create(
            os.path.join(self.index_dir, index_file_name(stamp)),
            self.hash_slot_num,
            self.index_num,
            previous,
        )
        self.files.append(new)
        if previous is not None and previous.is_full:
            previous.flush()
            if self.on_file_full is not None:
                self.on_file_full(previous.end_timestamp)
        return new

    def query(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        """Candidate offsets for ``key`` (hash matches; callers compare the real key), newest
        file first, at most ``min(max_num, maxMsgsNumBatch)``."""
        max_num = min(max_num, self.max_msgs_num_batch)
        h = key_hash(f"{topic}#{key}")
        found: dict[int, None] = {}  # ordered and unique: after a crash, re-dispatch may
        for f in reversed(self.files):  # index a record that an older entry also names
            if len(found) >= max_num:
                break
            if f.is_time_matched(begin_ms, end_ms):
                for phys in f.select_phy_offsets(h, max_num, begin_ms, end_ms):
                    found[phys] = None
            if f.begin_timestamp < begin_ms:
                break
        return list(found)[:max_num]

    def delete_expired(self, min_phy_offset: int) -> int:
        """Delete files wholly below ``min_phy_offset``, oldest first, never the last one."""
        count = 0
        while len(self.files) > 1 and self.files[0].end_phy_offset < min_phy_offset:
            self.files.pop(0).destroy()
            count += 1
        return count

    def flush(self) -> None:
        for f in self.files:
            f.flush()

    def close(self) -> None:
        for f in self.files:
            f.close()
        self.files.clear()

    def stats(self) -> dict[str, Any]:
        return {
            "files": len(self.files),
            "entries": sum(f.index_count - 1 for f in self.files),
            "unindexed": self.unindexed,
        }
