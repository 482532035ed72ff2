"""Store files are private by default (0600 files, 0700 directories, whatever the umask),
``storeFileMode`` opens them to a group, and consume-queue files are sparse (RocketMQ's are):
a queue with one message holds one reserved step of disk, not 6,000,000 bytes."""

from __future__ import annotations

import os
import stat

import pytest

from shmq.errors import ConfigError
from shmq.store import MessageStore
from shmq.store.mapped_file import RESERVE_STEP


def modes(root) -> dict[str, int]:
    out = {}
    for path, dirs, names in os.walk(root):
        for name in dirs + names:
            full = os.path.join(path, name)
            out[os.path.relpath(full, root)] = stat.S_IMODE(os.lstat(full).st_mode)
    return out


@pytest.fixture
def loose_umask():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def fill(root, **config) -> None:
    with MessageStore.open(root, mapped_file_size_commit_log=1 << 20, **config) as store:
        store.put("Private", 0, b"secret", keys=["k"])
        store.dispatch()


@pytest.mark.parametrize(("mode", "file_mode", "dir_mode"), [(None, 0o600, 0o700),
                                                              ("0640", 0o640, 0o750)])  # fmt: skip
def test_store_files_and_directories_get_the_store_mode(tmp_path, loose_umask, mode, file_mode,
                                                        dir_mode):  # fmt: skip
    root = tmp_path / "store"
    fill(root, **({"store_file_mode": mode} if mode else {}))
    found = modes(root)
    assert {"commitlog", "consumequeue/Private/0", "index", "checkpoint", "lock"} <= set(found)
    for rel, m in found.items():
        want = dir_mode if os.path.isdir(root / rel) else file_mode
        assert m == want, f"{rel} is {m:#o}, expected {want:#o}"
    assert stat.S_IMODE(os.stat(root).st_mode) == dir_mode


def test_a_bad_store_file_mode_is_refused(tmp_path):
    for bad in ("0400", "0777", "640x", "0755"):
        with pytest.raises(ConfigError, match="storeFileMode"):
            MessageStore.open(tmp_path / "s", store_file_mode=bad)


def test_consume_queue_files_are_sparse(tmp_path):
    root = tmp_path / "store"
    fill(root)
    [name] = os.listdir(root / "consumequeue" / "Private" / "0")
    st = os.stat(root / "consumequeue" / "Private" / "0" / name)
    assert st.st_size == 6_000_000
    assert st.st_blocks * 512 <= RESERVE_STEP
