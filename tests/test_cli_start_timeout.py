"""``shmq start --daemon`` that gives up (the broker not up within ``--start-timeout``)
stops what it started: no process of it and no shared memory is left behind."""

from __future__ import annotations

import os

from e2e_helpers import free_port, shm_entries, shmq


def processes_with(text: str) -> list[int]:
    """Pids of the processes whose command line contains ``text``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if text.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found


def test_a_daemon_start_that_gives_up_leaves_nothing_running(tmp_path):
    before = shm_entries()
    store = str(tmp_path / "given-up")
    failed = shmq("start", "--daemon", "--store", store, "--start-timeout", "0.5",
                  "--namesrv-port", str(free_port()), "--broker-port", str(free_port()),
                  "--mapped-file-size", str(4 << 20))  # fmt: skip
    assert failed.returncode == 1, failed.stdout
    assert "did not start within 0.5 s" in failed.stderr, failed.stderr
    assert processes_with(store) == []
    assert shm_entries() - before == set()
