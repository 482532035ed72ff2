"""``QueueReader.follow``: queues of one same-host broker waited on and pulled with their
link and slots chosen once, standing only while the reader's links are the ones it chose."""

from __future__ import annotations

import threading
import time

from shmq.client.producer.producer import Producer
from shmq.client.selector import MessageSelector
from shmq.client.transport.queue_reader import QueueReader
from shmq.client.types import PullStatus
from shmq.message import Message

TOPIC = "Follow"


def test_a_follower_waits_and_pulls_its_queues(broker):
    broker.create_topic(TOPIC, 2)
    with QueueReader("g-follow", broker.namesrv) as reader:
        mqs = reader.queues(TOPIC)
        follower = reader.follow(mqs)
        assert follower is not None and follower.follows(mqs)
        offsets = {mq: reader.max_offset(mq) for mq in mqs}
        assert follower.wait(dict(offsets), 0.05) == []  # nothing came: the time ran out
        with Producer("p-follow", broker.namesrv) as producer:
            sent = producer.send(Message(TOPIC, b"one", tags="A"))
        mq = next(q for q in mqs if q.queue_id == sent.message_queue.queue_id)
        assert follower.wait(dict(offsets), 5.0) == [mq]
        result = follower.pull(mq, offsets[mq], 32, "A || B")
        assert result.pull_status is PullStatus.FOUND
        assert [m.body for m in result.messages] == [b"one"]
        assert result.next_begin_offset == offsets[mq] + 1 == result.max_offset
        skipped = follower.pull(mq, offsets[mq], 32, "B")  # filtered out: read past
        assert skipped.messages == [] and skipped.next_begin_offset == offsets[mq] + 1
        # a SQL92 selector is read by the reader
        assert follower.pull(mq, offsets[mq], 32, MessageSelector.by_sql("a > 1")) is None


def test_a_wake_ends_a_followers_wait(broker):
    broker.create_topic(TOPIC + "Wake", 1)
    with QueueReader("g-follow-wake", broker.namesrv) as reader:
        mqs = reader.queues(TOPIC + "Wake")
        follower = reader.follow(mqs)
        offsets = {mq: reader.max_offset(mq) for mq in mqs}
        threading.Timer(0.2, reader.wake).start()
        start = time.monotonic()
        assert follower.wait(offsets, 10.0) == []
        assert time.monotonic() - start < 5.0


def test_a_follower_stands_only_for_its_queues_and_the_links_it_chose(broker):
    broker.create_topic(TOPIC + "Links", 2)
    with QueueReader("g-follow-links", broker.namesrv) as reader:
        first, second = reader.queues(TOPIC + "Links")
        follower = reader.follow([first])
        assert not follower.follows([first, second])
        assert follower.pull(second, 0, 1, "*") is None  # not one of its queues
        with reader._lock:
            reader._forget_links()  # a route refresh, a retired link, a suggested broker
        assert not follower.follows([first])
        assert follower.pull(first, 0, 1, "*") is None
        assert reader.follow([first]).follows([first])
    with QueueReader("g-follow-tcp", broker.namesrv, transport="tcp") as reader:
        assert reader.follow(reader.queues(TOPIC + "Links")) is None  # not shared memory
