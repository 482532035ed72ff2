"""Starting and stopping the external servers some peers need (Redis, RabbitMQ).

Each server runs in its own session (so a Ctrl-C in the terminal reaches the bench, which
then stops it in order, rather than killing it mid-write), on a free loopback port, with
its data in a temporary directory. ``server_process`` stops the whole process group it
started (SIGTERM, then SIGKILL) and removes the directory, on success, failure or Ctrl-C.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from bench.peers.base import PeerUnavailable

SBIN = ("/usr/sbin", "/usr/lib/rabbitmq/bin", "/usr/bin")


def find_program(name: str, *extra: str) -> str | None:
    """``name`` on PATH or in the sbin directories Debian installs servers to."""
    return shutil.which(name) or shutil.which(name, path=os.pathsep.join((*extra, *SBIN)))


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the kernel's choice)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def temp_dir(prefix: str) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def server_process(
    argv: Sequence[str],
    *,
    ready: Callable[[], bool],
    start_timeout_s: float,
    log: Path,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> Iterator[subprocess.Popen]:
    """Run ``argv`` until ``ready()`` holds (``PeerUnavailable`` with the log's tail if it
    exits or ``start_timeout_s`` passes first), yield it, and stop its process group."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + start_timeout_s
        while not ready():
            if proc.poll() is not None:
                raise PeerUnavailable(
                    f"{Path(argv[0]).name} exited with code {proc.returncode}: {_tail(log)}"
                )
            if time.monotonic() > deadline:
                raise PeerUnavailable(
                    f"{Path(argv[0]).name} did not start within {start_timeout_s:.0f} s"
                )
            time.sleep(0.2)
        yield proc
    finally:
        stop_group(proc)


def stop_group(proc: subprocess.Popen, grace_s: float = 15.0) -> None:
    """SIGTERM the session ``proc`` leads, wait for ``proc``, then SIGKILL what is left."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(grace_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)


def _tail(log: Path, lines: int = 3) -> str:
    try:
        text = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(text[-lines:]) or "(empty log)"
