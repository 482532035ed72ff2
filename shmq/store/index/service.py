"""The index service: message keys (``KEYS`` and ``UNIQ_KEY``) → CommitLog offsets, over a
sequence of IndexFiles that roll when full (RocketMQ's ``IndexService``)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from shmq import files
from shmq.codec.jhash import java_hash
from shmq.store.index.file import (
    KEYS_FILE_FULL,
    KEYS_RESERVE,
    IndexFile,
    index_file_name,
    put_record_keys,
)

log = logging.getLogger(__name__)

RESERVE_AHEAD = 4096  # index entries given disk blocks at a time by a batch


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
    ) -> None:
        self.index_dir = index_dir
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.max_msgs_num_batch = max_msgs_num_batch
        self.on_file_full = on_file_full
        self.files: list[IndexFile] = []

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
        f = self._writable_file()
        if phy_offset < f.end_phy_offset:
            return
        for key in ([uniq_key] if uniq_key else []) + [k for k in keys if k]:
            h = key_hash(f"{topic}#{key}")
            while not f.put_key(h, phy_offset, store_timestamp):
                f = self._roll()

    def build_index_batch(self, src, rows, picks, base: int, k: int = 0, skip: int = 0) -> None:
        """``build_index`` for the records ``rows[picks]`` parsed from ``src`` (a CommitLog
        file starting at physical offset ``base``), one kernel call per index file; from
        pick ``k`` on, its first ``skip`` keys excepted, when a kernel call already put the
        ones before (``put_record_keys``' outcome)."""
        while k < picks.shape[0]:
            f = self._writable_file()
            k, skip, code = put_record_keys(
                f.buf, f.hash_slot_num, f.index_num, f.entry_limit(), src, rows, picks, k, skip,
                base,
            )  # fmt: skip
            if code == KEYS_FILE_FULL:
                self._roll()
            elif code == KEYS_RESERVE:
                f.reserve_entries(RESERVE_AHEAD)

    def run_file(self) -> IndexFile | None:
        """The file the next keys go into, if there is one (``dispatch_run`` puts keys
        into it until it is full or its reserved entries run out)."""
        return self.files[-1] if self.files else None

    def _writable_file(self) -> IndexFile:
        if not self.files or self.files[-1].is_full:
            return self._roll()
        return self.files[-1]

    def _roll(self) -> IndexFile:
        previous = self.files[-1] if self.files else None
        files.makedirs(self.index_dir)
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
        }
