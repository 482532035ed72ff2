"""A process of the broker's group that serves a port rather than running an agent's loop: the
gRPC proxy (``proxy_process``) and the metrics endpoint (``metrics.process``).

Their Python (a gRPC server, an HTTP server) must not share a GIL with supervision or the
writer, so each is a process of its own, started with ``spawn`` like an agent. What they share
is how the supervisor drives them: the child answers ``("ready", detail)`` on its pipe once it
serves, or ``("error", reason)`` when it cannot (a port taken), and the broker's start fails
with that reason; the supervisor's housekeeping restarts one that died (at most
``agentRestartMax`` times a minute, then the broker serves on without it, saying so); ``stop``
ends it with SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from shmq.errors import ShmqError

log = logging.getLogger(__name__)

START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 10.0


class GroupProcess:
    """One such process: ``start_process``, wait for its ``handshake``, ``watch`` it from
    housekeeping, ``stop`` it. A subclass says how it starts again (``restart``)."""

    def __init__(self, name: str, what: str, restart_max: int) -> None:
        self.name = name  # the process's name (``ps``)
        self.what = what  # how messages name it: "the gRPC proxy"
        self.restart_max = restart_max
        self.proc: Any = None
        self.channel: Connection | None = None  # the supervisor's end of the pipe
        self._restarts: list[float] = []
        self._given_up = False

    def start_process(
        self, target: Callable[..., None], make_args: Callable[[Connection], tuple]
    ) -> None:
        """Start ``target(*make_args(child's end of the pipe))`` in a new process."""
        ctx = mp.get_context("spawn")
        self.channel, theirs = ctx.Pipe()
        self.proc = ctx.Process(target=target, args=make_args(theirs), name=self.name,
                                daemon=False)  # fmt: skip
        self.proc.start()
        theirs.close()

    def handshake(self, hello: Any = None, timeout: float = START_TIMEOUT_S) -> Any:
        """Send ``hello`` (when given and the child has not answered already: then it
        failed) and wait for the child's answer: the detail of its ``ready``. ``ShmqError``
        with its reason when it cannot serve or exits."""
        channel = self.channel
        try:
            if hello is not None and not channel.poll(0):
                channel.send(hello)
            if not channel.poll(timeout):
                raise ShmqError(f"{self.what} did not start in {timeout:.0f} s")
            kind, detail = channel.recv()
        except (EOFError, OSError):
            self.proc.join(5)
            raise ShmqError(f"{self.what} exited with code {self.proc.exitcode} at start") from None
        if kind != "ready":
            self.proc.join(5)
            raise ShmqError(str(detail))
        return detail

    def close_channel(self) -> None:
        if self.channel is not None:
            self.channel.close()
            self.channel = None

    def restart(self) -> None:
        """Start the process again after it died (``start_process`` and ``handshake``)."""
        raise NotImplementedError

    def watch(self) -> None:
        """Start the process again if it died, unless it died too often within a minute."""
        if self.proc is None or self.proc.is_alive() or self._given_up:
            return
        now = time.monotonic()
        self._restarts = [t for t in self._restarts if now - t < 60] + [now]
        log.error("%s (pid %s) died with exit code %s", self.what, self.proc.pid,
                  self.proc.exitcode)  # fmt: skip
        self.proc.join(0)
        self.close_channel()
        if len(self._restarts) > self.restart_max:
            log.critical("%s died %d times within a minute: not restarted (agentRestartMax)",
                         self.what, len(self._restarts))  # fmt: skip
            self._given_up = True
            return
        try:
            self.restart()
        except ShmqError as exc:
            log.error("%s restart failed: %s", self.what, exc)

    def stop(self) -> None:
        self.close_channel()
        if self.proc is None:
            return
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(STOP_TIMEOUT_S)
        if self.proc.is_alive():
            log.error("%s did not stop in %.0f s: killed", self.what, STOP_TIMEOUT_S)
            self.proc.kill()
            self.proc.join(5)
        self.proc = None
