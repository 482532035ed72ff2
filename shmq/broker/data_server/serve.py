"""The data server's process (the supervisor's ``spawn`` target, ``run_data_server``).

It maps the broker's segments, attaches the ring and consumer slot the supervisor
registered for it, loads the send and pull kernels while the broker starts, then waits on
its pipe for the control server's address and the port to take: the broker's public port,
with the control server's remoting settings (TLS gate, frame budget, idle timeout,
connection limit, workers, the ACL hook). It answers ``("ready", port)`` once it listens,
or ``("error", reason)`` and exits 1. As an agent, it ignores SIGINT (the supervisor orders
the stop), stops on SIGTERM, and dies with its parent.
"""

from __future__ import annotations

import logging
import multiprocessing.connection
import signal
import sys
import time

from shmq.broker.acl.plain_config import PlainAccessConfig
from shmq.broker.acl.plain_file import PlainAclFile, acl_file_path
from shmq.broker.acl.remoting import RemotingAcl
from shmq.broker.acl.validator import PlainAcl
from shmq.broker.agents.broker_names import BrokerNames
from shmq.broker.agents.runner import die_with_parent, name_process
from shmq.broker.client.slots import ClientSlot
from shmq.broker.config.broker_config import BrokerConfig
from shmq.broker.data_server.accounts import PendingAccounts
from shmq.broker.data_server.context import DataContext
from shmq.broker.data_server.reports import MetricsShipper
from shmq.broker.data_server.routing import Router
from shmq.broker.data_server.tables import ControlTables
from shmq.broker.processors.pull import RemotingPull
from shmq.broker.processors.send import RemotingSend
from shmq.broker.stats.events import BrokerEvents
from shmq.broker.store_view import StoreView
from shmq.errors import ShmqError
from shmq.ipc.segment import Segment
from shmq.remoting.client import RemotingClient
from shmq.remoting.relay import RelayTo
from shmq.remoting.security.credentials import Credentials
from shmq.remoting.security.tls_server import TlsServerConfig
from shmq.remoting.server import RemotingServer

log = logging.getLogger(__name__)

STOP_POLL_S = 0.2


def run_data_server(
    config: BrokerConfig,
    prefix: str,
    token: str,
    ring_info: dict,
    consumer_info: dict,
    inner: PlainAccessConfig | None,
    log_level: int,
    channel: multiprocessing.connection.Connection,
) -> None:
    """Serve until SIGTERM (see the module docstring)."""
    logging.basicConfig(
        level=log_level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)-7s shmq.data[%(process)d]: %(message)s",
    )
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stopping: list[bool] = []  # a signal handler takes no lock (an Event's could deadlock)
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    die_with_parent()
    name_process("shmq-data")
    names = BrokerNames(prefix)
    segments = {
        "counters": Segment.attach(names.counters),
        "registry": Segment.attach(names.registry),
        "topics": Segment.attach(names.topics, readonly=True),
        "queues": Segment.attach(names.queues, readonly=True),
    }
    credentials = Credentials(inner.access_key, inner.secret_key) if inner is not None else None
    client = RemotingClient(connect_timeout=1.0, default_timeout=3.0, credentials=credentials)
    try:
        control, port = channel.recv()  # once the control server listens
    except EOFError:  # the broker's start failed meanwhile
        sys.exit(1)
    try:
        server, closing = _build(config, names, segments, client, control, token, ring_info,
                                 consumer_info, port)  # fmt: skip
        server.start()
    except (ShmqError, OSError) as exc:
        channel.send(("error", f"the data server cannot serve on {config.broker_ip1}:{port} "
                               f"(listenPort): {exc}"))  # fmt: skip
        sys.exit(1)
    channel.send(("ready", server.port))
    channel.close()
    while not stopping:
        time.sleep(STOP_POLL_S)
    server.stop()
    for part in closing:
        part.close()
    client.close()


def _build(
    config: BrokerConfig, names: BrokerNames, segments: dict[str, Segment],
    client: RemotingClient, control: str, token: str, ring_info: dict, consumer_info: dict,
    port: int,
) -> tuple[RemotingServer, list]:  # fmt: skip
    """The public server (not started), its processors, and what closes after it."""
    counters, topics = segments["counters"], segments["topics"]
    tables = ControlTables(client, control, config, topics.words, counters.words)
    router = Router(tables, topics.buf, topics.words)
    events = BrokerEvents()
    consumer = ClientSlot("consumer", consumer_info["slot"], consumer_info["gen"],
                          consumer_info["pid"], consumer_info["group"], None,
                          consumer_info["sem"])  # fmt: skip
    server = broker_server(config, config.broker_ip1, port)
    accounts = PendingAccounts(server)
    ctx = DataContext(
        tables, names, counters, segments["registry"],
        StoreView(config.store, segments["queues"], counters.words),
        router, events, ring_info, consumer, accounts,
    )  # fmt: skip
    if config.acl_enable:
        server.authorize = RemotingAcl(PlainAcl(PlainAclFile(acl_file_path(config)))).authorize
    server.observe = events.rpc.answered
    server.relay = RelayTo(control, token, router.serves, accounts.owed)
    send, pull = RemotingSend(ctx), RemotingPull(ctx)
    send.register(server)
    pull.register(server)
    shipper = MetricsShipper(client, control, token, events, server.queued_requests)
    return server, [pull, send, shipper, ctx.store]


def broker_server(
    config: BrokerConfig, host: str, port: int, *, name_suffix: str = "",
    extra_connections: int = 0, tls: TlsServerConfig | None = None,
) -> RemotingServer:  # fmt: skip
    """A broker's remoting server with the remoting settings of broker.conf: the public
    port (the data server's, ``brokerIP1``) or the supervisor's control server, which
    differs in its address, name, connection room and TLS mode."""
    return RemotingServer(
        host,
        port,
        name=f"broker-{config.broker_name}{name_suffix}",
        max_connections=config.server_max_connections + extra_connections,
        max_buffered_bytes=config.server_max_buffered_bytes,
        idle_timeout=config.server_channel_max_idle_time_seconds,
        frame_timeout=config.server_frame_timeout_seconds,
        tls=config.tls_server if tls is None else tls,
        workers=config.server_worker_threads,
    )
