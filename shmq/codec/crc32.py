"""CRC-32 (IEEE, the zlib / ``java.util.zip.CRC32`` polynomial), slice-by-8 in numba.

RocketMQ stores ``crc32(body) & 0x7FFFFFFF`` in a record's BODYCRC field.
"""

from __future__ import annotations

import numpy as np
from numba import njit


def _tables() -> np.ndarray:
    table = np.zeros((8, 256), dtype=np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0xEDB88320 if c & 1 else c >> 1
        table[0, i] = c
    for i in range(256):
        c = int(table[0, i])
        for k in range(1, 8):
            c = int(table[0, c & 0xFF]) ^ (c >> 8)
            table[k, i] = c
    return table


_T = _tables()


@njit(cache=True, nogil=True, inline="always")
def crc32_range(buf, start, end):
    """zlib-compatible CRC-32 of ``buf[start:end]`` (a uint8 array), as a non-negative int."""
    t = _T
    c = np.int64(0xFFFFFFFF)
    i = np.uint64(start)
    end = np.uint64(end)
    one_ = np.uint64(1)
    while i + np.uint64(8) <= end:
        one = (
            np.int64(buf[i])
            | (np.int64(buf[i + one_]) << 8)
            | (np.int64(buf[i + np.uint64(2)]) << 16)
            | (np.int64(buf[i + np.uint64(3)]) << 24)
        ) ^ c
        two = (
            np.int64(buf[i + np.uint64(4)])
            | (np.int64(buf[i + np.uint64(5)]) << 8)
            | (np.int64(buf[i + np.uint64(6)]) << 16)
            | (np.int64(buf[i + np.uint64(7)]) << 24)
        )
        c = (
            np.int64(t[7, one & 0xFF])
            ^ np.int64(t[6, (one >> 8) & 0xFF])
            ^ np.int64(t[5, (one >> 16) & 0xFF])
            ^ np.int64(t[4, (one >> 24) & 0xFF])
            ^ np.int64(t[3, two & 0xFF])
            ^ np.int64(t[2, (two >> 8) & 0xFF])
            ^ np.int64(t[1, (two >> 16) & 0xFF])
            ^ np.int64(t[0, (two >> 24) & 0xFF])
        )
        i += np.uint64(8)
    while i < end:
        c = np.int64(t[0, (c ^ np.int64(buf[i])) & 0xFF]) ^ (c >> 8)
        i += one_
    return c ^ np.int64(0xFFFFFFFF)


@njit(cache=True, nogil=True)
def crc32(buf):
    """zlib-compatible CRC-32 of a whole uint8 array."""
    return crc32_range(buf, 0, buf.shape[0])


@njit(cache=True, nogil=True)
def body_crc_batch(data, offsets, out):
    """RocketMQ BODYCRC (``crc32 & 0x7FFFFFFF``) of each body ``data[offsets[i]:offsets[i+1]]``."""
    for i in range(out.shape[0]):
        out[i] = crc32_range(data, offsets[i], offsets[i + 1]) & 0x7FFFFFFF
