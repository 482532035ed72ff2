"""RocketMQ 5's client metrics for shmq's producers and push consumers, on
``prometheus_client``: what a RocketMQ 5 client records (``ClientMeterManager``), with its
names, labels and buckets (milliseconds):

- ``rocketmq_send_cost_time`` (topic, client_id, invocation_status): a send from the call to
  its answer (sync), or to its future's settling (async);
- ``rocketmq_delivery_latency`` (topic, client_id, consumer_group): from a message's store
  time to its arrival at the consumer;
- ``rocketmq_await_time`` (the same labels): from its arrival to the listener's call;
- ``rocketmq_process_time`` (the same, and invocation_status): the listener's call;
- ``rocketmq_consumer_cached_messages`` / ``_bytes``: what the push consumer holds pulled
  and not yet consumed, per topic (read at scrape time).

They are off unless a client is given ``metrics=True`` (the process's default registry) or a
``CollectorRegistry``; off, they cost one ``None`` test per send and per listener call.
RocketMQ 5's clients push these over OTLP to the endpoint the proxy names; shmq's clients
are scraped: serve the registry with ``serve`` (or ``prometheus_client``'s own servers).
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

SEND_BUCKETS_MS = (1, 5, 10, 20, 50, 200, 500)
DELIVERY_BUCKETS_MS = (1, 5, 10, 20, 50, 200, 500)
AWAIT_BUCKETS_MS = (1, 5, 20, 100, 1000, 5000, 10000)
PROCESS_BUCKETS_MS = (1, 5, 10, 100, 1000, 10000, 60000)
CONSUMER_LABELS = ("topic", "client_id", "consumer_group")

_lock = threading.Lock()
_by_registry: weakref.WeakKeyDictionary[CollectorRegistry, ClientMetrics] = (
    weakref.WeakKeyDictionary()
)


def client_id(group: str) -> str:
    """A client's ``client_id`` label: host, process and group (one process may run clients
    of several groups)."""
    return f"{os.uname().nodename}@{os.getpid()}#{group}"


class ClientMetrics:
    """The histograms of one registry, shared by every client of the process that records
    into it (a registry takes each name once)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        def histogram(name: str, doc: str, labels: tuple[str, ...], buckets) -> Histogram:
            return Histogram(name, doc, labels, buckets=buckets, registry=registry)

        self.send_cost = histogram("rocketmq_send_cost_time", "Milliseconds a send took.",
                                   ("topic", "client_id", "invocation_status"),
                                   SEND_BUCKETS_MS)  # fmt: skip
        self.delivery_latency = histogram(
            "rocketmq_delivery_latency", "Milliseconds from a message's store to its arrival.",
            CONSUMER_LABELS, DELIVERY_BUCKETS_MS,
        )  # fmt: skip
        self.await_time = histogram(
            "rocketmq_await_time", "Milliseconds a message waited for the listener.",
            CONSUMER_LABELS, AWAIT_BUCKETS_MS,
        )  # fmt: skip
        self.process_time = histogram(
            "rocketmq_process_time", "Milliseconds the listener took.",
            (*CONSUMER_LABELS, "invocation_status"), PROCESS_BUCKETS_MS,
        )  # fmt: skip
        self.cached = CachedMessages()
        registry.register(self.cached)

    @classmethod
    def of(cls, metrics: bool | CollectorRegistry) -> ClientMetrics | None:
        """The metrics of a client's ``metrics`` option: None when off."""
        if metrics is False or metrics is None:
            return None
        registry = REGISTRY if metrics is True else metrics
        if not isinstance(registry, CollectorRegistry):
            raise TypeError(f"metrics is True, False or a CollectorRegistry, not {metrics!r}")
        with _lock:
            found = _by_registry.get(registry)
            if found is None:
                found = _by_registry[registry] = cls(registry)
            return found

    def sent(self, topic: str, client: str, started: float, ok: bool) -> None:
        """A send that began at ``started`` (``perf_counter``) ended now."""
        ms = (time.perf_counter() - started) * 1000
        self.send_cost.labels(topic, client, "success" if ok else "failure").observe(ms)

    def send_callback(self, topic: str, client: str, started: float) -> Callable[[Any], None]:
        """An async send's future callback recording its cost once it settles."""
        return lambda future: self.sent(topic, client, started, future.exception() is None)

    def arrived(self, topic: str, client: str, group: str, store_ms: list[int]) -> None:
        """Messages stored at ``store_ms`` (epoch ms) reached the consumer now."""
        observe = self.delivery_latency.labels(topic, client, group).observe
        now = time.time() * 1000
        for stored in store_ms:
            observe(max(now - stored, 0.0))

    def consumed(
        self, topic: str, client: str, group: str, arrived: float, started: float, ok: bool
    ) -> None:
        """A listener call that began at ``started`` for messages that arrived at
        ``arrived`` (both ``time.monotonic``) ended now."""
        self.await_time.labels(topic, client, group).observe((started - arrived) * 1000)
        self.processed(topic, client, group, started, ok)

    def processed(self, topic: str, client: str, group: str, started: float, ok: bool) -> None:
        """A listener call that began at ``started`` (``time.monotonic``) ended now (where a
        consumer knows no arrival time to measure the await from: the orderly path)."""
        ms = (time.monotonic() - started) * 1000
        self.process_time.labels(topic, client, group, "success" if ok else "failure").observe(ms)


class CachedMessages(Collector):
    """``rocketmq_consumer_cached_messages`` and ``_bytes`` of the push consumers watched,
    read from their process queues at scrape time (a consumer that is gone drops out)."""

    def __init__(self) -> None:
        self._consumers: weakref.WeakSet = weakref.WeakSet()

    def watch(self, consumer: Any) -> None:
        """``consumer``: has ``group``, ``metrics_client_id`` and ``cached()`` (topic →
        (messages, bytes))."""
        self._consumers.add(consumer)

    def collect(self) -> Iterator[Metric]:
        count = GaugeMetricFamily(
            "rocketmq_consumer_cached_messages", "Messages pulled, not yet consumed.",
            labels=CONSUMER_LABELS,
        )  # fmt: skip
        size = GaugeMetricFamily(
            "rocketmq_consumer_cached_bytes", "Bytes of them.", labels=CONSUMER_LABELS
        )
        for consumer in list(self._consumers):
            for topic, (n, nbytes) in sorted(consumer.cached().items()):
                labels = [topic, consumer.metrics_client_id, consumer.group]
                count.add_metric(labels, n)
                size.add_metric(labels, nbytes)
        yield count
        yield size


def serve(
    port: int = 0, host: str = "127.0.0.1", registry: CollectorRegistry = REGISTRY
) -> tuple[str, Callable[[], None]]:
    """Serve ``registry`` for Prometheus on ``host:port`` (0: any free port) from a daemon
    thread: its address and a function that stops it."""
    server, _thread = start_http_server(port, addr=host, registry=registry)

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return f"{host}:{server.server_port}", stop
