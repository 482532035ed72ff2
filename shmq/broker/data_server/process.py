"""The data server as a process of the broker's group (``group_process``), the supervisor's
side: ``spawn`` it while the agents start (it imports and loads kernels meanwhile),
``serve`` once the control server listens (it takes the public port: ``listenPort``, any
free one for 0, and the same one again at every restart, so clients reconnect where they
were), ``watch`` from housekeeping, ``stop`` first at the broker's stop.

The supervisor registers the ring the TCP sends go through and the consumer slot the
pull hold parks on before the first spawn (under its own pid: they outlive the process),
and generates the secret the data server's relay links open with (``secrets``). It holds
the configured port bound (not listening) from then until ``serve``: the control server
binds any free loopback port meanwhile, and the kernel could otherwise hand it that one.
"""

from __future__ import annotations

import contextlib
import secrets
import socket

from shmq.broker.acl.plain_config import PlainAccessConfig
from shmq.broker.client.slots import ClientSlot
from shmq.broker.config.broker_config import BrokerConfig
from shmq.broker.group_process import GroupProcess


class DataServerProcess(GroupProcess):
    """The data server's process; ``address`` is the broker's public ``ip:port``."""

    def __init__(
        self, config: BrokerConfig, prefix: str, log_level: int, ring_info: dict,
        consumer: ClientSlot, inner: PlainAccessConfig | None,
    ) -> None:  # fmt: skip
        super().__init__("shmq-data", "the data server", config.agent_restart_max)
        self.config = config
        self.prefix = prefix
        self.log_level = log_level
        self.ring_info = ring_info
        self.consumer_info = {"slot": consumer.index, "gen": consumer.gen, "pid": consumer.pid,
                              "group": consumer.group, "sem": consumer.sem_name}  # fmt: skip
        self.inner = inner  # with ACL on: the account its requests to the control server sign
        self.token = secrets.token_hex(32)
        self.port = config.listen_port
        self.control = ""
        self._reserved = _reserve(config.broker_ip1, self.port)

    @property
    def address(self) -> str:
        return f"{self.config.broker_ip1}:{self.port}" if self.port else ""

    def spawn(self) -> None:
        from shmq.broker.data_server.serve import run_data_server  # imports the processors

        self.start_process(run_data_server, lambda theirs: (
            self.config, self.prefix, self.token, self.ring_info, self.consumer_info,
            self.inner, self.log_level, theirs,
        ))  # fmt: skip

    def serve(self, control: str) -> str:
        """Hand the spawned process the control server's address and the port, and wait
        until it serves; the broker's public address. ``ShmqError`` with its reason when
        it cannot (a port taken)."""
        self.control = control
        self._release()
        try:
            self.port = int(self.handshake((control, self.port)))
        finally:
            self.close_channel()
        return self.address

    def restart(self) -> None:
        self.spawn()
        self.serve(self.control)

    def stop(self) -> None:
        self._release()
        super().stop()

    def _release(self) -> None:
        if self._reserved is not None:
            self._reserved.close()
            self._reserved = None


def _reserve(host: str, port: int) -> socket.socket | None:
    """``port`` on ``host`` bound, so that no bind to any free port takes it (None for
    port 0, or when it cannot be bound: the data server then says why it cannot serve)."""
    if not port:
        return None
    sock = None
    with contextlib.suppress(OSError):
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        # as the server's own listener: a connection of the broker before it in TIME_WAIT
        # does not stop it
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        return sock
    if sock is not None:
        sock.close()
    return None
