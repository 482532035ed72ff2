"""The metrics endpoint as a process of the broker's group (RocketMQ 5's ``metricsExporterType
= PROM``, on ``metricsPromExporterHost:metricsPromExporterPort``), or the process that pushes
the same metrics to an OTLP collector (``OTLP_GRPC``: ``otlp``).

Its HTTP server and the Python of a scrape must not run in the supervisor's GIL, so the
endpoint is a process of its own (``group_process``: spawned while the agents start, awaited
once the control server serves, restarted when it dies, stopped first). It maps the broker's
segments read-only and its consume queues read-only, and asks the supervisor over its pipe for
the few numbers only the supervisor holds (``supervisor_numbers``).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING

from shmq.broker.config.broker_config import BrokerConfig
from shmq.broker.group_process import GroupProcess
from shmq.broker.metrics import supervisor_numbers

if TYPE_CHECKING:
    from prometheus_client.registry import Collector

    from shmq.broker.context import BrokerContext

log = logging.getLogger(__name__)


class MetricsProcess(GroupProcess):
    """The endpoint's process; ``address`` is where it listens (PROM) or pushes (OTLP_GRPC:
    the collector's ``host:port``)."""

    def __init__(self, config: BrokerConfig, prefix: str, log_level: int) -> None:
        super().__init__("shmq-metrics", "the metrics endpoint", config.agent_restart_max)
        self.config = config
        self.prefix = prefix  # the broker's shared-memory names
        self.log_level = log_level
        self.address = ""

    @property
    def host(self) -> str:
        return self.config.metrics_prom_exporter_host or self.config.broker_ip1

    def spawn(self) -> None:
        """Start the process: it imports and maps the broker's segments while the agents
        start."""
        self.start_process(
            run_metrics, lambda theirs: (self.config, self.prefix, self.log_level, theirs)
        )

    def serve(self) -> str:
        """Wait until the endpoint listens (or the pusher is set up); its ``address``.
        ``ShmqError`` with the reason when it cannot (a port taken, the ``otlp`` extra
        missing). A port the system chose is kept by restarts."""
        detail = self.handshake()
        if self.config.metrics_exporter == "OTLP_GRPC":
            self.address = detail
            return self.address
        port = detail
        self.address = f"{self.host}:{port}"
        if not self.config.metrics_prom_exporter_port:
            self.config = self.config.replace(metrics_prom_exporter_port=int(port))
        return self.address

    def describe(self) -> str:
        """Where the metrics go, for ``shmq start`` and ``shmq broker`` to print."""
        if self.config.metrics_exporter == "OTLP_GRPC":
            every = self.config.metric_grpc_exporter_interval_in_mills
            return f"metrics pushed over OTLP gRPC to {self.address} every {every} ms"
        return f"metrics for Prometheus: http://{self.address}/metrics"

    def restart(self) -> None:
        self.spawn()
        self.serve()

    def answer(self, ctx: BrokerContext) -> None:
        """Housekeeping: answer the endpoint's question for the supervisor's numbers, if it
        asked one."""
        if self.channel is None:
            return
        with contextlib.suppress(EOFError, OSError):  # it died: ``watch`` starts it again
            supervisor_numbers.answer(self.channel, ctx)


def run_metrics(config: BrokerConfig, prefix: str, log_level: int, channel: Connection) -> None:
    """Serve (or push) until SIGTERM: ``("ready", port)`` on ``channel`` once listening
    (``("ready", "host:port")`` of the collector once pushing), or ``("error", reason)`` and
    exit code 1."""
    from shmq.broker.agents.broker_names import BrokerNames
    from shmq.broker.agents.runner import die_with_parent, name_process
    from shmq.broker.metrics.collector import BrokerCollector
    from shmq.broker.metrics.topic_traffic import TopicTraffic
    from shmq.ipc.segment import Segment, open_semaphore, post
    from shmq.store.reader import StoreReader

    logging.basicConfig(
        level=log_level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)-7s shmq.metrics[%(process)d]: %(message)s",
    )
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor stops it
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    die_with_parent()
    name_process("shmq-metrics")
    names = BrokerNames(prefix)
    segments = {
        kind: Segment.attach(name, readonly=True)
        for kind, name in (
            ("counters", names.counters),
            ("topics", names.topics),
            ("queues", names.queues),
            ("ha", names.ha_table),
        )
    }
    store = config.store
    reader = StoreReader(
        store.store_path_root_dir, store.mapped_file_size_commit_log, store.consume_queue_file_size
    )
    traffic = TopicTraffic(reader, segments["queues"].buf, segments["queues"].words)
    traffic.update()  # what the queues hold now is not traffic
    supervisor_sem = open_semaphore(names.supervisor_sem)
    collector = BrokerCollector(config, segments, traffic, channel, lambda: post(supervisor_sem))
    if config.metrics_exporter == "OTLP_GRPC":
        _push(config, collector, channel, lambda: bool(stopping))
    else:
        _serve(config, collector, channel, lambda: bool(stopping))
    reader.close()
    supervisor_sem.close()


def _push(
    config: BrokerConfig, collector: Collector, channel: Connection, stopping: Callable[[], bool]
) -> None:
    """Push to the OTLP collector until ``stopping()``."""
    try:
        from shmq.broker.metrics.otlp import OtlpPusher
    except ImportError as exc:
        channel.send(("error", "metricsExporterType = OTLP_GRPC needs the otlp extra "
                               f"(pip install 'shmq[otlp]'): {exc}"))  # fmt: skip
        sys.exit(1)
    pusher = OtlpPusher(config, collector)
    channel.send(("ready", pusher.target))
    log.info("metrics pushed over OTLP gRPC to %s every %.3g s", pusher.target, pusher.interval_s)
    pusher.run(stopping)
    pusher.close()


def _serve(
    config: BrokerConfig, collector: Collector, channel: Connection, stopping: Callable[[], bool]
) -> None:
    """Serve the Prometheus endpoint until ``stopping()``."""
    from prometheus_client import start_http_server
    from prometheus_client.registry import CollectorRegistry

    registry = CollectorRegistry()
    registry.register(collector)
    host, port = (
        config.metrics_prom_exporter_host or config.broker_ip1,
        config.metrics_prom_exporter_port,
    )
    try:
        server, thread = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        channel.send(
            (
                "error",
                f"cannot listen on {host}:{port} for the metrics endpoint "
                f"(metricsPromExporterPort): {exc}",
            )
        )
        sys.exit(1)
    channel.send(("ready", server.server_port))
    log.info("metrics endpoint listening on http://%s:%d/metrics", host, server.server_port)
    while not stopping():
        time.sleep(0.2)
    server.shutdown()
    server.server_close()
    thread.join(5)
