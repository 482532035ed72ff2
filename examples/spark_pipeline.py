"""Spark pipelines over shmq topics (issue 5's example).

1. ``tag_counts``: a Structured Streaming job that reads a topic, counts messages per tag per
   one-minute window of their store time, and writes each micro-batch's counts to Parquet
   (one directory per batch id, overwritten when Spark replays a batch, so a restart from
   the checkpoint never counts a message twice). Totals are the sum over the directories.
2. ``publish_totals``: a batch job that reads the Parquet counts and writes the total per tag
   back to a topic as JSON, through the shmq sink.

Run against a broker on this host::

    PYSPARK_PYTHON=$(which python) python examples/spark_pipeline.py \\
        --namesrv 127.0.0.1:9876 --topic Orders --out /tmp/orders-counts

or ``--demo`` to start a namesrv and broker in-process, send sample messages and run both
jobs once (``Trigger.AvailableNow``). Spark's Python workers must import shmq, so
``PYSPARK_PYTHON`` must be the interpreter where shmq is installed (set here by default).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def spark_session():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYTHONPATH"] = ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")
    from pyspark.sql import SparkSession

    import shmq.spark

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("shmq-pipeline")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    shmq.spark.register(spark)
    return spark


def tag_counts(spark, namesrv: str, topic: str, out: str, checkpoint: str, once: bool):
    """Start the streaming count; returns the running query."""
    from pyspark.sql import functions as F

    def write_batch(batch_df, batch_id: int) -> None:
        counts = batch_df.groupBy(
            F.window("storeTimestamp", "1 minute").alias("window"),
            F.coalesce("tags", F.lit("")).alias("tag"),
        ).count()
        counts.write.mode("overwrite").parquet(os.path.join(out, f"batch={batch_id}"))

    stream = (
        spark.readStream.format("shmq")
        .option("namesrv", namesrv)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "100000")
        .load()
    )
    writer = stream.writeStream.foreachBatch(write_batch).option("checkpointLocation", checkpoint)
    writer = writer.trigger(availableNow=True) if once else writer.trigger(processingTime="5 s")
    return writer.start()


def publish_totals(spark, namesrv: str, counts_dir: str, sink_topic: str) -> int:
    """Total per tag over all counted batches, sent to ``sink_topic``; returns rows sent."""
    from pyspark.sql import functions as F

    totals = spark.read.parquet(counts_dir).groupBy("tag").agg(F.sum("count").alias("messages"))
    out = totals.select(
        F.to_json(F.struct("tag", "messages")).alias("body"),
        F.when(F.col("tag") != "", F.col("tag")).alias("tags"),
    )
    out.write.format("shmq").option("namesrv", namesrv).option("topic", sink_topic).mode(
        "append"
    ).save()
    return totals.count()


def demo() -> None:
    from shmq import EmbeddedBroker, Producer

    with EmbeddedBroker(topics={"Orders": 4}) as mq, tempfile.TemporaryDirectory() as tmp:
        namesrv = mq.namesrv
        with Producer("demo-producer", namesrv) as producer:
            for tag, n in (("Paid", 3000), ("Shipped", 2000), ("Refunded", 500)):
                producer.send_bulk("Orders", [f"{tag} order {i}".encode() for i in range(n)],
                                   tags=tag)  # fmt: skip
        spark = spark_session()
        try:
            out = os.path.join(tmp, "counts")
            query = tag_counts(spark, namesrv, "Orders", out, os.path.join(tmp, "ckpt"), True)
            query.awaitTermination()
            spark.read.parquet(out).orderBy("window", "tag").show(truncate=False)
            publish_totals(spark, namesrv, out, "OrderTotals")
            back = (
                spark.read.format("shmq")
                .option("namesrv", namesrv)
                .option("topic", "OrderTotals")
                .load()
                .selectExpr("tags", "CAST(body AS STRING) AS body")
            )
            back.orderBy("tags").show(truncate=False)
        finally:
            spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--demo", action="store_true", help="run everything on a demo broker")
    parser.add_argument("--namesrv", default="127.0.0.1:9876")
    parser.add_argument("--topic", default="Orders")
    parser.add_argument("--out", help="Parquet directory of the counts")
    parser.add_argument("--checkpoint", help="checkpoint directory (default: beside --out)")
    parser.add_argument("--sink-topic", default="OrderTotals")
    parser.add_argument("--once", action="store_true", help="Trigger.AvailableNow, then exit")
    args = parser.parse_args()
    if args.demo:
        demo()
        return
    if not args.out:
        parser.error("--out is required (or --demo)")
    spark = spark_session()
    try:
        checkpoint = args.checkpoint or args.out.rstrip("/") + "-checkpoint"
        query = tag_counts(spark, args.namesrv, args.topic, args.out, checkpoint, args.once)
        query.awaitTermination()
        publish_totals(spark, args.namesrv, args.out, args.sink_topic)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
