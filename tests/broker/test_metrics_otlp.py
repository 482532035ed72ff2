"""OTLP gRPC export of the broker's metrics (``metricsExporterType=OTLP_GRPC``, issue 54): a
broker pushes to a collector in this process what its Prometheus endpoint would show (the sends
counted exactly, the message-size histogram), with the configured headers and constant labels;
a failed push is reported and the next one goes through; the conversion keeps Prometheus's
names and values; and the config keys are checked as RocketMQ reads them."""

from __future__ import annotations

import threading
from concurrent import futures

import grpc
import pytest
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2 as service
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2_grpc as service_grpc
from opentelemetry.proto.metrics.v1 import metrics_pb2 as pb
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from waiting import wait_for

from e2e_helpers import embedded, shm_entries
from shmq.broker.config.broker_config import BrokerConfig
from shmq.broker.metrics.otlp import METER, OtlpPusher, to_metrics
from shmq.broker.metrics.topic_traffic import SIZE_BUCKETS
from shmq.client.producer.producer import Producer
from shmq.embedded import EmbeddedBroker
from shmq.errors import ConfigError, ShmqError
from shmq.ipc import counters as cn

TOPIC = "OtlpT"
TOPIC_LABELS = {"topic": TOPIC, "is_system": "false", "message_type": "normal"}


class Receiver(service_grpc.MetricsServiceServicer):
    """An OTLP collector's ``MetricsService``: keeps every request with its headers, or
    refuses them while ``failing``."""

    def __init__(self) -> None:
        self.exports: list[tuple[service.ExportMetricsServiceRequest, dict[str, str]]] = []
        self.failing = False
        self._lock = threading.Lock()

    def Export(self, request, context):  # the gRPC method's name
        if self.failing:
            context.abort(grpc.StatusCode.UNAVAILABLE, "refused by the test")
        with self._lock:
            self.exports.append((request, dict(context.invocation_metadata())))
        return service.ExportMetricsServiceResponse()

    def count(self) -> int:
        with self._lock:
            return len(self.exports)

    def last(self) -> tuple[service.ExportMetricsServiceRequest, dict[str, str]]:
        with self._lock:
            return self.exports[-1]


@pytest.fixture
def receiver():
    """A collector on a free port of 127.0.0.1: ``(receiver, "http://127.0.0.1:port")``."""
    servicer = Receiver()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    service_grpc.add_MetricsServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield servicer, f"http://127.0.0.1:{port}"
    finally:
        server.stop(None)


def metrics(request: service.ExportMetricsServiceRequest) -> dict[str, pb.Metric]:
    (resource,) = request.resource_metrics
    (scope,) = resource.scope_metrics
    assert scope.scope.name == METER
    return {m.name: m for m in scope.metrics}


def labels(point) -> dict[str, str]:
    return {a.key: a.value.string_value for a in point.attributes}


def point(metric: pb.Metric, **want: str):
    """The one point of ``metric`` whose attributes include ``want``."""
    kind = metric.WhichOneof("data")
    found = [p for p in getattr(metric, kind).data_points if want.items() <= labels(p).items()]
    assert len(found) == 1, f"{metric.name} {want}: {len(found)} points"
    return found[0]


def test_the_broker_pushes_its_metrics_to_the_collector(receiver, tmp_path):
    servicer, target = receiver
    conf = {"metrics_exporter_type": "1", "metrics_grpc_exporter_target": target,
            "metric_grpc_exporter_interval_in_mills": 200, "metrics_label": "env:test",
            "metrics_grpc_exporter_header": "Authorization:Bearer t0k"}  # fmt: skip
    sent = 40
    with embedded(str(tmp_path / "store"), **conf) as mq:
        assert mq.broker.metrics.address == target.removeprefix("http://")
        assert mq.broker.metrics.describe().startswith("metrics pushed over OTLP gRPC")
        mq.create_topic(TOPIC, 2)
        words = mq.broker.counters.words
        write_before = cn.load(words, cn.WRITE_OFFSET)
        with Producer("otlp-p", mq.namesrv) as producer:
            producer.send_bulk(TOPIC, [b"x" * (1 + i * 997 % 3000) for i in range(sent)])
        wait_for(lambda: cn.load(words, cn.DISPATCHED_OFFSET) == cn.load(words, cn.WRITE_OFFSET),
                 what="the sends dispatched")  # fmt: skip
        written = cn.load(words, cn.WRITE_OFFSET) - write_before
        # the push under way may have collected before the sends: the one after it has not
        seen = servicer.count()
        wait_for(lambda: servicer.count() >= seen + 2, what="two more pushes")
    request, headers = servicer.last()
    assert headers["authorization"] == "Bearer t0k"
    found = metrics(request)
    constant = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a",
                "env": "test"}  # fmt: skip
    messages_in = found["rocketmq_messages_in_total"]
    assert messages_in.sum.is_monotonic
    assert messages_in.sum.aggregation_temporality == pb.AGGREGATION_TEMPORALITY_CUMULATIVE
    assert point(messages_in, **constant, **TOPIC_LABELS).as_double == sent
    assert point(found["rocketmq_throughput_in_total"], **TOPIC_LABELS).as_double == written
    sizes = point(found["rocketmq_message_size"], **TOPIC_LABELS)
    assert (sizes.count, sizes.sum) == (sent, written)
    assert list(sizes.explicit_bounds) == [float(b) for b in SIZE_BUCKETS]
    assert sum(sizes.bucket_counts) == sent
    assert 0 < sizes.bucket_counts[0] < sent  # bodies of 1 to 3000 bytes: some under 1 KiB
    assert point(found["rocketmq_broker_permission"]).as_double == 6
    assert point(found["shmq_agent_up"], agent="writer").as_double == 1


def test_without_the_extra_the_broker_does_not_start(tmp_path, monkeypatch):
    # an ``opentelemetry`` that cannot be imported, first on the path the processes inherit
    (tmp_path / "opentelemetry").mkdir()
    (tmp_path / "opentelemetry" / "__init__.py").write_text("raise ImportError('not here')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = shm_entries()
    conf = {"metrics_exporter_type": "OTLP_GRPC", "metrics_grpc_exporter_target": "h:4317",
            "mapped_file_size_commit_log": 1 << 20}  # fmt: skip
    with (
        pytest.raises(ShmqError, match=r"OTLP_GRPC needs the otlp extra .*not here"),
        EmbeddedBroker(str(tmp_path / "store"), host="127.0.0.1", **conf),
    ):
        pass
    assert not shm_entries() - before


class Fixed:
    """A collector of one counter: what ``OtlpPusher`` reads, without a broker."""

    def collect(self):
        family = CounterMetricFamily("shmq_test", "A test counter.", labels=["k"])
        family.add_metric(["v"], 3)
        yield family


def test_a_failed_push_is_reported_and_the_next_goes_through(receiver):
    servicer, target = receiver
    config = BrokerConfig.from_mapping({"metricsExporterType": "OTLP_GRPC",
                                        "metricsGrpcExporterTarget": target})  # fmt: skip
    pusher = OtlpPusher(config, Fixed())
    try:
        servicer.failing = True
        assert not pusher.push()
        servicer.failing = False
        assert pusher.push()
    finally:
        pusher.close()
    request, _ = servicer.last()
    assert point(metrics(request)["shmq_test_total"], k="v").as_double == 3


def test_the_conversion_keeps_prometheus_names_and_values():
    histogram = HistogramMetricFamily("h", "A histogram.", labels=["k"])
    histogram.add_metric(["a"], [("1.0", 2), ("4.0", 5), ("+Inf", 6)], sum_value=10.5)
    histogram.add_metric(["b"], [("1.0", 0), ("4.0", 0), ("+Inf", 1)], sum_value=9)
    counter = CounterMetricFamily("c", "A counter.", labels=["k"])
    counter.add_metric(["a"], 7)
    gauge = GaugeMetricFamily("g", "A gauge.")
    gauge.add_metric([], 2.5)
    empty = CounterMetricFamily("none", "No samples yet.", labels=["k"])
    out = {m.name: m for m in to_metrics([histogram, counter, gauge, empty], 100, 200)}
    assert sorted(out) == ["c_total", "g", "h"]
    a = point(out["h"], k="a")
    assert (list(a.explicit_bounds), list(a.bucket_counts)) == ([1.0, 4.0], [2, 3, 1])
    assert (a.count, a.sum, a.start_time_unix_nano, a.time_unix_nano) == (6, 10.5, 100, 200)
    assert list(point(out["h"], k="b").bucket_counts) == [0, 0, 1]
    assert point(out["c_total"], k="a").as_double == 7
    assert out["g"].gauge.data_points[0].as_double == 2.5
    assert out["c_total"].description == "A counter."


def test_the_target_is_required_and_read_as_rocketmq_reads_it():
    otlp = {"metricsExporterType": "OTLP_GRPC"}
    with pytest.raises(ConfigError, match="metricsGrpcExporterTarget"):
        BrokerConfig.from_mapping(otlp)
    with pytest.raises(ConfigError, match="metricsGrpcExporterTarget"):
        BrokerConfig.from_mapping({**otlp, "metricsGrpcExporterTarget": "ftp://h:4317"})

    def endpoint(target: str) -> tuple[str, bool]:
        conf = {**otlp, "metricsGrpcExporterTarget": target}
        return BrokerConfig.from_mapping(conf).metrics_grpc_endpoint

    # RocketMQ prepends https:// to a target that does not start with http
    assert endpoint("collector:4317") == ("collector:4317", True)
    assert endpoint("http://collector:4317") == ("collector:4317", False)
    assert endpoint("https://collector") == ("collector:443", True)
    assert BrokerConfig.from_mapping({**otlp, "metricsGrpcExporterTarget": "h:1"}).metrics_enabled


def test_headers_are_pairs():
    cfg = BrokerConfig.from_mapping({"metricsGrpcExporterHeader": "Authorization:Bearer x, a-b:c"})
    assert cfg.metrics_grpc_headers == [("authorization", "Bearer x"), ("a-b", "c")]
    with pytest.raises(ConfigError, match="metricsGrpcExporterHeader"):
        BrokerConfig.from_mapping({"metricsGrpcExporterHeader": "novalue"})
    with pytest.raises(ConfigError, match="metricGrpcExporterIntervalInMills"):
        BrokerConfig.from_mapping({"metricGrpcExporterIntervalInMills": 0})
