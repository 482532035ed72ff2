"""The metrics endpoint as a process of the broker's group (RocketMQ 5's ``metricsExporterType
= PROM``, on ``metricsPromExporterHost:metricsPromExporterPort``).

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
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING

from shmq.broker.config.broker_config import BrokerConfig
from shmq.broker.group_process import GroupProcess
from shmq.broker.metrics import supervisor_numbers

if TYPE_CHECKING:
    from shmq.broker.context import BrokerContext

log = logging.getLogger(__name__)


class MetricsProcess(GroupProcess):
    """The endpoint's process; ``address`` is where it listens."""

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
        """Wait until the endpoint listens; its ``host:port``. ``ShmqError`` with the reason
        when it cannot (a port taken). A port the system chose is kept by restarts."""
        port = self.handshake()
        self.address = f"{self.host}:{port}"
        if not self.config.metrics_prom_exporter_port:
            self.config = self.config.replace(metrics_prom_exporter_port=int(port))
        return self.address

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
    """Serve until SIGTERM: ``("ready", port)`` on ``channel`` once listening, or
    ``("error", reason)`` and exit code 1."""
    from prometheus_client import start_http_server
    from prometheus_client.registry import CollectorRegistry

    from shmq.broker.agents.broker_names import BrokerNames
    from shmq.broker.agents.runner import die_with_parent
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
    registry = CollectorRegistry()
    supervisor_sem = open_semaphore(names.supervisor_sem)
    collector = BrokerCollector(config, segments, traffic, channel, lambda: post(supervisor_sem))
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
    while not stopping:
        time.sleep(0.2)
    server.shutdown()
    server.server_close()
    thread.join(5)
    reader.close()
    supervisor_sem.close()
