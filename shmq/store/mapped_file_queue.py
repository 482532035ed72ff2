"""A directory of equal-size mapped files forming one contiguous offset space.

The CommitLog and each consume queue are a ``MappedFileQueue``. Files are created at full
size; the next file can be allocated (and warmed) in a background thread ahead of need, like
RocketMQ's ``AllocateMappedFileService``, so a roll never waits for the disk.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor

from shmq import files
from shmq.codec.record import dirty_end
from shmq.errors import CorruptStoreError, DiskFullError
from shmq.store.mapped_file import PAGE_SIZE, MappedFile, file_name_to_offset, offset_to_file_name

log = logging.getLogger(__name__)

PREFAULT_AHEAD = 4 << 20  # ``prefault_ahead`` keeps this much past the write position
PREFAULT_TOP_UP = 64 << 10  # and tops it up once this much of it was written


def first_file_from(directory: str, offset: int, limit: int) -> int | None:
    """The start of the first file in ``directory`` after ``offset`` and before ``limit``
    (None if none): where a slave's CommitLog begins when it started empty and the master
    sent it a later file first, so readers find no file at their offset."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return None
    starts = [s for n in names if n.isdigit() and offset < (s := int(n)) < limit]
    return min(starts, default=None)


class MappedFileQueue:
    """Files ``{dir}/{20-digit start offset}``, each ``file_size`` bytes."""

    def __init__(
        self,
        directory: str,
        file_size: int,
        *,
        readonly: bool = False,
        preallocate: bool = False,
        warm: bool = False,
        mlock: bool = False,
        sparse: bool = False,
    ) -> None:
        self.directory = directory
        self.file_size = file_size
        self.readonly = readonly
        self.sparse = sparse
        self.files: list[MappedFile] = []
        self._ready: dict[int, MappedFile] = {}  # created by prepare(), not yet in use
        self.flushed_where = 0
        self._warm = warm
        self._mlock = mlock
        self._ahead: dict[int, Future[MappedFile]] = {}
        self._allocator = (
            ThreadPoolExecutor(1, thread_name_prefix="shmq-allocate")
            if preallocate and not readonly
            else None
        )
        self._lock = threading.Lock()

    # -- loading ---------------------------------------------------------------------------

    def load(self) -> None:
        """Map every file in the directory; they must be full-size and contiguous."""
        if not os.path.isdir(self.directory):
            return
        names = sorted(n for n in os.listdir(self.directory) if not n.startswith("."))
        expected = None
        for name in names:
            path = os.path.join(self.directory, name)
            start = file_name_to_offset(name)
            if start % self.file_size:
                raise CorruptStoreError(
                    f"{path}: start offset {start} is not a multiple of the file size "
                    f"{self.file_size} (was the store written with another file size?)"
                )
            if expected is not None and start != expected:
                raise CorruptStoreError(
                    f"{self.directory}: file {offset_to_file_name(expected)} is missing "
                    f"before {name}"
                )
            mf = MappedFile(path, self.file_size, readonly=self.readonly, sparse=self.sparse)
            mf.wrote_position = mf.flushed_position = self.file_size
            self.files.append(mf)
            expected = start + self.file_size

    # -- geometry --------------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        return self.files[0].file_from_offset if self.files else 0

    @property
    def max_offset(self) -> int:
        """The offset just after the last written byte."""
        if not self.files:
            return 0
        last = self.files[-1]
        return last.file_from_offset + last.wrote_position

    def last_file(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def find_file(self, offset: int) -> MappedFile | None:
        """The file holding ``offset``, or None when it is below the first or past the last."""
        if not self.files:
            return self._map_next(offset) if self.readonly else None
        index = (offset - self.files[0].file_from_offset) // self.file_size
        if 0 <= index < len(self.files):
            return self.files[index]
        if self.readonly and index == len(self.files):
            return self._map_next(offset)
        return None

    def _map_next(self, offset: int) -> MappedFile | None:
        """Read-only queues follow a writer in another process: map the file it rolled to."""
        start = offset - offset % self.file_size
        path = os.path.join(self.directory, offset_to_file_name(start))
        try:
            mf = MappedFile(path, self.file_size, readonly=True)
        except (FileNotFoundError, CorruptStoreError):
            return None
        mf.wrote_position = mf.flushed_position = self.file_size
        self.files.append(mf)
        return mf

    # -- writing ---------------------------------------------------------------------------

    def new_file(self, start: int) -> MappedFile:
        """Create (or take the prepared or pre-allocated) file starting at ``start`` and
        append it; ``DiskFullError`` when the disk has no room for it."""
        mf = self.prepare(start)
        del self._ready[start]
        self.files.append(mf)
        self._allocate_ahead(start + self.file_size)
        return mf

    def prepare(self, start: int) -> MappedFile:
        """Make sure the file starting at ``start`` exists, without using it yet, so a writer
        can learn that the disk is full before it writes anything that needs the file."""
        mf = self._ready.get(start)
        if mf is None:
            with self._lock:
                future = self._ahead.pop(start, None)
            mf = future.result() if future is not None else self._create(start)
            self._ready[start] = mf
        return mf

    def _create(self, start: int) -> MappedFile:
        files.makedirs(self.directory)
        path = os.path.join(self.directory, offset_to_file_name(start))
        mf = MappedFile(path, self.file_size, sparse=self.sparse)
        files.fsync_dir(self.directory)  # the new name survives a crash of the machine
        if self._warm:
            mf.warm(lock=self._mlock)
        elif mf.created:  # before its first write: see prefault_ahead
            mf.prefault(PREFAULT_AHEAD)
        return mf

    def prefault_ahead(self) -> None:
        """Keep the pages up to ``PREFAULT_AHEAD`` past the last file's write position in
        the page cache (``MappedFile.prefault``), topping it up once ``PREFAULT_TOP_UP`` of
        it was used, so the writer never meets a page fault of a new page: call it between
        writes, and before the first write to a file loaded at start (a new file is
        prefaulted when created). Before, not after: a write fault on a page the cache lacks
        reads ahead (up to ``read_ahead_kb``, 8 MiB here) clean pages, and each write to one
        of those costs a slow ``page_mkwrite``, with stalls of tens of ms, prefaulted or not.

        Small top-ups: the writer calls this after a pass, and the next message waits in
        its ring meanwhile. A new page costs 1-10 µs here (perf-notes), so a top-up of half
        the window (512 pages) could stall a paced stream 0.5-5 ms about once a second;
        16 pages cost at most ~160 µs. A bulk pass writes MiBs, so it still tops up once
        per pass, in one call."""
        mf = self.files[-1] if self.files else None
        if mf is not None and mf.prefaulted - mf.wrote_position < PREFAULT_AHEAD - PREFAULT_TOP_UP:
            mf.prefault(mf.wrote_position + PREFAULT_AHEAD)

    def _allocate_ahead(self, start: int) -> None:
        if self._allocator is None:
            return
        with self._lock:
            if start not in self._ahead:
                self._ahead[start] = self._allocator.submit(self._create, start)

    def flush(self, least_pages: int = 0) -> int:
        """msync what was written since the last flush; returns the flushed offset.

        With ``least_pages`` > 0 a file is flushed only when it is full or holds at least that
        many dirty pages (RocketMQ's ``flushLeastPages``).
        """
        for mf in self.files:
            if mf.file_end_offset <= self.flushed_where:
                continue
            dirty = mf.wrote_position - mf.flushed_position
            if dirty <= 0:
                continue
            pages = mf.wrote_position // PAGE_SIZE - mf.flushed_position // PAGE_SIZE
            if least_pages and not mf.is_full and pages < least_pages:
                break
            mf.flush(mf.flushed_position, mf.wrote_position)
            self.flushed_where = mf.file_from_offset + mf.flushed_position
        return self.flushed_where

    def truncate(self, offset: int, max_gap: int) -> None:
        """Drop everything at and after ``offset``: later files are deleted and the rest of
        the file holding ``offset`` is zeroed (up to the end of its non-zero bytes, found
        by a scan that stops after ``max_gap`` zero bytes), so stale bytes can never be read
        back as data by a later recovery."""
        for mf in list(self.files):
            if mf.file_from_offset > offset:
                self.files.remove(mf)
                mf.destroy()
            elif offset < mf.file_end_offset:
                local = offset - mf.file_from_offset
                end = dirty_end(mf.buf, local, max_gap)
                if end > local:
                    mf.buf[local:end] = 0
                    mf.flush(local, end)
                mf.wrote_position = mf.flushed_position = local
        self.flushed_where = min(self.flushed_where, offset)

    def release_below(self, offset: int) -> int:
        """The cleaner (another process) deleted the files below ``offset``: unmap them
        (``unmap_below``), so their disk space is freed once no process maps them."""
        count = self.unmap_below(offset)
        self.flushed_where = max(self.flushed_where, min(offset, self.max_offset))
        return count

    def unmap_below(self, offset: int) -> int:
        """Unmap, without deleting, the files that end at or below ``offset``, never the
        last one; returns how many. An agent that works only at one moving offset (the
        writer at the end, reput at what it dispatched) calls it as that offset moves on:
        every page it touched of a file behind it would otherwise stay in its mappings, and
        its file-backed RSS would grow with the store."""
        files = self.files
        count = 0
        while len(files) > 1 and files[0].file_end_offset <= offset:
            files.pop(0).close()
            count += 1
        return count

    def delete_first_files(self, count: int) -> list[MappedFile]:
        """Delete the ``count`` oldest files (never the last one); returns them."""
        count = min(count, len(self.files) - 1)
        gone = self.files[:count]
        del self.files[:count]
        for mf in gone:
            mf.destroy()
        return gone

    def delete_all(self) -> None:
        for mf in self.files:
            mf.destroy()
        self.files.clear()
        self.flushed_where = 0

    def close(self) -> None:
        if self._allocator is not None:
            self._allocator.shutdown(wait=True)
            for future in self._ahead.values():
                with contextlib.suppress(DiskFullError):
                    future.result().close()
            self._ahead.clear()
        for mf in self._ready.values():
            mf.close()
        self._ready.clear()
        for mf in self.files:
            mf.close()
        self.files.clear()
