"""Batch reads: what a query returns equals what was produced, offset ranges and tags
filter, and failOnDataLoss after cleanup."""

from __future__ import annotations

import time

import pytest

from shmq.client.producer.producer import Producer
from shmq.message import Message
from shmq.store import MessageStore

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SMALL = {
    "mapped_file_size_commit_log": 64 * 1024,
    "mapped_file_size_consume_queue": 20 * 64,
    "preallocate_mapped_file_enable": False,
}


@pytest.fixture(scope="module")
def produced(broker, make_topic):
    """Messages sent through the broker: bulk (two tags) and with keys/properties."""
    topic = make_topic("SparkRead", 4)
    sent = {}  # (queueId, queueOffset) -> (body, commitLogOffset, tags, keys)
    ids = {}  # (queueId, queueOffset) -> msg id of the keyed messages
    with Producer("spark-read-producer", broker.namesrv) as producer:
        for k in range(8):
            tags = "TagA" if k % 2 else "TagB"
            bodies = [f"bulk-{k}-{i}".encode() * 3 for i in range(500)]
            r = producer.send_bulk(topic, bodies, tags=tags)
            for body, qo, phys in zip(bodies, r.queue_offsets, r.physical_offsets, strict=True):
                sent[(r.message_queue.queue_id, int(qo))] = (body, int(phys), tags, [])
        msgs = [
            Message(topic, f"keyed-{i}".encode(), tags="TagC", keys=[f"k{i}", "all"],
                    properties={"color": "red"})
            for i in range(20)
        ]  # fmt: skip
        for m, r in zip(msgs, producer.send_batch(msgs), strict=True):
            sent[(r.message_queue.queue_id, r.queue_offset)] = (
                m.body,
                int(r.offset_msg_id[-16:], 16),
                "TagC",
                m.keys,
            )
            ids[(r.message_queue.queue_id, r.queue_offset)] = r.msg_id
    return topic, sent, ids


def _read(spark, broker, topic, **options):
    reader = spark.read.format("shmq").option("namesrv", broker.namesrv).option("topic", topic)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_batch_read_equals_what_was_produced(spark, broker, produced):
    topic, sent, ids = produced
    df = _read(spark, broker, topic, includeProperties="true", maxRowsPerPartition="700")
    assert df.rdd.getNumPartitions() >= 6  # 4 queues of ~1000 split at 700
    rows = df.collect()
    assert len(rows) == len(sent) == 4020
    got = {(r.queueId, r.queueOffset): r for r in rows}
    assert len(got) == len(rows)  # no duplicates
    assert set(got) == set(sent)
    for key, (body, phys, tags, keys) in sent.items():
        r = got[key]
        assert (bytes(r.body), r.commitLogOffset, r.tags, r.keys) == (body, phys, tags, keys)
        assert r.topic == topic and r.reconsumeTimes == 0
        assert r.storeTimestamp >= r.bornTimestamp
        assert r.properties["TAGS"] == tags
        if keys:
            assert r.properties["color"] == "red"
            assert r.msgId == ids[key]  # the producer's unique key
        else:
            assert r.msgId.endswith(f"{phys:016X}")  # the offset message id
    # the same store read by path, without the name server
    by_path = spark.read.format("shmq").option("store", broker.store).option("topic", topic)
    assert by_path.load().count() == len(sent)


def test_offset_ranges_and_tags(spark, broker, produced):
    topic, sent, _ = produced
    df = _read(
        spark,
        broker,
        topic,
        startingOffsets=f'{{"{topic}": {{"0": 100, "1": -2}}}}',
        endingOffsets=f'{{"{topic}": {{"0": 250, "2": 10, "3": -1}}}}',
    )
    got = sorted((r.queueId, r.queueOffset) for r in df.select("queueId", "queueOffset").collect())
    max_q = {q: max(o for (qq, o) in sent if qq == q) + 1 for q in range(4)}
    expected = sorted(
        [(0, o) for o in range(100, 250)]
        + [(1, o) for o in range(0, max_q[1])]
        + [(2, o) for o in range(0, 10)]
        + [(3, o) for o in range(0, max_q[3])]
    )
    assert got == expected
    tagged = _read(spark, broker, topic, tags="TagA || TagC").select("tags", "body").collect()
    want = sorted(b for (b, _, t, _) in sent.values() if t in ("TagA", "TagC"))
    assert sorted(bytes(r.body) for r in tagged) == want
    assert {r.tags for r in tagged} == {"TagA", "TagC"}
    # a start after the end is the user's error, named in the message
    with pytest.raises(Exception, match="starting offset 300 is after ending offset 200"):
        _read(
            spark,
            broker,
            topic,
            startingOffsets=f'{{"{topic}": {{"0": 300}}}}',
            endingOffsets=f'{{"{topic}": {{"0": 200}}}}',
        ).count()


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_the_sql_option_reads_the_matching_rows(spark, broker, produced, transport):
    """Option ``sql``: a SQL92 filter on each message's properties and TAGS, from the
    store's files or pulled over TCP; a bad one fails the query naming its position."""
    topic, sent, _ = produced
    expression = "color = 'red' OR TAGS = 'TagA'"
    rows = _read(spark, broker, topic, sql=expression, transport=transport).collect()
    want = sorted(b for (b, _, t, _) in sent.values() if t in ("TagA", "TagC"))
    assert sorted(bytes(r.body) for r in rows) == want
    with pytest.raises(Exception, match=r"option sql: .*position"):
        _read(spark, broker, topic, sql="color =").count()


def test_bad_option_fails_the_query_naming_it(spark, broker, produced):
    topic, _, _ = produced
    with pytest.raises(Exception, match="maxRowsPerPartition must be an integer"):
        _read(spark, broker, topic, maxRowsPerPartition="many").count()
    with pytest.raises(Exception, match="unknown read option 'startingoffset'"):
        _read(spark, broker, topic, startingOffset="earliest").count()


def test_starting_timestamp(spark, tmp_path):
    with MessageStore.open(tmp_path / "store", **SMALL) as store:
        store.put_batch("Timed", 0, [b"old"] * 50, born_timestamp=1)
        time.sleep(0.05)  # the clock moves on: ``cut`` lies strictly between the two
        cut = int(time.time() * 1000)
        time.sleep(0.05)
        store.put_batch("Timed", 0, [b"new"] * 30)
        store.dispatch()
        df = (
            spark.read.format("shmq")
            .option("store", str(tmp_path / "store"))
            .option("topic", "Timed")
            .option("startingTimestamp", str(cut))
            .load()
        )
        rows = df.select("queueOffset", "body").collect()
    assert sorted(r.queueOffset for r in rows) == list(range(50, 80))
    assert {bytes(r.body) for r in rows} == {b"new"}


def _cleaned_store(path) -> MessageStore:
    """A store whose oldest CommitLog and consume-queue files cleanup has deleted."""
    store = MessageStore.open(path, **SMALL)
    for _ in range(10):
        store.put_batch("Lossy", 0, [b"x" * 200] * 100)
    store.dispatch()
    report = store.clean_expired(time.time() + 10 * 86400, disk_used=0.99)
    assert report["commitlog_files"] > 0 and report["consume_queue_files"] > 0
    return store


def test_fail_on_data_loss_both_ways(spark, tmp_path):
    with _cleaned_store(tmp_path / "store") as store:
        low = store.get_min_offset_in_queue("Lossy", 0)
        assert 0 < low < 1000

        def read(fail: str):
            return (
                spark.read.format("shmq")
                .option("store", str(tmp_path / "store"))
                .option("topic", "Lossy")
                .option("startingOffsets", '{"Lossy": {"0": 0}}')
                .option("failOnDataLoss", fail)
                .load()
            )

        with pytest.raises(Exception, match=r"Lossy queue 0: offsets \[0, \d+\) are no longer"):
            read("true").count()
        offsets = sorted(r.queueOffset for r in read("false").select("queueOffset").collect())
        # Our min offset may be above the store's (a consume-queue file survives while its
        # first units point at deleted CommitLog files): every row read is intact.
        first = offsets[0]
        assert low <= first and offsets == list(range(first, 1000))
        # earliest (no explicit offsets) is not data loss
        df = spark.read.format("shmq").option("store", str(tmp_path / "store"))
        assert df.option("topic", "Lossy").load().count() == 1000 - first
