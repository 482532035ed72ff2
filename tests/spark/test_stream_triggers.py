"""Kafka source option parity in a real local Spark (issue 57): ``minOffsetsPerTrigger``
holds a micro-batch until enough rows are there, unless ``maxTriggerDelay`` has passed;
the timestamp options pick the right rows in batch and streaming queries."""

from __future__ import annotations

import json
import time

import pytest
from waiting import wait_for

from shmq.store import MessageStore

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SMALL = {
    "mapped_file_size_commit_log": 256 * 1024,
    "mapped_file_size_consume_queue": 1024 * 20,
    "preallocate_mapped_file_enable": False,
}


def _put(store: MessageStore, topic: str, queue_id: int, n: int, body: bytes = b"x") -> None:
    store.put_batch(topic, queue_id, [body] * n)
    store.dispatch()


def _stream(spark, options: dict, sink: str = "noop", **sink_options):
    reader = spark.readStream.format("shmq")
    for k, v in options.items():
        reader = reader.option(k, v)
    writer = reader.load().select("queueId", "queueOffset", "body").writeStream.format(sink)
    for k, v in sink_options.items():
        writer = writer.option(k, v)
    return writer


def _data_batches(query) -> list[int]:
    """The input rows of each micro-batch that read any (a query fails the wait at once)."""
    assert query.exception() is None
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def _latest_total(progress) -> int:
    """How many offsets the source saw in the store at that trigger (``reportLatestOffset``)."""
    latest = progress["sources"][0]["latestOffset"]
    return sum(sum(q.values()) for q in json.loads(latest).values()) if latest else 0


@pytest.fixture
def progress_every_trigger(spark):
    """Spark reports progress for triggers that run no micro-batch only every 10 s; report
    every one, so a test sees the source's latest offset while it holds a batch back."""
    key = "spark.sql.streaming.noDataProgressEventInterval"
    before = spark.conf.get(key, None)
    spark.conf.set(key, "0")
    yield
    if before is None:
        spark.conf.unset(key)
    else:
        spark.conf.set(key, before)


def test_min_offsets_per_trigger_holds_a_batch_until_enough_rows(
    spark, tmp_path, progress_every_trigger
):
    options = {"store": str(tmp_path / "store"), "topic": "MinRows",
               "startingOffsets": "earliest", "minOffsetsPerTrigger": "100",
               "maxTriggerDelay": "1h"}  # fmt: skip
    with MessageStore.open(tmp_path / "store", **SMALL) as store:
        _put(store, "MinRows", 0, 100)
        query = _stream(spark, options).trigger(processingTime="50 milliseconds").start()
        try:
            wait_for(lambda: _data_batches(query) == [100], timeout=120, interval=0.1,
                     what="the first 100 rows, enough for a batch")  # fmt: skip
            _put(store, "MinRows", 0, 60)
            wait_for(
                lambda: any(_latest_total(p) == 160 for p in query.recentProgress),
                timeout=120, interval=0.1, what="a trigger that saw the 60 new rows",
            )  # fmt: skip
            assert _data_batches(query) == [100]  # seen, and held back: 60 < 100
            _put(store, "MinRows", 0, 40)
            wait_for(lambda: sum(_data_batches(query)) == 200, timeout=120, interval=0.1,
                     what="all 200 rows")  # fmt: skip
        finally:
            query.stop()
    assert _data_batches(query) == [100, 100]


def test_max_trigger_delay_releases_a_batch_below_the_minimum(spark, tmp_path):
    options = {"store": str(tmp_path / "store"), "topic": "Delayed",
               "startingOffsets": "earliest", "minOffsetsPerTrigger": "1000",
               "maxTriggerDelay": "300ms"}  # fmt: skip
    with MessageStore.open(tmp_path / "store", **SMALL) as store:
        _put(store, "Delayed", 0, 7)
        _put(store, "Delayed", 1, 3)
        query = _stream(spark, options).trigger(processingTime="50 milliseconds").start()
        try:
            # never 1,000 rows: only the delay can let the 10 through
            wait_for(lambda: sum(_data_batches(query)) == 10, timeout=120, interval=0.1,
                     what="the 10 rows, once maxTriggerDelay passed")  # fmt: skip
        finally:
            query.stop()
    assert _data_batches(query) == [10]


@pytest.fixture
def timed_store(tmp_path):
    """Topic ``Timed``, queues 0 and 1, each: offsets 0-9 stored before ``t1``, 10-19
    between ``t1`` and ``t2``, 20-29 after ``t2`` (the store stamps each put with the
    clock, which moves on between them); ``t3`` is after everything."""

    def tick() -> int:
        time.sleep(0.02)
        now = int(time.time() * 1000)
        time.sleep(0.02)
        return now

    with MessageStore.open(tmp_path / "store", **SMALL) as store:
        cuts = []
        for phase in (b"a", b"b", b"c"):
            if phase != b"a":
                cuts.append(tick())
            for qid in (0, 1):
                _put(store, "Timed", qid, 10, phase)
        cuts.append(tick())
        yield str(tmp_path / "store"), cuts


def _batch(spark, store: str, **options: str) -> set[tuple[int, int]]:
    reader = spark.read.format("shmq").option("store", store).option("topic", "Timed")
    for k, v in options.items():
        reader = reader.option(k, v)
    return {(r.queueId, r.queueOffset) for r in reader.load().collect()}


def _offsets(queue_id: int, start: int, end: int) -> set[tuple[int, int]]:
    return {(queue_id, o) for o in range(start, end)}


def test_batch_reads_between_timestamps(spark, timed_store):
    store, (t1, t2, t3) = timed_store
    by_queue = _batch(spark, store,
                      startingOffsetsByTimestamp=json.dumps({"Timed": {"0": t1}}),
                      endingOffsetsByTimestamp=json.dumps({"Timed": {"1": t2}}))  # fmt: skip
    # queue 1 starts at earliest (startingOffsets' default), queue 0 ends at latest
    assert by_queue == _offsets(0, 10, 30) | _offsets(1, 0, 20)
    # the global timestamps win over the per-queue ones and over the offsets
    precedence = _batch(spark, store, startingTimestamp=str(t1),
                        startingOffsetsByTimestamp=json.dumps({"Timed": {"0": t2}}),
                        endingTimestamp=str(t2), endingOffsets=json.dumps({"Timed": {"0": 5}}),
                        )  # fmt: skip
    assert precedence == _offsets(0, 10, 20) | _offsets(1, 10, 20)
    # an ending timestamp after every message reads to the latest offset
    assert _batch(spark, store, endingTimestamp=str(t3)) == _offsets(0, 0, 30) | _offsets(1, 0, 30)
    with pytest.raises(Exception, match="option startingTimestamp: Timed queue 0 has no mess"):
        _batch(spark, store, startingTimestamp=str(t3))
    assert _batch(spark, store, startingTimestamp=str(t3),
                  startingOffsetsByTimestampStrategy="latest") == set()  # fmt: skip


def test_stream_starts_at_timestamps(spark, timed_store, tmp_path):
    store, (t1, t2, _) = timed_store
    out = str(tmp_path / "out")
    options = {"store": store, "topic": "Timed",
               "startingOffsetsByTimestamp": json.dumps({"Timed": {"0": t1, "1": t2}})}  # fmt: skip
    query = (
        _stream(spark, options, "parquet", path=out, checkpointLocation=str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(120)
    finally:
        query.stop()
    assert query.exception() is None
    rows = spark.read.parquet(out).collect()
    assert sorted((r.queueId, r.queueOffset) for r in rows) == sorted(
        _offsets(0, 10, 30) | _offsets(1, 20, 30)
    )
    assert {bytes(r.body) for r in rows if r.queueId == 1} == {b"c"}
