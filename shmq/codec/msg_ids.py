"""A batch's ``msgId``: the comma-joined offset message ids of its messages, in numba.

A SEND_BATCH_MESSAGE answer lists one offset message id per message (the store host's hex
digits, then the CommitLog offset's 16, upper case); the broker writes thousands per
answer and the producer reads them back, so both are one kernel call, not a pass of numpy
operations per step (which cost 0.03 and 0.12 µs a message here).
"""

from __future__ import annotations

import functools

import numpy as np
from numba import njit

_DIGITS = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)


@njit(cache=True, nogil=True)
def format_ids(host_hex, phys, digits, out):
    """Write ``host_hex`` + the 16 hex digits of each of ``phys``, comma-separated, into
    ``out`` (``len(phys) * (len(host_hex) + 17) - 1`` bytes)."""
    h = host_hex.shape[0]
    width = h + 17
    for i in range(phys.shape[0]):
        base = i * width
        out[base : base + h] = host_hex
        v = phys[i]
        for k in range(16):
            out[base + h + 15 - k] = digits[v & 0xF]
            v >>= 4
        if i + 1 < phys.shape[0]:
            out[base + h + 16] = 44  # ','


@njit(cache=True, nogil=True)
def parse_ids(raw, host_len, out):
    """The CommitLog offsets of the comma-joined ids in ``raw`` (each ``host_len`` hex
    digits of host, 16 of offset) into ``out``; returns the index of the first byte that
    is not where a digit or a comma belongs, or -1 when every one is."""
    width = host_len + 17
    for i in range(out.shape[0]):
        base = i * width
        for k in range(host_len):
            c = raw[base + k]
            if not (48 <= c <= 57 or 65 <= c <= 70 or 97 <= c <= 102):
                return base + k
        v = np.int64(0)
        for k in range(16):
            c = raw[base + host_len + k]
            if 48 <= c <= 57:
                d = c - 48
            elif 65 <= c <= 70:
                d = c - 55
            elif 97 <= c <= 102:
                d = c - 87
            else:
                return base + host_len + k
            v = (v << 4) | d
        out[i] = v
        if i + 1 < out.shape[0] and raw[base + width - 1] != 44:
            return base + width - 1
    return -1


def joined_offset_msg_ids(store_host: bytes, physical_offsets: np.ndarray) -> str:
    """The offset message ids of ``physical_offsets`` joined by commas, as
    ``shmq.message.offset_msg_id`` writes each."""
    host_hex = np.frombuffer(store_host.hex().upper().encode(), dtype=np.uint8)
    n = physical_offsets.shape[0]
    out = np.empty(max(n * (host_hex.shape[0] + 17) - 1, 0), dtype=np.uint8)
    format_ids(host_hex, np.ascontiguousarray(physical_offsets, dtype=np.int64), _DIGITS, out)
    return out.tobytes().decode("ascii")


def split_offset_ids(text: str) -> tuple[bytes, np.ndarray]:
    """The store host (8 bytes) and the CommitLog offsets of comma-joined IPv4 offset
    message ids (a batch's ``msgId``); ``ValueError`` when the text is anything else."""
    try:
        raw = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    except UnicodeEncodeError:
        raise ValueError(f"msgId {text[:80]!r} is not comma-joined 32-digit ids") from None
    if (raw.shape[0] + 1) % 33:
        raise ValueError(f"msgId {text[:80]!r} is not comma-joined 32-digit ids")
    phys = np.empty((raw.shape[0] + 1) // 33, dtype=np.int64)
    bad = parse_ids(raw, 16, phys)
    if bad >= 0:
        raise ValueError(f"msgId {text[:80]!r} has {text[bad]!r} at {bad}, not a hex digit "
                         "or a comma")  # fmt: skip
    return bytes.fromhex(text[:16]), phys


@functools.cache
def warm_up() -> None:
    """Once per process: load both kernels from numba's cache before the first batch
    needs them."""
    split_offset_ids(joined_offset_msg_ids(bytes(8), np.zeros(2, dtype=np.int64)))
