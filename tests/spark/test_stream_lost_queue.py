"""A queue that disappears while a stream reads it (its topic deleted) fails the query with
``failOnDataLoss`` (the default), as Kafka's source fails on a deleted topic; without it, the
stream goes on with the queues that are left."""

from __future__ import annotations

import pytest
from pyspark.sql.datasource import ReadAllAvailable

from shmq.errors import DataLossError
from shmq.spark.options import parse_read_options
from shmq.spark.reader import ShmqStreamReader
from shmq.store import MessageStore

pytestmark = pytest.mark.spark


def _reader(path: str, **extra: str) -> ShmqStreamReader:
    options = {"store": path, "topicPattern": "Kept|Deleted", **extra}
    return ShmqStreamReader(parse_read_options(options, streaming=True))


def test_a_queue_gone_mid_stream_fails_the_query_unless_failondataloss_is_false(tmp_path):
    path = str(tmp_path / "store")
    with MessageStore.open(path) as store:
        store.put_batch("Kept", 0, [b"x" * 100] * 10)
        store.dispatch()
    start = {"Kept": {"0": 4}, "Deleted": {"0": 7}}  # what the checkpoint had read
    with pytest.raises(DataLossError, match=r"Deleted queue 0 is gone \(the query read it to 7\)"):
        _reader(path).latestOffset(start, ReadAllAvailable())
    lenient = _reader(path, failOnDataLoss="false").latestOffset(start, ReadAllAvailable())
    assert lenient == {"Kept": {"0": 10}, "Deleted": {"0": 7}}
