"""One fixed-size store file, created at full size and mapped whole.

A CommitLog file gets real disk blocks when it is created (``posix_fallocate``), so a full
disk fails there, as ``DiskFullError``, and never as SIGBUS on a later write through the
mapping. A sparse file (consume queues, as RocketMQ's) is created with holes and gets its
blocks in 1 MiB steps ahead of the writer by ``reserve``, with the same guarantee.

A file is named by the global offset of its first byte, zero-padded to 20 digits (RocketMQ's
``UtilAll.offset2FileName``). ``buf`` is a numpy uint8 view of the whole mapping, which the
numba kernels read and write directly. The owner tracks the write position; the mapped file
only knows how to flush a byte range and how to warm its pages.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import functools
import logging
import mmap
import os
import shutil

import numpy as np

from shmq import files
from shmq.errors import CorruptStoreError, DiskFullError

log = logging.getLogger(__name__)

PAGE_SIZE = mmap.PAGESIZE
RESERVE_STEP = 1 << 20
PREFAULT_STEP = 1 << 20  # bytes of zeros one pwrite of ``prefault`` writes, at most
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


@functools.cache
def _zeros() -> memoryview:
    """``PREFAULT_STEP`` zero bytes, made on first use (readers never prefault)."""
    return memoryview(bytes(PREFAULT_STEP))


def offset_to_file_name(offset: int) -> str:
    return f"{offset:020d}"


def file_name_to_offset(name: str) -> int:
    if len(name) != 20 or not name.isdigit():
        raise CorruptStoreError(f"store file name {name!r} is not a 20-digit offset")
    return int(name)


class MappedFile:
    """A store file of exactly ``size`` bytes, mapped read-write (or read-only)."""

    def __init__(
        self, path: str, size: int, *, readonly: bool = False, sparse: bool = False
    ) -> None:
        self.path = path
        self.size = size
        self.file_from_offset = file_name_to_offset(os.path.basename(path))
        self.readonly = readonly
        self.wrote_position = 0
        self.flushed_position = 0
        self._locked = False
        self._reserved = 0 if sparse else size  # bytes known to have disk blocks
        self.prefaulted = 0  # pages below this are in the page cache (``prefault``)
        self.created = False  # this object created the file: no byte of it was written
        self._write_fd = -1  # for ``write_at``, opened on first use
        fd = os.open(path, os.O_RDONLY) if readonly else files.create(path, os.O_RDWR)
        try:
            stat = os.fstat(fd)
            self.inode = stat.st_ino  # a reader tells a file deleted and made again by it
            actual = stat.st_size
            if actual == 0 and not readonly:
                self.created = True
                if sparse:
                    os.ftruncate(fd, size)
                else:
                    allocate(fd, size, path)
            elif actual != size:
                raise CorruptStoreError(
                    f"{path} is {actual} bytes; a store file here must be exactly {size} bytes"
                )
            access = mmap.ACCESS_READ if readonly else mmap.ACCESS_WRITE
            self.mm = mmap.mmap(fd, size, access=access)
        finally:
            os.close(fd)
        self.buf = np.frombuffer(self.mm, dtype=np.uint8)
        # The same bytes, read-only: what the parse kernels are given, from writers' and
        # readers' mappings alike, so numba compiles each of them once, not once per
        # writability (a record parser's copy costs seconds at a host's first start).
        self.read_view = self.buf
        if not readonly:
            self.read_view = self.buf.view()
            self.read_view.flags.writeable = False

    @property
    def file_end_offset(self) -> int:
        return self.file_from_offset + self.size

    @property
    def is_full(self) -> bool:
        return self.wrote_position >= self.size

    @property
    def last_modified(self) -> float:
        return os.stat(self.path).st_mtime

    def reserve(self, end: int) -> None:
        """Make sure bytes ``[0, end)`` have disk blocks (a sparse file gets them up to the
        next ``RESERVE_STEP``); raises ``DiskFullError`` when the disk has no room."""
        self._reserved = reserve_blocks(self.path, self._reserved, end, self.size)

    def flush(self, start: int, end: int) -> None:
        """msync ``[start, end)`` of this file to disk (start rounded down to a page)."""
        if end <= start:
            return
        begin = start - start % PAGE_SIZE
        self.mm.flush(begin, min(end, self.size) - begin)
        self.flushed_position = max(self.flushed_position, min(end, self.size))

    def write_at(self, position: int, parts: list[memoryview]) -> int:
        """Write ``parts`` back to back from ``position`` with ``pwritev``, through the page
        cache and not the mapping (which sees the same bytes); returns the end. For a writer
        whose bytes are already in a buffer (a slave's HA client): one copy, and no page to
        prefault first. ``OSError`` as ``pwritev`` raises it."""
        end = position + sum(len(p) for p in parts)
        if self.readonly or position < 0 or end > self.size:
            raise ValueError(f"cannot write [{position}, {end}) of {self.path} ({self.size} bytes)")
        if self._write_fd < 0:
            self._write_fd = os.open(self.path, os.O_WRONLY)
        while parts:
            done = os.pwritev(self._write_fd, parts, position)
            if not done:
                raise OSError(f"pwritev wrote nothing at {position} of {self.path}")
            position += done
            while parts and done >= len(parts[0]):  # a short write: go on with the rest
                done -= len(parts[0])
                parts = parts[1:]
            if parts and done:
                parts = [parts[0][done:], *parts[1:]]
        return end

    def prefault(self, end: int) -> None:
        """Put the never-written pages below ``end`` into the page cache, with ``pwrite``s
        of zeros, so the writes through the mapping that follow find them there.

        The first write through a shared file mapping to a page the page cache does not
        hold faults it in, a major fault of a few µs (a CommitLog of 100-byte messages meets
        a new page every 20 records); a ``pwrite`` brings the same page in by the MiB, in
        one system call instead of 256 faults, and the mapping's fault is then a minor one.
        What the page itself costs stays: ~0.5 µs when the kernel reuses memory it freed
        recently, ~5 µs on this virtual machine when it is memory the guest never used
        (perf: half the writer's time in a long bulk run is this ``pwrite``'s copy). Only whole
        pages at or past the write position are written, so no byte of a record is ever
        touched, and a sparse file stops at its reserved blocks (no write can find the disk
        full). The owner calls this ahead of its writes, as the only writer of the file, on
        a file it created or whose end it set (``MappedFileQueue.truncate`` zeroes what
        lies past it): past the write position there is nothing but zeros."""
        if self.readonly:
            return
        start = max(self.prefaulted, -(-self.wrote_position // PAGE_SIZE) * PAGE_SIZE)
        end = min(-(-end // PAGE_SIZE) * PAGE_SIZE, self.size, self._reserved)
        try:
            if start < end:
                fd = os.open(self.path, os.O_WRONLY)
                try:
                    zeros = _zeros()
                    while start < end:
                        start += os.pwrite(fd, zeros[: min(PREFAULT_STEP, end - start)], start)
                finally:
                    os.close(fd)
        except OSError as exc:  # only a lost speed-up: the writes go through the mapping
            log.warning("cannot prefault %s (its writes fault their pages in): %s", self.path, exc)
            start = self.size
        self.prefaulted = max(self.prefaulted, start)

    def warm(self, *, lock: bool = True) -> None:
        """Fault every page in now, so the hot path never pays the first touch.

        Like RocketMQ's ``warmMappedFile``: zeros into every page of a file it just created
        (by ``prefault``), ``madvise(MADV_WILLNEED)`` and, where the limits allow, ``mlock``
        so the pages stay resident.
        """
        if self.created:
            self.prefault(self.size)
        if hasattr(mmap, "MADV_WILLNEED"):
            self.mm.madvise(mmap.MADV_WILLNEED)
        if lock and not self._locked:
            addr = ctypes.addressof(ctypes.c_char.from_buffer(self.mm)) if not self.readonly else 0
            if addr and _libc.mlock(ctypes.c_void_p(addr), ctypes.c_size_t(self.size)) == 0:
                self._locked = True
            else:
                log.debug("mlock of %s not allowed (errno %d)", self.path, ctypes.get_errno())

    def close(self) -> None:
        """Unmap. Views handed out by ``buf`` must not be used afterwards."""
        if self._write_fd >= 0:
            os.close(self._write_fd)
            self._write_fd = -1
        if self.mm is None:
            return
        if self._locked:
            addr = ctypes.addressof(ctypes.c_char.from_buffer(self.mm))
            _libc.munlock(ctypes.c_void_p(addr), ctypes.c_size_t(self.size))
            self._locked = False
        self.buf = self.read_view = None
        try:
            self.mm.close()
        except BufferError:
            # A reader still holds a view of the mapping; it is released with that view.
            log.debug("mapping of %s still exported; left to the garbage collector", self.path)
        self.mm = None

    def destroy(self) -> None:
        """Unmap and delete the file."""
        self.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def __repr__(self) -> str:
        return f"MappedFile({self.path!r}, wrote={self.wrote_position}, size={self.size})"


def reserve_blocks(path: str, reserved: int, end: int, size: int) -> int:
    """Give the file at ``path``, whose first ``reserved`` bytes have disk blocks, blocks up
    to ``end`` rounded up to ``RESERVE_STEP`` (at most ``size``); returns the new reserved
    end. ``DiskFullError`` when the disk has no room."""
    if end <= reserved:
        return reserved
    upto = min(size, -(-end // RESERVE_STEP) * RESERVE_STEP)
    fd = os.open(path, os.O_RDWR)
    try:
        allocate(fd, upto, path, start=reserved, new=False)
    finally:
        os.close(fd)
    return upto


def allocate(fd: int, size: int, path: str, *, start: int = 0, new: bool = True) -> None:
    """Give bytes ``[start, size)`` of the file real blocks, so a full disk fails here
    instead of as SIGBUS on a later write through the mapping. A ``new`` file that cannot
    get them is removed. Where the filesystem has no ``fallocate``, the file stays sparse."""
    try:
        os.posix_fallocate(fd, start, size - start)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            free = shutil.disk_usage(os.path.dirname(path) or ".").free
            if new:
                os.unlink(path)
            raise DiskFullError(
                f"no disk space for {path}: {size - start} bytes needed, {free} free"
            ) from None
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise
        log.warning("%s: no fallocate on this filesystem (%s); the file stays sparse", path, exc)
        os.ftruncate(fd, size)
