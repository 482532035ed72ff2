"""Spark batch read of a shmq topic against Spark's Parquet reader and against the floor of a
Python data source, and the sink's write rate at-least-once against exactly-once, in local[2].

    python bench/spark_bench.py --quick        # 200,000 messages (CI)
    python bench/spark_bench.py                # 1,000,000 messages of 100 bytes
    python bench/spark_bench.py --json out.json

Messages are appended to a temporary store with ``MessageStore.put_batch`` (no broker
processes compete for the two cores while Spark reads), spread over ``--queues`` queues.
The same rows, read once through the shmq source, are written as Parquet; the Arrow batches
the shmq source yields are written, per input partition, as Arrow IPC files that format
``shmq_floor`` (``bench/spark_floor.py``) hands to Spark without decoding anything: the
floor, what any Python data source pays for the Python -> JVM hand-off of those batches.
Then each source is read whole into Spark's ``noop`` sink (every column materialised,
nothing written), ``--runs`` rounds after a warm-up (the sources take turns in a round, so
a burst of load hits all of them), and the best run counts. The goals: >= 1,000,000 rows/s
and >= 0.5x Parquet (issue 5), >= 0.8x the floor (issue 57).

Then an embedded broker is started and ``--sink-rows`` of those rows (cached in Spark) are
written with ``df.write.format("shmq")``, at-least-once (the default) and with
``exactlyOnce=true`` (half messages, a ledger entry and END_TRANSACTION per row from the
driver's commit; issue 57), best of ``--runs`` after a warm-up each.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_average() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def fill_store(path: str, rows: int, queues: int, body_size: int) -> None:
    import numpy as np

    from shmq.store import MessageStore

    per = -(-rows // queues)
    with MessageStore.open(path, mapped_file_size_commit_log=256 << 20) as store:
        left = rows
        for q in range(queues):
            n = min(per, left)
            left -= n
            for a in range(0, n, 50_000):
                k = min(50_000, n - a)
                data = np.frombuffer(os.urandom(k * body_size), dtype=np.uint8)
                offsets = np.arange(k + 1, dtype=np.int64) * body_size
                store.put_batch("SparkBench", q, (data, offsets), tags="bench")
        store.dispatch()


def timed(frames: dict, runs: int) -> dict[str, list[float]]:
    """Seconds per full read of each DataFrame into the ``noop`` sink, in ``runs`` rounds."""
    for df in frames.values():  # warm-up: workers, numba cache, pages
        df.write.format("noop").mode("overwrite").save()
    times: dict[str, list[float]] = {name: [] for name in frames}
    for _ in range(runs):
        for name, df in frames.items():
            t = time.perf_counter()
            df.write.format("noop").mode("overwrite").save()
            times[name].append(time.perf_counter() - t)
    return times


def write_floor(store: str, path: str) -> None:
    """The shmq read's batches, partition by partition, as ``shmq_floor`` reads them."""
    from bench.spark_floor import write_partitions
    from shmq.spark.decode import arrow_schema
    from shmq.spark.options import parse_read_options
    from shmq.spark.reader import ShmqBatchReader

    reader = ShmqBatchReader(
        parse_read_options({"store": store, "topic": "SparkBench"}, streaming=False)
    )
    write_partitions(path, [reader.read(p) for p in reader.partitions()], arrow_schema(False))


def sink_rates(df, runs: int) -> dict[str, list[float]]:
    """Seconds per ``df.write`` of ``df`` into a fresh broker, per delivery mode."""
    from shmq.embedded import EmbeddedBroker

    times: dict[str, list[float]] = {}
    with EmbeddedBroker(topics={"SinkBench": 4}, mapped_file_size_commit_log=256 << 20,
                        ring_size=16 << 20) as mq:  # fmt: skip
        for mode, options in (("at_least_once", {}), ("exactly_once", {"exactlyOnce": "true"})):
            times[mode] = []
            for run in range(runs + 1):  # the first warms up
                writer = df.limit(10_000) if run == 0 else df
                writer = writer.write.format("shmq").option("namesrv", mq.namesrv)
                writer = writer.option("topic", "SinkBench").options(**options).mode("append")
                t = time.perf_counter()
                writer.save()
                if run:
                    times[mode].append(time.perf_counter() - t)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="200,000 messages")
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--queues", type=int, default=4)
    parser.add_argument("--body", type=int, default=100, help="body bytes")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sink-rows", type=int, default=None, help="rows written per sink run")
    parser.add_argument("--no-sink", action="store_true", help="measure the reads only")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    rows = args.rows or (200_000 if args.quick else 1_000_000)
    sink_rows = min(rows, args.sink_rows or (100_000 if args.quick else 500_000))

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYTHONPATH"] = ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")
    sys.path.insert(0, ROOT)
    from pyspark.sql import SparkSession

    import shmq.spark
    from bench.spark_floor import FloorDataSource

    tmp = tempfile.mkdtemp(prefix="shmq-spark-bench-")
    spark = None
    try:
        t = time.perf_counter()
        fill_store(os.path.join(tmp, "store"), rows, args.queues, args.body)
        fill_s = time.perf_counter() - t
        spark = (
            SparkSession.builder.master("local[2]")
            .appName("shmq-spark-bench")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.local.dir", os.path.join(tmp, "spark"))
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        shmq.spark.register(spark)
        spark.dataSource.register(FloorDataSource)
        shmq_df = (
            spark.read.format("shmq")
            .option("store", os.path.join(tmp, "store"))
            .option("topic", "SparkBench")
            .load()
        )
        parquet_path = os.path.join(tmp, "parquet")
        shmq_df.write.parquet(parquet_path)
        parquet_df = spark.read.parquet(parquet_path)
        assert parquet_df.count() == rows
        floor_path = os.path.join(tmp, "floor")
        write_floor(os.path.join(tmp, "store"), floor_path)
        floor_df = spark.read.format("shmq_floor").option("path", floor_path).load()
        assert floor_df.count() == rows
        assert floor_df.rdd.getNumPartitions() == shmq_df.rdd.getNumPartitions()
        load_before = load_average()
        read_times = timed({"shmq": shmq_df, "floor": floor_df, "parquet": parquet_df}, args.runs)
        sink_times = {}
        if not args.no_sink:
            sink_df = parquet_df.select("body").limit(sink_rows).cache()
            assert sink_df.count() == sink_rows
            sink_times = sink_rates(sink_df, min(args.runs, 2))
        load_after = load_average()
    finally:
        if spark is not None:
            spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    rates = {name: rows / min(ts) for name, ts in read_times.items()}
    result = {
        "rows": rows,
        "body_bytes": args.body,
        "queues": args.queues,
        "fill_seconds": round(fill_s, 2),
        **{f"{name}_seconds": [round(x, 3) for x in ts] for name, ts in read_times.items()},
        **{f"{name}_rows_per_s": round(rate) for name, rate in rates.items()},
        "ratio": round(rates["shmq"] / rates["parquet"], 3),
        "ratio_floor": round(rates["shmq"] / rates["floor"], 3),
        "sink_rows": sink_rows,
        **{f"sink_{m}_seconds": [round(x, 3) for x in ts] for m, ts in sink_times.items()},
        **{f"sink_{m}_rows_per_s": round(sink_rows / min(ts)) for m, ts in sink_times.items()},
        "load_average": {"before": load_before, "after": load_after},
        "cpus": os.cpu_count(),
    }
    print(f"rows {rows:,} x {args.body} B in {args.queues} queues, local[2], best of {args.runs}")
    for name in read_times:
        print(f"  {name:>7} batch read: {rates[name]:>12,.0f} rows/s  runs "
              f"{result[f'{name}_seconds']} s")  # fmt: skip
    print(f"  ratio shmq/floor:   {result['ratio_floor']:.2f} (goal >= 0.8)")
    print(f"  ratio shmq/parquet: {result['ratio']:.2f} (goal >= 0.5; goal rate >= 1,000,000/s)")
    for mode in sink_times:
        label = mode.replace("_", "-")
        rate = result[f"sink_{mode}_rows_per_s"]
        print(f"  sink {label:>13}: {rate:>12,.0f} rows/s  ({sink_rows:,} rows, runs "
              f"{result[f'sink_{mode}_seconds']} s)")  # fmt: skip
    print(f"  load average before/after: {load_before} / {load_after} on {os.cpu_count()} CPUs")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
