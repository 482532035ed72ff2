"""Checkpoint layout, the lock file across processes, and the abort marker."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from shmq.errors import StoreLockedError
from shmq.store.checkpoint import Checkpoint
from shmq.store.lock import AbortMarker, StoreLock


def test_checkpoint_layout_and_min_timestamp(tmp_path):
    path = str(tmp_path / "checkpoint")
    cp = Checkpoint(path)
    cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp = 10_000, 8_000, 2
    cp.close()
    raw = Path(path).read_bytes()
    assert len(raw) == 4096
    assert struct.unpack_from(">qqq", raw) == (10_000, 8_000, 2)
    again = Checkpoint(path)
    assert again.min_timestamp() == 5_000  # min(physic, logics) - 3 s
    assert again.min_timestamp_index() == 2
    again.close()


def test_lock_is_exclusive_across_processes(tmp_path):
    lock = StoreLock(str(tmp_path))
    lock.acquire()
    code = (
        "import sys; from shmq.store.lock import StoreLock\n"
        "from shmq.errors import StoreLockedError\n"
        f"try:\n    StoreLock({str(tmp_path)!r}).acquire()\n"
        "except StoreLockedError as e:\n    print(e); sys.exit(3)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 3, out.stderr
    assert f"locked by another process (pid {os.getpid()})" in out.stdout
    lock.release()
    other = StoreLock(str(tmp_path))
    other.acquire()  # free again once released
    with pytest.raises(StoreLockedError):
        StoreLock(str(tmp_path)).acquire()
    other.release()


def test_abort_marker(tmp_path):
    marker = AbortMarker(str(tmp_path))
    assert not marker.exists()
    marker.create()
    assert marker.exists() and os.path.getsize(marker.path) == 0
    marker.remove()
    marker.remove()
    assert not marker.exists()
