"""The gRPC proxy as a process of the broker's group (RocketMQ 5's proxy in LOCAL mode).

RocketMQ 5 runs its proxy inside the broker's JVM; shmq runs it as a process of its own,
so its Python (protobuf decoding, one thread per stream) never shares a GIL with the
control server or an agent. It talks to the broker as RocketMQ's proxy in CLUSTER mode
does, with remoting requests to the control server, so every POP, send and transaction
goes through the broker's one implementation. The supervisor starts it after the control
server (``spawn`` while the agents start, ``serve`` once the control server listens and
waits until the proxy does; a port it cannot take fails the broker's start with the
reason), restarts it when it dies, as an agent, and stops it first (``group_process``).
"""

from __future__ import annotations

from shmq.broker.acl.plain_config import PlainAccessConfig
from shmq.broker.config.broker_config import BrokerConfig
from shmq.broker.group_process import GroupProcess


class ProxyProcess(GroupProcess):
    """The proxy's process; ``address`` is where it listens."""

    def __init__(
        self, config: BrokerConfig, log_level: int, inner: PlainAccessConfig | None = None
    ) -> None:
        super().__init__("shmq-proxy", "the gRPC proxy", config.agent_restart_max)
        self.config = config
        self.log_level = log_level
        self.inner = inner  # with ACL on: the account it signs its requests to the broker with
        self.address = ""
        self.broker_address = ""

    def spawn(self) -> None:
        """Start the process: it imports, takes its port and loads its kernels while the
        agents start, then waits for ``serve``."""
        from shmq.proxy.process import run_proxy  # only a broker that serves gRPC imports it

        self.start_process(
            run_proxy, lambda theirs: (self.config, theirs, self.log_level, self.inner)
        )

    def serve(self, broker_address: str) -> str:
        """Hand the spawned process the control server's address and wait until it serves;
        its ``ip:port``. ``ShmqError`` with its reason when it cannot (a port taken). A
        fixed port that a start got keeps being used by restarts (clients keep it)."""
        self.broker_address = broker_address
        try:
            port = self.handshake(broker_address)
        finally:
            self.close_channel()  # the proxy needs nothing more from the supervisor
        self.address = f"{self.config.broker_ip1}:{port}"
        if not self.config.grpc_server_port:
            self.config = self.config.replace(grpc_server_port=int(port))
        return self.address

    def restart(self) -> None:
        self.spawn()
        self.serve(self.broker_address)
