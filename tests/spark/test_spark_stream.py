"""Structured Streaming reads: a query stopped and restarted from its checkpoint, with new
messages in between, sees every message exactly once; failOnDataLoss after cleanup."""

from __future__ import annotations

import time

import pytest
from waiting import wait_for

from shmq.client.producer.producer import Producer
from shmq.store import MessageStore

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SMALL = {
    "mapped_file_size_commit_log": 64 * 1024,
    "mapped_file_size_consume_queue": 20 * 64,
    "preallocate_mapped_file_enable": False,
}


def _produce(namesrv: str, topic: str, start: int, n: int) -> set[bytes]:
    bodies = [f"stream-{i}".encode() for i in range(start, start + n)]
    with Producer("spark-stream-producer", namesrv) as producer:
        for a in range(0, n, 250):
            producer.send_bulk(topic, bodies[a : a + 250], tags="T")
    return set(bodies)


def _start(spark, reader_options: dict, out: str, checkpoint: str, **trigger):
    reader = spark.readStream.format("shmq")
    for k, v in reader_options.items():
        reader = reader.option(k, v)
    return (
        reader.load()
        .select("queueId", "queueOffset", "body")
        .writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", checkpoint)
        .trigger(**trigger)
        .start()
    )


def _running(query) -> bool:
    """True while ``query`` runs; its exception once it failed."""
    assert query.exception() is None
    return True


def _rows(query) -> int:
    return sum(p["numInputRows"] for p in query.recentProgress)


def test_restart_from_checkpoint_reads_every_message_once(spark, broker, make_topic, tmp_path):
    topic = make_topic("SparkStream", 4)
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    options = {
        "namesrv": broker.namesrv,
        "topic": topic,
        "startingOffsets": "earliest",
        "maxOffsetsPerTrigger": "400",
    }
    expected = _produce(broker.namesrv, topic, 0, 1000)
    query = _start(spark, options, out, ckpt, processingTime="100 milliseconds")
    try:
        wait_for(lambda: _running(query) and _rows(query) >= 1000, timeout=120, interval=0.2,
                 what="the first 1,000 rows")  # fmt: skip
        expected |= _produce(broker.namesrv, topic, 1000, 500)  # while it runs
        # stopped once it read some of them (at most 400 a trigger): in the middle
        wait_for(lambda: _running(query) and _rows(query) > 1000, timeout=120, interval=0.2,
                 what="rows of the next 500")  # fmt: skip
    finally:
        query.stop()
    assert all(p["numInputRows"] <= 400 for p in query.recentProgress)
    expected |= _produce(broker.namesrv, topic, 1500, 700)  # while it is stopped
    again = _start(spark, options, out, ckpt, availableNow=True)
    again.awaitTermination(180)
    assert again.exception() is None
    rows = spark.read.parquet(out).collect()
    keys = [(r.queueId, r.queueOffset) for r in rows]
    assert len(keys) == len(set(keys)) == 2200  # nothing twice
    assert {bytes(r.body) for r in rows} == expected  # nothing lost
    assert all(p["numInputRows"] <= 400 for p in again.recentProgress)


def test_fail_on_data_loss_in_a_stream(spark, tmp_path):
    path = str(tmp_path / "store")
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    options = {"store": path, "topic": "LossyStream", "startingOffsets": "earliest"}
    with MessageStore.open(path, **SMALL) as store:
        store.put_batch("LossyStream", 0, [b"a" * 200] * 1000)
        store.dispatch()
        first = _start(spark, options, out, ckpt, availableNow=True)
        first.awaitTermination(120)
        assert first.exception() is None and _rows(first) == 1000
        # New messages, then cleanup deletes files past the checkpoint's offset 1000.
        store.put_batch("LossyStream", 0, [b"b" * 200] * 1000)
        store.dispatch()
        store.clean_expired(time.time() + 10 * 86400, disk_used=0.99)
        low = store.get_min_offset_in_queue("LossyStream", 0)
        assert 1000 < low < 2000

        failing = _start(spark, {**options, "failOnDataLoss": "true"}, out, ckpt,
                         availableNow=True)  # fmt: skip
        with pytest.raises(Exception, match=r"LossyStream queue 0: offsets \[1000, \d+\)"):
            failing.awaitTermination(120)

        skipping = _start(spark, {**options, "failOnDataLoss": "false"}, out, ckpt,
                          availableNow=True)  # fmt: skip
        skipping.awaitTermination(120)
        assert skipping.exception() is None
    offsets = sorted(r.queueOffset for r in spark.read.parquet(out).collect())
    assert offsets[:1000] == list(range(1000))
    resumed = offsets[1000:]
    assert resumed and resumed[0] >= low and resumed == list(range(resumed[0], 2000))
