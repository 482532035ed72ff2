"""The namesrv's Prometheus endpoint (``shmq namesrv --metrics-port``): what it knows of the
clusters and how it answers.

RocketMQ 5's namesrv exports no metrics of its own; these carry ``node_type="namesrv"`` and
``node_id`` (its address) like the broker's, RocketMQ's ``rocketmq_rpc_latency`` for its
requests (the remoting server's hook, ``remoting.rpc_latency``) and shmq names for the rest:
brokers registered per cluster and role, topics routed, and with the controller each broker
group's epoch and whether it has a master. A scrape reads the route tables under their own
lock for a copy, in the namesrv's process (no supervisor to ask: the namesrv is one).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from shmq.remoting import rpc_latency

if TYPE_CHECKING:
    from shmq.namesrv.server import NameServer

DEFAULT_METRICS_PORT = 5558  # the broker's is 5557 (metricsPromExporterPort)


class NamesrvCollector(Collector):
    """Collects ``namesrv``'s metrics at scrape time (see the module docstring)."""

    def __init__(self, namesrv: NameServer, latency: rpc_latency.RpcLatency) -> None:
        self.namesrv = namesrv
        self.latency = latency

    def collect(self) -> Iterator[Metric]:
        constant = {"node_type": "namesrv", "node_id": self.namesrv.address}
        names, values = list(constant), list(constant.values())
        info = self.namesrv.routes.cluster_info()
        brokers = GaugeMetricFamily(
            "shmq_namesrv_brokers",
            "Broker processes registered, by cluster and role (master: broker id 0).",
            labels=[*names, "cluster", "role"],
        )
        roles: Counter[tuple[str, str]] = Counter()
        for cluster, broker_names in info["clusterAddrTable"].items():
            for name in broker_names:
                addrs = info["brokerAddrTable"].get(name, {}).get("brokerAddrs", {})
                for broker_id in addrs:
                    roles[(cluster, "master" if str(broker_id) == "0" else "slave")] += 1
        for (cluster, role), n in sorted(roles.items()):
            brokers.add_metric([*values, cluster, role], n)
        yield brokers
        topics = GaugeMetricFamily("shmq_namesrv_topics", "Topics routed.", labels=names)
        topics.add_metric(values, len(self.namesrv.routes.all_topics()))
        yield topics
        yield rpc_latency.histogram(self.latency.snapshot(), constant)
        if self.namesrv.controller is not None:
            yield from self._controller(names, values)

    def _controller(self, names: list[str], values: list[str]) -> Iterator[Metric]:
        epoch = GaugeMetricFamily(
            "shmq_controller_epoch", "A broker group's epoch.", labels=[*names, "broker_name"]
        )
        mastered = GaugeMetricFamily(
            "shmq_controller_has_master",
            "1 while a broker group has a master.",
            labels=[*names, "broker_name"],
        )
        for name, group in self.namesrv.controller.sync_state().items():
            epoch.add_metric([*values, name], group["epoch"])
            mastered.add_metric([*values, name], int(bool(group["masterAddr"])))
        yield epoch
        yield mastered


def serve(namesrv: NameServer, latency: rpc_latency.RpcLatency, host: str, port: int):
    """Serve the endpoint on ``host:port`` (0: any free port) from a daemon thread; the
    HTTP server (``server_address`` names the port; ``shutdown`` stops it)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(NamesrvCollector(namesrv, latency))
    server, _thread = start_http_server(port, addr=host, registry=registry)
    return server
