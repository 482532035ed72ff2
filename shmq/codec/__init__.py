"""Numba kernels over plain buffers: record encode/decode/validate, CRC-32, Java string
hash and consume-queue scans. Pure functions; nothing here touches files or processes."""

from shmq.codec.jhash import java_hash

__all__ = ["java_hash"]
