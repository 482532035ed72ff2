"""The gRPC proxy as a process of the broker's group (RocketMQ 5's proxy in LOCAL mode).

RocketMQ 5 runs its proxy inside the broker's JVM; shmq runs it as a process of its own,
so its Python (protobuf decoding, one thread per stream) never shares a GIL with the
control server or an agent. It talks to the broker as RocketMQ's proxy in CLUSTER mode
does, with remoting requests to the control server, so every POP, send and transaction
goes through the broker's one implementation. The supervisor starts it after the control
server (``spawn`` while the agents start, ``serve`` once the control server listens and
waits until the proxy does; a port it cannot take fails the broker's start with the
reason), restarts it when it dies, as an agent, and stops it first.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import time
from typing import Any

from shmq.broker.acl.plain_config import PlainAccessConfig
from shmq.broker.config.broker_config import BrokerConfig
from shmq.errors import ShmqError

log = logging.getLogger(__name__)

START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 10.0


class ProxyProcess:
    """The proxy's process, started with ``spawn``; ``address`` is where it listens."""

    def __init__(
        self, config: BrokerConfig, log_level: int, inner: PlainAccessConfig | None = None
    ) -> None:
        self.config = config
        self.log_level = log_level
        self.inner = inner  # with ACL on: the account it signs its requests to the broker with
        self.proc: Any = None
        self.address = ""
        self.broker_address = ""
        self._channel: Any = None
        self._restarts: list[float] = []
        self._given_up = False

    def spawn(self) -> None:
        """Start the process: it imports, takes its port and loads its kernels while the
        agents start, then waits for ``serve``."""
        from shmq.proxy.process import run_proxy  # only a broker that serves gRPC imports it

        ctx = mp.get_context("spawn")
        self._channel, theirs = ctx.Pipe()
        self.proc = ctx.Process(
            target=run_proxy,
            args=(self.config, theirs, self.log_level, self.inner),
            name="shmq-proxy",
            daemon=False,
        )
        self.proc.start()
        theirs.close()

    def serve(self, broker_address: str) -> str:
        """Hand the spawned process the control server's address and wait until it serves;
        its ``ip:port``. ``ShmqError`` with its reason when it cannot (a port taken). A
        fixed port that a start got keeps being used by restarts (clients keep it)."""
        self.broker_address = broker_address
        channel, self._channel = self._channel, None
        try:
            if not channel.poll(0):  # else it has failed already: read why
                channel.send(broker_address)
            if not channel.poll(START_TIMEOUT_S):
                raise ShmqError(f"the gRPC proxy did not start in {START_TIMEOUT_S:.0f} s")
            kind, detail = channel.recv()
        except (EOFError, BrokenPipeError):
            self.proc.join(5)
            raise ShmqError(
                f"the gRPC proxy exited with code {self.proc.exitcode} at start"
            ) from None
        finally:
            channel.close()
        if kind != "ready":
            self.proc.join(5)
            raise ShmqError(str(detail))
        self.address = f"{self.config.broker_ip1}:{detail}"
        if not self.config.grpc_server_port:
            self.config = self.config.replace(grpc_server_port=int(detail))
        return self.address

    def watch(self) -> None:
        """Restart the proxy if it died (at most ``agentRestartMax`` times a minute; then
        the broker serves on without gRPC, saying so)."""
        if self.proc is None or self.proc.is_alive() or self._given_up:
            return
        now = time.monotonic()
        self._restarts = [t for t in self._restarts if now - t < 60] + [now]
        log.error("gRPC proxy (pid %s) died with exit code %s", self.proc.pid, self.proc.exitcode)
        self.proc.join(0)
        if len(self._restarts) > self.config.agent_restart_max:
            log.critical("the gRPC proxy died %d times within a minute: not restarted; the "
                         "broker serves remoting clients only", len(self._restarts))  # fmt: skip
            self._given_up = True
            return
        try:
            self.spawn()
            self.serve(self.broker_address)
        except ShmqError as exc:
            log.error("gRPC proxy restart failed: %s", exc)

    def stop(self) -> None:
        if self._channel is not None:  # spawned, never served: the broker's start failed
            self._channel.close()
            self._channel = None
        if self.proc is None:
            return
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(STOP_TIMEOUT_S)
        if self.proc.is_alive():
            log.error("gRPC proxy did not stop in %.0f s: killed", STOP_TIMEOUT_S)
            self.proc.kill()
            self.proc.join(5)
        self.proc = None
