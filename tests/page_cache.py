"""Which pages of a file the page cache holds (``mincore`` of a read-only mapping): how
tests see that a writer prefaulted the pages ahead of its write position."""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]  # fmt: skip
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]


def resident(path: str, start: int, end: int) -> list[bool]:
    """For each page of ``[start, end)`` of the file at ``path``: whether it is in the page
    cache. Mapping the file without touching it reads nothing, so this does not change it."""
    page = mmap.PAGESIZE
    first, length = start - start % page, end - start + start % page
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = _libc.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, first)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap failed")
    finally:
        os.close(fd)
    try:
        vec = ctypes.create_string_buffer(-(-length // page))
        if _libc.mincore(addr, length, vec) != 0:
            raise OSError(ctypes.get_errno(), "mincore failed")
        return [bool(b & 1) for b in vec.raw]
    finally:
        _libc.munmap(addr, length)
