"""Java ``String.hashCode()`` over the UTF-16 code units of UTF-8 bytes, in numba.

RocketMQ uses it for consume-queue tag codes and index keys; Python strings are decoded
from UTF-8 to code points and split into surrogate pairs above U+FFFF so the result equals
the JVM's for any text.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, inline="always")
def java_hash_continue(h, buf, start, end):
    """Continue a Java hash (its unsigned 32-bit state ``h``) over the UTF-8 text
    ``buf[start:end]``; returns the new unsigned state (hash ``a + b`` = continue the hash
    of ``a`` over ``b``)."""
    i = start
    while i < end:
        b = np.int64(buf[i])
        if b < 0x80:
            cp = b
            i += 1
        elif b < 0xE0 and i + 1 < end:
            cp = ((b & 0x1F) << 6) | (np.int64(buf[i + 1]) & 0x3F)
            i += 2
        elif b < 0xF0 and i + 2 < end:
            cp = ((b & 0x0F) << 12) | ((np.int64(buf[i + 1]) & 0x3F) << 6)
            cp |= np.int64(buf[i + 2]) & 0x3F
            i += 3
        elif i + 3 < end:
            cp = ((b & 0x07) << 18) | ((np.int64(buf[i + 1]) & 0x3F) << 12)
            cp |= ((np.int64(buf[i + 2]) & 0x3F) << 6) | (np.int64(buf[i + 3]) & 0x3F)
            i += 4
        else:  # truncated sequence: Java would see U+FFFD
            cp = 0xFFFD
            i += 1
        if cp >= 0x10000:
            v = cp - 0x10000
            h = (h * 31 + (0xD800 + (v >> 10))) & 0xFFFFFFFF
            h = (h * 31 + (0xDC00 + (v & 0x3FF))) & 0xFFFFFFFF
        else:
            h = (h * 31 + cp) & 0xFFFFFFFF
    return h


@njit(cache=True, nogil=True, inline="always")
def signed32(h):
    return h - 0x100000000 if h >= 0x80000000 else h


@njit(cache=True, nogil=True, inline="always")
def java_hash_range(buf, start, end):
    """Java hash of the UTF-8 text ``buf[start:end]`` as a signed 32-bit value (int64)."""
    return signed32(java_hash_continue(np.int64(0), buf, start, end))


@njit(cache=True, nogil=True)
def _java_hash_bytes(buf):
    return java_hash_range(buf, 0, buf.shape[0])


def java_hash(text: str) -> int:
    """``java.lang.String.hashCode()`` of ``text``, as a signed 32-bit int."""
    if text.isascii() and len(text) < 16:  # a short loop here beats a numba dispatch
        h = 0
        for ch in text.encode():
            h = (31 * h + ch) & 0xFFFFFFFF
        return h - (1 << 32) if h & 0x80000000 else h
    raw = text.encode("utf-8", "surrogatepass")
    return int(_java_hash_bytes(np.frombuffer(raw, dtype=np.uint8)))
