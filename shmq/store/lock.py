"""Who owns a store: the ``lock`` file (flock) and the ``abort`` marker.

The lock makes a second broker on the same store fail with a clear error instead of writing
over the first one. ``abort`` exists while a store is open for writing; finding it at open
means the last run did not shut down cleanly, so recovery takes the abnormal path.
"""

from __future__ import annotations

import fcntl
import os

from shmq import files
from shmq.errors import StoreLockedError


class StoreLock:
    def __init__(self, root: str) -> None:
        self.path = os.path.join(root, "lock")
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = files.create(self.path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").split()
            os.close(fd)
            pid = holder[1] if len(holder) > 1 else "unknown"
            raise StoreLockedError(
                f"store {os.path.dirname(self.path)} is locked by another process (pid {pid}); "
                "stop it or use another store directory"
            ) from None
        # same length every time, no truncate: rewriting the page needs no new disk block
        os.pwrite(fd, f"lock {os.getpid():<10}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


class AbortMarker:
    def __init__(self, root: str) -> None:
        self.path = os.path.join(root, "abort")

    def exists(self) -> bool:
        return os.path.exists(self.path)

    def create(self) -> None:
        fd = files.create(self.path, os.O_WRONLY)
        os.fsync(fd)
        os.close(fd)
        files.fsync_dir(os.path.dirname(self.path))

    def remove(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            return
        files.fsync_dir(os.path.dirname(self.path))
