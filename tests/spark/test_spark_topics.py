"""A topic named by option topic/topics that does not exist fails the query, naming it and
the topics that do exist; a topic that exists without messages, and a topicPattern that
matches nothing, read as 0 rows. Batch and streaming; from a store, through a broker's
files and over TCP. Planning is called as Spark's planner process calls it (no job), and
one batch and one streaming query show the error reaching the user."""

from __future__ import annotations

import os

import pytest

from shmq.broker.topic.config import TopicConfig, TopicConfigManager
from shmq.errors import ConfigError
from shmq.spark.options import parse_read_options
from shmq.spark.reader import ShmqBatchReader, ShmqStreamReader
from shmq.store import MessageStore

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SMALL = {
    "mapped_file_size_commit_log": 64 * 1024,
    "mapped_file_size_consume_queue": 20 * 64,
    "preallocate_mapped_file_enable": False,
}
EMPTY = "SparkTopicsEmpty"  # created on the session's broker, nothing sent to it
MISSING = "SparkTopicsNope"


def _plan(options: dict, streaming: bool = False):
    """The batch query's partitions, or the stream's initial offsets."""
    opts = parse_read_options(options, streaming=streaming)
    if not streaming:
        return ShmqBatchReader(opts).partitions()
    reader = ShmqStreamReader(opts)
    try:
        return reader.initialOffset()
    finally:
        reader.stop()


def test_a_missing_topic_in_a_store_fails_naming_it(tmp_path):
    path = str(tmp_path / "store")
    with MessageStore.open(path, **SMALL) as store:
        store.put_batch("Present", 0, [b"x"] * 10)
        store.dispatch()
    for streaming in (False, True):
        with pytest.raises(ConfigError) as info:
            _plan({"store": path, "topic": "Absent"}, streaming)
        assert str(info.value) == (
            f"topic 'Absent' does not exist in the store {path} (its topics: Present). Create "
            "it first, or subscribe with option topicPattern, which reads topics that may not "
            "exist yet"
        )
        with pytest.raises(ConfigError, match=r"^topics 'Absent', 'Gone' do not exist"):
            _plan({"store": path, "topics": "Present,Absent,Gone"}, streaming)
        _plan({"store": path, "topicPattern": "Absent.*"}, streaming)  # no error
    assert _plan({"store": path, "topicPattern": "Absent.*"}) == []
    [partition] = _plan({"store": path, "topic": "Present"})
    assert (partition.topic, partition.start, partition.end) == ("Present", 0, 10)
    # a broker's store: a topic created without messages is in its config/topics.json
    topics = TopicConfigManager(os.path.join(path, "config"))
    topics.update(TopicConfig("Declared", 4, 4))
    topics.persist()
    for streaming in (False, True):
        _plan({"store": path, "topic": "Declared"}, streaming)  # no error
    assert _plan({"store": path, "topic": "Declared"}) == []


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_a_missing_topic_of_a_broker_fails_naming_it(broker, make_topic, transport):
    make_topic(EMPTY, 2)
    base = {"namesrv": broker.namesrv, "transport": transport}
    for streaming in (False, True):
        with pytest.raises(ConfigError) as info:
            _plan({**base, "topic": MISSING}, streaming)
        text = str(info.value)
        assert text.startswith(f"topic '{MISSING}' does not exist in ")
        assert (
            "its topics: " in text and f"shmq admin topic-list --namesrv {broker.namesrv}" in text
        )
        with pytest.raises(ConfigError, match=f"^topic '{MISSING}' does not exist"):
            _plan({**base, "topics": f"{EMPTY},{MISSING}"}, streaming)
        _plan({**base, "topic": EMPTY}, streaming)  # exists, nothing in it: no error
        _plan({**base, "topicPattern": f"{MISSING}.*"}, streaming)
    assert _plan({**base, "topic": EMPTY}) == []
    assert _plan({**base, "topicPattern": f"{MISSING}.*"}) == []


def test_queries_on_a_missing_topic_fail_and_a_pattern_reads_nothing(spark, broker, tmp_path):
    def reader(stream: bool = False, **options: str):
        r = (spark.readStream if stream else spark.read).format("shmq")
        for k, v in {"namesrv": broker.namesrv, **options}.items():
            r = r.option(k, v)
        return r.load()

    with pytest.raises(Exception, match=f"topic '{MISSING}' does not exist in broker"):
        reader(topic=MISSING).count()
    assert reader(topicPattern=f"{MISSING}.*").count() == 0
    query = (
        reader(stream=True, topic=MISSING)
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        with pytest.raises(Exception, match=f"topic '{MISSING}' does not exist in broker"):
            query.awaitTermination(120)
    finally:
        query.stop()
