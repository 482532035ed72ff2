"""Reads through the broker (option transport=tcp: PULL_MESSAGE, as for a store on another
host) return exactly the rows the local path reads from the store's files, in batch and in
a streaming micro-batch; tags filter the same way."""

from __future__ import annotations

import pytest
from waiting import wait_for

from shmq.client.admin.admin import Admin
from shmq.client.producer.producer import Producer
from shmq.message import Message
from shmq.spark.catalog import Catalog
from shmq.spark.options import parse_read_options
from shmq.spark.reader import open_catalog
from shmq.spark.remote import RemoteCatalog

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def topic(broker, make_topic):
    """Bulk messages with two tags, and messages with keys and properties."""
    name = make_topic("SparkTcp", 4)
    with Producer("spark-tcp-producer", broker.namesrv) as producer:
        for k in range(4):
            bodies = [f"bulk-{k}-{i}".encode() for i in range(150)]
            producer.send_bulk(name, bodies, tags="TagA" if k % 2 else "TagB")
        producer.send_batch([
            Message(name, f"keyed-{i}".encode(), tags="TagC", keys=[f"k{i}", "all"],
                    properties={"color": "red"})
            for i in range(20)
        ])  # fmt: skip
    with Admin(broker.namesrv) as admin:
        wait_for(lambda: sum(q.max_offset for q in admin.topic_status(name)) >= 620,
                 what="the 620 messages dispatched")  # fmt: skip
    return name


def _batch(spark, broker, topic: str, transport: str, **options) -> list:
    reader = (
        spark.read.format("shmq")
        .option("namesrv", broker.namesrv)
        .option("topic", topic)
        .option("includeProperties", "true")
        .option("transport", transport)
    )
    for k, v in options.items():
        reader = reader.option(k, v)
    return sorted(reader.load().collect(), key=lambda r: (r.queueId, r.queueOffset))


def test_tcp_transport_plans_through_the_broker(broker, topic):
    for transport, kind in (("tcp", RemoteCatalog), ("auto", Catalog), ("shm", Catalog)):
        opts = parse_read_options(
            {"namesrv": broker.namesrv, "topic": topic, "transport": transport}, streaming=False
        )
        catalog = open_catalog(opts)
        try:
            assert type(catalog) is kind, transport  # auto: this host's store, files
            assert catalog.queues() == [(topic, q) for q in range(4)]
            assert sum(catalog.max_offset(topic, q) for q in range(4)) == 620
        finally:
            catalog.close()


def test_batch_read_over_tcp_equals_the_local_read(spark, broker, topic):
    local = _batch(spark, broker, topic, "shm")
    assert len(local) == 620
    assert _batch(spark, broker, topic, "tcp", maxRowsPerPartition="100") == local
    tagged = _batch(spark, broker, topic, "shm", tags="TagA || TagC")
    assert {r.tags for r in tagged} == {"TagA", "TagC"} and len(tagged) == 320
    assert _batch(spark, broker, topic, "tcp", tags="TagA || TagC") == tagged
    ranged = {"startingOffsets": f'{{"{topic}":{{"1":20}}}}',
              "endingOffsets": f'{{"{topic}":{{"1":90}}}}'}  # fmt: skip
    assert _batch(spark, broker, topic, "tcp", **ranged) == _batch(
        spark, broker, topic, "shm", **ranged
    )


def test_stream_micro_batch_over_tcp_equals_the_local_read(spark, broker, topic, tmp_path):
    local = _batch(spark, broker, topic, "shm")
    query = (
        spark.readStream.format("shmq")
        .option("namesrv", broker.namesrv)
        .option("topic", topic)
        .option("includeProperties", "true")
        .option("startingOffsets", "earliest")
        .option("transport", "tcp")
        .load()
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(180)
        assert query.exception() is None
    finally:
        query.stop()
    streamed = spark.read.schema(spark.read.format("shmq").option("namesrv", broker.namesrv)
                                 .option("topic", topic).option("includeProperties", "true")
                                 .load().schema).parquet(str(tmp_path / "out"))  # fmt: skip
    assert sorted(streamed.collect(), key=lambda r: (r.queueId, r.queueOffset)) == local
