"""Shared-memory segments and named semaphores: creation, attachment and unlinking.

Every name the broker creates starts with one per-broker prefix (``/shmq-<pid>-<token>``), so
a leak check can find them in ``/dev/shm`` and ``unlink_prefix`` can remove what a crashed
broker left behind. The creator of a segment or semaphore is its owner and the only one that
unlinks it; others attach by name and only close. They are the owner's alone (0600), or also
``localClientGroup``'s (0660, ``files.group``).
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import re
import secrets
import threading

import numpy as np
import posix_ipc

from shmq import files
from shmq.errors import ShmqError
from shmq.ipc.procs import pid_alive

log = logging.getLogger(__name__)

CACHE_LINE = 64
SHM_DIR = "/dev/shm"
GROUP_MODE = 0o660  # with localClientGroup: its members' clients write rings and wake-ups


def new_prefix() -> str:
    """A fresh name prefix for one broker instance."""
    return f"/shmq-{os.getpid()}-{secrets.token_hex(8)}"  # not guessable by another user


class Segment:
    """One POSIX shared-memory segment with uint8 and int64 views, mapped read-write, or
    read-only (``readonly``: a client's view of tables only the broker writes, so a stray
    write in a client faults in the client instead of changing the broker's state)."""

    def __init__(self, name: str, size: int, *, create: bool, readonly: bool = False) -> None:
        self.name = name
        self.owner = create
        try:
            if create:
                shm = posix_ipc.SharedMemory(name, posix_ipc.O_CREX, mode=0o600, size=size)
                files.share_with_group(name, GROUP_MODE, shm.fd)
            else:
                shm = posix_ipc.SharedMemory(name)
        except posix_ipc.ExistentialError as exc:
            raise ShmqError(f"shared memory {name}: {exc}") from None
        try:
            self.size = shm.size
            if self.size < size:
                raise ShmqError(f"shared memory {name} is {self.size} bytes, expected {size}")
            prot = mmap.PROT_READ if readonly else mmap.PROT_READ | mmap.PROT_WRITE
            self.mm = mmap.mmap(shm.fd, self.size, prot=prot)
        finally:
            shm.close_fd()
        self.buf = np.frombuffer(self.mm, dtype=np.uint8)
        self.words = np.frombuffer(self.mm, dtype=np.int64, count=self.size // 8)

    @classmethod
    def create(cls, name: str, size: int) -> Segment:
        return cls(name, size, create=True)

    @classmethod
    def attach(cls, name: str, size: int = 0, *, readonly: bool = False) -> Segment:
        return cls(name, size, create=False, readonly=readonly)

    def close(self) -> None:
        """Unmap; views taken from ``buf``/``words`` must no longer be used."""
        if self.mm is None:
            return
        self.buf = self.words = None
        try:
            self.mm.close()
        except BufferError:
            log.debug("segment %s still has views; unmapped when they go", self.name)
        self.mm = None

    def unlink(self) -> None:
        with contextlib.suppress(posix_ipc.ExistentialError):
            posix_ipc.unlink_shared_memory(self.name)

    def destroy(self) -> None:
        self.close()
        self.unlink()


# ``fence()`` is an acquire and release of this lock; hot loops do the two calls inline
FENCE_LOCK = threading.Lock()


def fence() -> None:
    """A full memory barrier (a lock-prefixed instruction inside the lock).

    Wake-ups follow "store my flag, fence, load your counter" on one side and "store my
    counter, fence, load your flag" on the other. x86 may let a load pass an earlier store
    to another address, so without the fence both sides can miss each other and the sleeper
    waits out its whole park timeout.
    """
    FENCE_LOCK.acquire()
    FENCE_LOCK.release()


def create_semaphore(name: str) -> posix_ipc.Semaphore:
    try:
        sem = posix_ipc.Semaphore(name, posix_ipc.O_CREX, mode=0o600, initial_value=0)
    except posix_ipc.ExistentialError as exc:
        raise ShmqError(f"semaphore {name}: {exc}") from None
    files.share_with_group(f"{SHM_DIR}/sem.{name.lstrip('/')}", GROUP_MODE)
    return sem


def open_semaphore(name: str) -> posix_ipc.Semaphore:
    try:
        return posix_ipc.Semaphore(name)
    except posix_ipc.ExistentialError as exc:
        raise ShmqError(f"semaphore {name}: {exc}") from None


def close_gone(cache: dict, live: set) -> None:
    """Close and drop the semaphores of ``cache`` whose key is not in ``live`` (agents cache
    one per client; a client that left must not keep its entry forever)."""
    for key in [k for k in cache if k not in live]:
        cache.pop(key).close()


def unlink_semaphore(name: str) -> None:
    with contextlib.suppress(posix_ipc.ExistentialError):
        posix_ipc.unlink_semaphore(name)


def post(sem: posix_ipc.Semaphore) -> None:
    """Wake one waiter; a semaphore already at its maximum value stays there."""
    with contextlib.suppress(ValueError, posix_ipc.Error):
        sem.release()


def wait(sem: posix_ipc.Semaphore, timeout: float) -> bool:
    """Park until posted or ``timeout`` seconds pass; True when posted."""
    try:
        sem.acquire(timeout)
    except (posix_ipc.BusyError, posix_ipc.SignalError):
        return False  # timed out, or a signal arrived (the caller re-checks its stop flag)
    return True


def names_with_prefix(prefix: str) -> list[str]:
    """Segments and semaphores in ``/dev/shm`` whose POSIX name starts with ``prefix``."""
    stem = prefix.lstrip("/")
    try:
        entries = os.listdir(SHM_DIR)
    except FileNotFoundError:
        return []
    found = []
    for entry in entries:
        if entry.startswith(stem):
            found.append("/" + entry)
        elif entry.startswith("sem." + stem):
            found.append("sem:/" + entry[4:])
    return found


def unlink_orphans() -> list[str]:
    """Unlink segments and semaphores left by brokers whose process no longer exists (their
    names carry the creating pid: ``shmq-<pid>-<token>``); returns the prefixes removed."""
    try:
        entries = os.listdir(SHM_DIR)
    except FileNotFoundError:
        return []
    prefixes = set()
    for entry in entries:
        m = re.match(r"(?:sem\.)?(shmq-(\d+)-[0-9a-f]+)", entry)
        if m and not pid_alive(int(m.group(2))):
            prefixes.add("/" + m.group(1))
    for prefix in prefixes:
        unlink_prefix(prefix)
    return sorted(prefixes)


def unlink_prefix(prefix: str) -> int:
    """Unlink every segment and semaphore named with ``prefix``; returns how many."""
    gone = 0
    for name in names_with_prefix(prefix):
        if name.startswith("sem:"):
            unlink_semaphore(name[4:])
        else:
            with contextlib.suppress(posix_ipc.ExistentialError):
                posix_ipc.unlink_shared_memory(name)
        gone += 1
    return gone
