"""The columns of a batch read: ``includeHeaders`` gives Kafka's ``headers`` column (the
user properties, in stored order, null without any), alone or with ``includeProperties``;
and the column-wise decode gives the same rows as the messages' own fields."""

from __future__ import annotations

import pytest

from shmq.client.producer.producer import Producer
from shmq.errors import ConfigError
from shmq.message import Message
from shmq.spark.options import parse_read_options

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def sent(broker, make_topic):
    """Messages with user properties (and tags/keys, which are system properties), and
    bulk messages with none: {(queueId, queueOffset): Message}."""
    topic = make_topic("SparkReadHeaders", 2)
    out = {}
    with Producer("spark-headers-producer", broker.namesrv) as producer:
        msgs = [
            Message(topic, f"m{i}".encode(), tags="TagH", keys=[f"k{i}"],
                    properties={"color": "red", "size": str(i), "ünï": "çødé"})
            for i in range(30)
        ]  # fmt: skip
        for m, r in zip(msgs, producer.send_batch(msgs), strict=True):
            out[(r.message_queue.queue_id, r.queue_offset)] = m
        bodies = [f"plain-{i}".encode() for i in range(40)]
        r = producer.send_bulk(topic, bodies)
        for body, qo in zip(bodies, r.queue_offsets, strict=True):
            out[(r.message_queue.queue_id, int(qo))] = Message(topic, body)
    return topic, out


def _read(spark, broker, topic, **options):
    reader = spark.read.format("shmq").option("namesrv", broker.namesrv).option("topic", topic)
    return reader.options(**options).load()


def test_headers_are_the_user_properties_as_kafka_types_them(spark, broker, sent):
    from pyspark.sql.types import ArrayType, BinaryType, StringType, StructField, StructType

    topic, msgs = sent
    df = _read(spark, broker, topic, includeHeaders="true")
    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    assert df.schema["headers"].dataType == ArrayType(header)
    assert "properties" not in df.columns
    rows = {(r.queueId, r.queueOffset): r for r in df.collect()}
    assert set(rows) == set(msgs)
    for key, m in msgs.items():
        r = rows[key]
        assert bytes(r.body) == m.body
        if m.properties:
            got = [(h.key, bytes(h.value)) for h in r.headers]
            assert got == [(k, v.encode()) for k, v in m.properties.items()]
            assert r.tags == "TagH" and r.keys == m.keys  # system ones stay in their columns
        else:
            assert r.headers is None  # as Kafka's source: no headers, null


def test_headers_with_properties_and_a_filter(spark, broker, sent):
    topic, msgs = sent
    df = _read(spark, broker, topic, includeHeaders="true", includeProperties="true",
               tags="TagH")  # fmt: skip
    assert df.columns[-2:] == ["properties", "headers"]
    rows = df.collect()
    assert len(rows) == sum(1 for m in msgs.values() if m.properties)
    for r in rows:
        names = [h.key for h in r.headers]
        assert names == ["color", "size", "ünï"]
        assert {"TAGS", "KEYS", "UNIQ_KEY"} <= set(r.properties)
        assert set(names) <= set(r.properties)


def test_include_headers_must_be_a_boolean(spark, broker, sent):
    with pytest.raises(ConfigError, match="option includeHeaders must be true or false, not 'yes'"):
        parse_read_options({"store": "/x", "topic": "T", "includeHeaders": "yes"}, streaming=False)
    with pytest.raises(Exception, match="includeHeaders must be true or false"):
        _read(spark, broker, sent[0], includeHeaders="yes").collect()
