"""RocketMQ 5's client metrics on shmq's producer and push consumer, against a real broker:
each send and each consumed message is an observation with RocketMQ's names and labels,
and the registry is served for Prometheus."""

from __future__ import annotations

import threading
import urllib.request

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from waiting import wait_for

from shmq.client.consumer.push import PushConsumer
from shmq.client.metrics import client_id, serve
from shmq.client.producer.producer import Producer
from shmq.client.types import ConsumeResult
from shmq.message import Message

TOPIC = "ClientMetrics"


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def test_sends_and_consumption_are_observed_and_served(broker):
    registry = CollectorRegistry()
    with Producer("metrics-client-p", broker.namesrv, metrics=registry) as producer:
        for i in range(5):
            producer.send(Message(TOPIC, b"sync-%d" % i))
        for f in [producer.send_async(Message(TOPIC, b"async-%d" % i)) for i in range(5)]:
            f.result(30)
    ok = {"topic": TOPIC, "client_id": client_id("metrics-client-p"),
          "invocation_status": "success"}  # fmt: skip
    assert sample(registry, "rocketmq_send_cost_time_count", **ok) == 10
    assert sample(registry, "rocketmq_send_cost_time_bucket", le="+Inf", **ok) == 10

    got, lock = [], threading.Lock()

    def listener(msgs, _ctx):
        with lock:
            got.extend(msgs)
        return ConsumeResult.CONSUME_SUCCESS

    consumer = PushConsumer("metrics-client-c", broker.namesrv, listener=listener,
                            consume_from_where="FIRST_OFFSET", metrics=registry)  # fmt: skip
    consumer.subscribe(TOPIC)
    consumer.start()
    try:
        wait_for(lambda: len(got) >= 10, timeout=60, what="10 messages consumed")
        group = {"topic": TOPIC, "client_id": consumer.metrics_client_id,
                 "consumer_group": "metrics-client-c"}  # fmt: skip
        assert sample(registry, "rocketmq_delivery_latency_count", **group) == 10
        calls = sample(registry, "rocketmq_process_time_count", **group,
                       invocation_status="success")  # fmt: skip
        assert calls >= 1 and sample(registry, "rocketmq_await_time_count", **group) == calls
        address, stop = serve(registry=registry)
        try:
            with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as r:
                names = {f.name for f in text_string_to_metric_families(r.read().decode())}
        finally:
            stop()
        assert {"rocketmq_send_cost_time", "rocketmq_delivery_latency", "rocketmq_await_time",
                "rocketmq_process_time", "rocketmq_consumer_cached_messages",
                "rocketmq_consumer_cached_bytes"} <= names  # fmt: skip
    finally:
        consumer.shutdown()
