"""Numba kernels over plain buffers: record encode/decode/validate, CRC-32, Java string
hash and consume-queue scans. Pure functions; nothing here touches files or processes.

Importing this package puts shmq's kernel cache in place (``kernel_locator``) before any
kernel is defined: every module that defines one imports ``shmq.codec`` first."""

from shmq.codec import kernel_locator

kernel_locator.install()

from shmq.codec.jhash import java_hash  # noqa: E402  (after the cache is in place)

__all__ = ["java_hash"]
