"""Writes: batch and streaming round trips through the producer, and a failed send failing
the task with the producer's reason."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _read(spark, broker, topic):
    return spark.read.format("shmq").option("namesrv", broker.namesrv).option("topic", topic).load()


def test_batch_write_round_trip(spark, broker, make_topic):
    plain, keyed = make_topic("SparkWritePlain", 4), make_topic("SparkWriteKeyed", 2)
    rows = [(plain if i % 3 else keyed, f"row-{i}".encode(), f"tag{i % 2}") for i in range(900)]
    df = spark.createDataFrame(rows, "topic string, body binary, tags string")
    df.write.format("shmq").option("namesrv", broker.namesrv).mode("append").save()
    for topic in (plain, keyed):
        got = sorted((bytes(r.body), r.tags) for r in _read(spark, broker, topic).collect())
        assert got == sorted((b, t) for (tp, b, t) in rows if tp == topic)
    # keys and properties go through send_batch; the option topic wins over the column
    detailed = spark.createDataFrame(
        [("ignored", f"k-{i}", [f"key{i}", "all"], {"n": str(i)}) for i in range(50)],
        "topic string, body string, keys array<string>, properties map<string,string>",
    )
    (
        detailed.write.format("shmq")
        .option("namesrv", broker.namesrv)
        .option("topic", keyed)
        .mode("append")
        .save()
    )
    back = (
        spark.read.format("shmq")
        .option("namesrv", broker.namesrv)
        .option("topic", keyed)
        .option("includeProperties", "true")
        .load()
        .where("tags is null")
        .collect()
    )
    assert sorted(
        (bytes(r.body).decode(), tuple(r.keys), r.properties["n"]) for r in back
    ) == sorted((f"k-{i}", (f"key{i}", "all"), str(i)) for i in range(50))


def test_stream_write_round_trip(spark, broker, make_topic, tmp_path):
    source, sink = make_topic("SparkStreamSrc", 2), make_topic("SparkStreamSink", 3)
    data = spark.createDataFrame(
        [(f"s-{i}".encode(), "x") for i in range(600)], "body binary, tags string"
    )
    (
        data.write.format("shmq")
        .option("namesrv", broker.namesrv)
        .option("topic", source)
        .mode("append")
        .save()
    )
    query = (
        spark.readStream.format("shmq")
        .option("namesrv", broker.namesrv)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("body", "concat(tags, '-copied') AS tags")
        .writeStream.format("shmq")
        .option("namesrv", broker.namesrv)
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    got = sorted((bytes(r.body), r.tags) for r in _read(spark, broker, sink).collect())
    assert got == sorted((f"s-{i}".encode(), "x-copied") for i in range(600))


def test_failed_send_fails_the_task_with_the_reason(spark, broker, make_topic):
    topic = make_topic("SparkWriteTooBig", 1)
    df = spark.createDataFrame([(b"y" * (5 << 20),)], "body binary")
    with pytest.raises(Exception, match=r"sending 1 messages to topic SparkWriteTooBig failed"):
        writer = df.write.format("shmq").option("namesrv", broker.namesrv).option("topic", topic)
        writer.mode("append").save()
    with pytest.raises(Exception, match="append-only"):
        writer.mode("overwrite").save()
