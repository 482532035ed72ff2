"""Store files: who may read them (file and directory modes) and making their creation durable.

Messages and offsets are private by default: files 0600, directories 0700, whatever the
umask. ``storeFileMode`` (e.g. ``0640``) lets a group read them (Spark executors running as
another user); directories get the matching execute bits (0750). ``localClientGroup`` names
the group: what the broker creates (files, directories, shared memory) belongs to it, with
group read (files) or read-write (shared memory), so its members' clients work locally. The
mode and group are process-wide, set once from the broker config by the supervisor and by
each agent before they open files.
"""

from __future__ import annotations

import errno
import os

from shmq.errors import DiskFullError

DEFAULT_FILE_MODE = 0o600
SETGID = 0o2000
_mode = {"file": DEFAULT_FILE_MODE, "gid": -1}


def set_file_mode(mode: int, gid: int = -1) -> None:
    """Files get ``mode``; with a group ``gid`` (>= 0) they belong to it and it may read them."""
    if mode & ~0o666 or (mode & 0o600) != 0o600:
        raise ValueError(f"storeFileMode {mode:#o} must give the owner rw and nothing beyond rw")
    _mode["file"] = mode | (0o040 if gid >= 0 else 0)
    _mode["gid"] = gid


def file_mode() -> int:
    return _mode["file"]


def group() -> int:
    """The group what the broker creates belongs to (``localClientGroup``); -1: none."""
    return _mode["gid"]


def share_with_group(path: str, mode: int, fd: int | None = None) -> None:
    """Give ``path`` (or the open ``fd``) to the configured group with ``mode``; nothing
    without one."""
    gid = _mode["gid"]
    if gid < 0:
        return
    if fd is not None:
        os.fchown(fd, -1, gid)
        os.fchmod(fd, mode)
    else:
        os.chown(path, -1, gid)
        os.chmod(path, mode)


def share_store(root: str) -> None:
    """Give an existing store (made before ``localClientGroup`` was set) to the group."""
    if _mode["gid"] < 0:
        return
    for directory, _, names in os.walk(root):
        share_with_group(directory, dir_mode() | SETGID)
        for name in names:
            path = os.path.join(directory, name)
            if not os.path.islink(path):
                share_with_group(path, file_mode())


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
    share_with_group(path, dir_mode() | SETGID)  # what others create in it is the group's too


def create(path: str, flags: int) -> int:
    """``os.open`` with ``O_CREAT`` and the store's file mode (not narrowed by the umask
    when the file is new)."""
    fd = os.open(path, flags | os.O_CREAT, file_mode())
    try:
        st = os.fstat(fd)
        if st.st_uid == os.getuid() and (
            st.st_mode & 0o777 != file_mode() or (group() >= 0 and st.st_gid != group())
        ):
            os.fchmod(fd, file_mode())
            share_with_group(path, file_mode(), fd)
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
