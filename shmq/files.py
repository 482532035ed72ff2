"""Store files: who may read them (file and directory modes) and making their creation durable.

Messages and offsets are private by default: files 0600, directories 0700, whatever the
umask. ``storeFileMode`` (e.g. ``0640``) lets a group read them (Spark executors running as
another user); directories get the matching execute bits (0750). The mode is process-wide,
set once from the broker config by the supervisor and by each agent before they open files.
"""

from __future__ import annotations

import errno
import os

from shmq.errors import DiskFullError

DEFAULT_FILE_MODE = 0o600
_mode = {"file": DEFAULT_FILE_MODE}


def set_file_mode(mode: int) -> None:
    if mode & ~0o666 or (mode & 0o600) != 0o600:
        raise ValueError(f"storeFileMode {mode:#o} must give the owner rw and nothing beyond rw")
    _mode["file"] = mode


def file_mode() -> int:
    return _mode["file"]


def dir_mode() -> int:
    """The file mode with an execute bit wherever it has a read bit (0640 → 0750)."""
    mode = _mode["file"]
    return mode | (mode & 0o444) >> 2


def makedirs(path: str) -> None:
    """``os.makedirs`` with the store's directory mode on every directory it creates."""
    if os.path.isdir(path):
        return
    parent = os.path.dirname(os.path.abspath(path))
    if parent != path:
        makedirs(parent)
    try:
        os.mkdir(path)
    except FileExistsError:
        return
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise DiskFullError(f"no disk space to create directory {path}") from None
        raise
    os.chmod(path, dir_mode())


def create(path: str, flags: int) -> int:
    """``os.open`` with ``O_CREAT`` and the store's file mode (not narrowed by the umask
    when the file is new)."""
    fd = os.open(path, flags | os.O_CREAT, file_mode())
    try:
        if os.fstat(fd).st_mode & 0o777 != file_mode() and os.fstat(fd).st_uid == os.getuid():
            os.fchmod(fd, file_mode())
    except BaseException:
        os.close(fd)
        raise
    return fd


def fsync_dir(path: str) -> None:
    """Make a file created (or removed) in ``path`` survive a crash of the machine."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
