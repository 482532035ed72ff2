"""The gRPC proxy's process (the supervisor's ``spawn`` target, ``run_proxy``).

It serves ``MessagingService`` on ``brokerIP1:grpcServerPort`` with grpc's asyncio server
and reaches the broker only through its control server (``broker_address``). As an agent
does, it ignores SIGINT (Ctrl-C reaches the whole process group; the supervisor orders the
stop), stops on SIGTERM (in-flight calls get a grace period), and dies with its parent.

TLS follows the broker's ``tlsServerMode`` as RocketMQ's proxy does, but for permissive: its
Netty server peeks at each connection to choose, and grpc's server cannot, so a port is TLS
or plaintext. Permissive keeps plaintext (every client that works today keeps working);
enforcing serves TLS only, with the broker's certificate (or, in test mode, a self-signed
one); client certificates are never asked for, as in RocketMQ's proxy.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing.connection
import os
import signal
import socket
import sys

import grpc

from shmq.broker.acl.plain_config import PlainAccessConfig
from shmq.broker.acl.plain_file import PlainAclFile, acl_file_path
from shmq.broker.acl.validator import PlainAcl
from shmq.broker.agents.runner import die_with_parent, name_process
from shmq.broker.config.broker_config import BrokerConfig
from shmq.codec import batch_body, pull_body
from shmq.errors import ConfigError
from shmq.proxy.authorization import GrpcAcl
from shmq.proxy.proxy_config import GRPC_MAX_INBOUND_MESSAGE_SIZE, ProxyConfig
from shmq.proxy.service import MessagingService
from shmq.proxy.v2 import service_pb2_grpc
from shmq.remoting.security.credentials import Credentials
from shmq.remoting.security.tls_server import ENFORCING

log = logging.getLogger(__name__)

STOP_GRACE_S = 5.0
MAX_CONCURRENT_RPCS = 10_000  # past it grpc answers RESOURCE_EXHAUSTED


def run_proxy(
    config: BrokerConfig,
    channel: multiprocessing.connection.Connection,
    log_level: int,
    inner: PlainAccessConfig | None = None,
) -> None:
    """Serve until SIGTERM. The supervisor starts this process while its agents start, so
    imports, the port and the kernels are ready by the time it sends the broker's control
    address on ``channel``; ``channel`` then gets ``("ready", port)`` once serving, or
    ``("error", reason)`` (and the process exits 1) when it cannot listen. With ACL on,
    clients are checked against ``plain_acl.yml`` and requests to the broker signed as
    ``inner`` (``shmq.broker.acl.inner``)."""
    logging.basicConfig(
        level=log_level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)-7s shmq.proxy[%(process)d]: %(message)s",
    )
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()
    name_process("shmq-proxy")
    sys.exit(asyncio.run(_serve(config, channel, inner)))


async def _serve(
    config: BrokerConfig,
    channel: multiprocessing.connection.Connection,
    inner: PlainAccessConfig | None,
) -> int:
    try:
        acl = GrpcAcl(PlainAcl(PlainAclFile(acl_file_path(config)))) if config.acl_enable else None
    except ConfigError as exc:
        channel.send(("error", str(exc)))
        return 1
    credentials = Credentials(inner.access_key, inner.secret_key) if inner is not None else None
    cfg = ProxyConfig.of(config)
    host = config.broker_ip1
    server = grpc.aio.server(
        options=[("grpc.max_receive_message_length", GRPC_MAX_INBOUND_MESSAGE_SIZE),
                 ("grpc.so_reuseport", 0)],
        maximum_concurrent_rpcs=MAX_CONCURRENT_RPCS,
    )  # fmt: skip
    where = f"{host}:{cfg.grpc_server_port}"
    tls = config.tls_server
    try:
        if tls.mode == ENFORCING:
            port = server.add_secure_port(where, grpc.ssl_server_credentials([tls.key_and_cert()]))
        else:
            port = server.add_insecure_port(where)
    except (RuntimeError, OSError, ValueError) as exc:  # grpc's, or a certificate's
        port, reason = 0, str(exc)
    else:
        reason = "the port is taken or the address is not this host's"
    if not port:
        channel.send(("error", f"cannot listen on {where} for the gRPC proxy (grpcServerPort): "
                               f"{reason}"))  # fmt: skip
        return 1
    try:
        broker_address = channel.recv()  # once the control server listens
    except EOFError:  # the broker's start failed meanwhile
        return 1
    client_id = f"{socket.gethostname()}@{os.getpid()}@proxy"
    service = MessagingService(cfg, broker_address, config.broker_name, host, client_id,
                               acl, credentials)  # fmt: skip
    service_pb2_grpc.add_MessagingServiceServicer_to_server(service, server)
    loop = asyncio.get_running_loop()
    service.bound(port, loop)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    await server.start()
    heartbeats = asyncio.ensure_future(service.heartbeat_loop())
    channel.send(("ready", port))
    # the kernels a batch send and a POP body need, loaded now rather than at a client's first
    # request; after ``ready``: while the broker starts, its agents need the two cores
    batch_body.warm_up()
    pull_body.warm_up()
    log.info("gRPC proxy listening on %s:%d (%s) for broker %s", host, port,
             "TLS" if tls.mode == ENFORCING else "plaintext", broker_address)  # fmt: skip
    await stop.wait()
    heartbeats.cancel()
    await server.stop(STOP_GRACE_S)
    service.close()
    return 0
