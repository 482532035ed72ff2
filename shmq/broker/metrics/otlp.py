"""OTLP gRPC export of the broker's metrics (RocketMQ 5's ``metricsExporterType = OTLP_GRPC``):
every ``metricGrpcExporterIntervalInMills`` the metrics process collects the same families
the Prometheus endpoint serves (``collector.BrokerCollector``) and pushes them to
``metricsGrpcExporterTarget``'s ``MetricsService/Export`` with ``metricsGrpcExporterHeader``'s
headers, each push allowed ``metricGrpcExporterTimeOutInMills``.

Why the families are turned into OTLP protobuf here (``opentelemetry-proto``'s messages and
its generated stub) rather than through the OpenTelemetry SDK: the SDK has no observable
histogram, and its instruments aggregate what they record themselves, so the broker's
histograms (already cumulative bucket counts) could not be handed over as they are. Converted
directly, every name, label and value is the endpoint's: a counter is a monotonic cumulative
Sum named as its Prometheus sample (``rocketmq_messages_in_total``), a gauge a Gauge, a
histogram a cumulative explicit-bucket Histogram (the cumulative ``le`` counts turned into
per-bucket ones), and each sample's labels (``cluster``, ``node_type``, ``node_id``,
``metricsLabel``'s pairs and its own) its point's attributes, as RocketMQ puts them on every
point. The scope is RocketMQ's meter name, ``broker-meter``.

A push that fails is logged (once per run of failures) and the next one is tried at the next
interval: the counters are cumulative, so a lost push loses no count.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping

import grpc
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2_grpc import MetricsServiceStub
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.metrics.v1 import metrics_pb2 as pb
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from shmq import __version__
from shmq.broker.config.broker_config import BrokerConfig

log = logging.getLogger(__name__)

METER = "broker-meter"  # RocketMQ's BrokerMetricsManager meter name
CUMULATIVE = pb.AGGREGATION_TEMPORALITY_CUMULATIVE


def attributes(labels: Mapping[str, str]) -> list[KeyValue]:
    return [KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in labels.items()]


@dataclasses.dataclass
class _Series:
    """One histogram series' Prometheus samples."""

    labels: dict[str, str]
    buckets: list[tuple[float, float]] = dataclasses.field(default_factory=list)  # (le, cum.)
    count: float = 0.0
    total: float = 0.0


def to_metrics(families: Iterable[Metric], start_ns: int, now_ns: int) -> list[pb.Metric]:
    """The OTLP metrics of one collection's families; ``start_ns`` is when the cumulative
    counts began (the metrics process's start: its per-topic traffic starts there)."""
    out = []
    for family in families:
        # a gauge otherwise: the collector makes no other kind
        convert = {"counter": _counter, "histogram": _histogram}.get(family.type, _gauge)
        metric = convert(family, start_ns, now_ns)
        if metric is not None:  # a family without samples yet (no topic) has no points
            out.append(metric)
    return out


def _number(
    labels: Mapping[str, str], value: float, start_ns: int, now_ns: int
) -> pb.NumberDataPoint:
    return pb.NumberDataPoint(attributes=attributes(labels), start_time_unix_nano=start_ns,
                              time_unix_nano=now_ns, as_double=value)  # fmt: skip


def _gauge(family: Metric, start_ns: int, now_ns: int) -> pb.Metric | None:
    """The family's samples as a Gauge (which has no start time)."""
    points = [_number(s.labels, s.value, 0, now_ns) for s in family.samples]
    if not points:
        return None
    gauge = pb.Gauge(data_points=points)
    return pb.Metric(name=family.name, description=family.documentation, gauge=gauge)


def _counter(family: Metric, start_ns: int, now_ns: int) -> pb.Metric | None:
    """The family's ``_total`` samples as a monotonic cumulative Sum named as they are."""
    name = family.name + "_total"
    points = [
        _number(s.labels, s.value, start_ns, now_ns) for s in family.samples if s.name == name
    ]
    if not points:
        return None
    total = pb.Sum(data_points=points, aggregation_temporality=CUMULATIVE, is_monotonic=True)
    return pb.Metric(name=name, description=family.documentation, sum=total)


def _histogram(family: Metric, start_ns: int, now_ns: int) -> pb.Metric | None:
    """The family's ``_bucket``/``_count``/``_sum`` samples as one Histogram point per label
    set."""
    series: dict[tuple[tuple[str, str], ...], _Series] = {}
    for s in family.samples:
        labels = {k: v for k, v in s.labels.items() if k != "le"}
        one = series.setdefault(tuple(labels.items()), _Series(labels))
        suffix = s.name[len(family.name) :]
        if suffix == "_bucket":
            one.buckets.append((float(s.labels["le"]), s.value))
        elif suffix == "_count":
            one.count = s.value
        elif suffix == "_sum":
            one.total = s.value
    points = []
    for one in series.values():
        one.buckets.sort()
        cumulative = [c for _, c in one.buckets]
        points.append(
            pb.HistogramDataPoint(
                attributes=attributes(one.labels),
                start_time_unix_nano=start_ns,
                time_unix_nano=now_ns,
                count=int(one.count),
                sum=one.total,
                explicit_bounds=[le for le, _ in one.buckets if not math.isinf(le)],
                bucket_counts=[
                    int(c - b) for c, b in zip(cumulative, [0.0, *cumulative[:-1]], strict=True)
                ],
            )
        )
    if not points:
        return None
    histogram = pb.Histogram(data_points=points, aggregation_temporality=CUMULATIVE)
    return pb.Metric(name=family.name, description=family.documentation, histogram=histogram)


class OtlpPusher:
    """Pushes ``collector``'s metrics to the config's OTLP collector."""

    def __init__(self, config: BrokerConfig, collector: Collector) -> None:
        self.target, secure = config.metrics_grpc_endpoint
        self.interval_s = config.metric_grpc_exporter_interval_in_mills / 1000
        self._timeout_s = config.metric_grpc_exporter_time_out_in_mills / 1000
        self._headers = config.metrics_grpc_headers
        self._collector = collector
        self._channel = (
            grpc.secure_channel(self.target, grpc.ssl_channel_credentials())
            if secure
            else grpc.insecure_channel(self.target)
        )
        self._stub = MetricsServiceStub(self._channel)
        self._resource = Resource(
            attributes=attributes({"service.name": "shmq-broker", "service.version": __version__})
        )
        self._scope = InstrumentationScope(name=METER, version=__version__)
        self._start_ns = time.time_ns()
        self._failing = False

    def request(self) -> ExportMetricsServiceRequest:
        """One collection as an export request."""
        metrics = to_metrics(self._collector.collect(), self._start_ns, time.time_ns())
        scope = pb.ScopeMetrics(scope=self._scope, metrics=metrics)
        resource = pb.ResourceMetrics(resource=self._resource, scope_metrics=[scope])
        return ExportMetricsServiceRequest(resource_metrics=[resource])

    def push(self) -> bool:
        """Collect and export once; False when the collector did not take it (logged when a
        run of failures begins, and when it ends)."""
        try:
            response = self._stub.Export(
                self.request(), metadata=self._headers, timeout=self._timeout_s
            )
        except grpc.RpcError as exc:
            if not self._failing:
                log.warning("OTLP export to %s failed (%s: %s); trying again every %.0f s",
                            self.target, exc.code().name, exc.details(),
                            self.interval_s)  # fmt: skip
            self._failing = True
            return False
        if self._failing:
            log.info("OTLP export to %s works again", self.target)
            self._failing = False
        partial = response.partial_success
        if partial.rejected_data_points:
            log.warning("the OTLP collector at %s rejected %d data points: %s", self.target,
                        partial.rejected_data_points, partial.error_message)  # fmt: skip
        return True

    def run(self, stopping: Callable[[], bool]) -> None:
        """Push every interval (the first one interval after the start, as RocketMQ's
        periodic reader does) until ``stopping()``."""
        due = time.monotonic() + self.interval_s
        while not stopping():
            if time.monotonic() >= due:
                self.push()
                due += self.interval_s
                if due <= time.monotonic():  # the push took longer than the interval
                    due = time.monotonic() + self.interval_s
            time.sleep(min(0.2, max(0.0, due - time.monotonic())))

    def close(self) -> None:
        self._channel.close()
