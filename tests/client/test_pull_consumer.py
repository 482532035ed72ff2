"""The lite PullConsumer against a real broker: subscribe and assign, poll, seek, commit,
auto-commit, pause and resume."""

from __future__ import annotations

import time

import pytest
from test_push_consumer import produce
from waiting import wait_for

from shmq.client.consumer.lite_pull import PullConsumer
from shmq.client.types import MessageQueue
from shmq.errors import ClientError


def drain(pc: PullConsumer, n: int) -> list:
    """What ``pc`` polls until it has ``n`` messages."""
    got: list = []
    wait_for(lambda: got.extend(pc.poll(0.5)) or len(got) >= n, interval=0,
             what=f"{n} messages polled")  # fmt: skip
    return got


def test_subscribe_poll_commit_and_resume_from_committed(broker):
    broker.create_topic("LitePoll", 4)
    produce(broker, "LitePoll", 50)
    with PullConsumer("lite-g", broker.namesrv, consume_from_where="FIRST_OFFSET",
                      auto_commit=False, pull_batch_size=7) as pc:  # fmt: skip
        pc.subscribe("LitePoll")
        pc.start()
        assert len(pc.assignment()) == 4
        first = pc.poll(5)
        assert 0 < len(first) <= 7
        rest = drain(pc, 50 - len(first))
        assert sorted(m.body.decode() for m in first + rest) == sorted(f"m{i}" for i in range(50))
        assert pc.poll(0.05) == []
        mq = pc.assignment()[0]
        pc.commit({mq: 2})
        assert pc.committed(mq) == 2
    with PullConsumer("lite-g", broker.namesrv) as pc:
        pc.subscribe("LitePoll")
        pc.start()
        again = drain(pc, 1)
        assert {m.queue_id for m in again} == {mq.queue_id}
        assert min(m.queue_offset for m in again) == 2


def test_the_docstring_flow_start_fetch_assign_seek_poll(broker):
    broker.create_topic("LiteDoc", 4)
    produce(broker, "LiteDoc", 40)
    with PullConsumer("lite-doc", broker.namesrv, auto_commit=False) as consumer:
        consumer.start()
        assert consumer.poll(0.05) == []
        queues = consumer.fetch_message_queues("LiteDoc")[:2]
        consumer.assign(queues)
        for mq in queues:
            consumer.seek_to_begin(mq)
        got = drain(consumer, 20)
        assert {m.queue_id for m in got} == {mq.queue_id for mq in queues}
        consumer.commit()
        assert all(consumer.committed(mq) == consumer.position(mq) for mq in queues)


def test_assign_seek_pause_resume_and_auto_commit(broker):
    broker.create_topic("LiteAssign", 2)
    produce(broker, "LiteAssign", 20)
    q0, q1 = (MessageQueue("LiteAssign", "broker-a", i) for i in range(2))
    with PullConsumer("lite-a", broker.namesrv, pull_batch_size=100,
                      auto_commit_interval=0.01) as pc:  # fmt: skip
        pc.assign([q0])
        pc.start()
        assert pc.assignment() == [q0]
        pc.seek_to_begin(q0)
        msgs = drain(pc, 10)
        assert {m.queue_id for m in msgs} == {0} and len(msgs) == 10
        pc.seek(q0, 3)
        assert [m.queue_offset for m in pc.poll(1)][:1] == [3]
        with pytest.raises(ClientError, match="outside"):
            pc.seek(q0, 99)
        with pytest.raises(ClientError, match="not assigned"):
            pc.seek(q1, 0)
        pc.seek_to_end(q0)
        pc.pause([q0])
        produce(broker, "LiteAssign", 4, prefix="late")
        assert pc.poll(0.2) == []
        pc.resume([q0])
        assert len(drain(pc, 2)) == 2
        time.sleep(0.02)  # an auto_commit_interval passes: the next poll commits
        pc.poll(0.01)  # auto-commit of what earlier polls returned
        assert pc.committed(q0) == pc.position(q0)
    with pytest.raises(ClientError, match="cannot be mixed"):
        mixed = PullConsumer("lite-m", broker.namesrv)
        mixed.assign([q0])
        mixed.subscribe("LiteAssign")


def test_committed_offsets_out_of_range_are_corrected_with_a_log_line(broker, caplog):
    broker.create_topic("LiteRange", 1)
    produce(broker, "LiteRange", 5)
    mq = MessageQueue("LiteRange", "broker-a", 0)
    with PullConsumer("lite-r", broker.namesrv, auto_commit=False) as pc:
        pc.subscribe("LiteRange")
        pc.start()
        pc.commit({mq: 500})  # past the queue's max offset of 5
    with PullConsumer("lite-r", broker.namesrv, auto_commit=False) as pc:
        pc.subscribe("LiteRange")
        pc.start()
        assert pc.position(mq) == 500
        with caplog.at_level("WARNING", logger="shmq.client.consumer.rebalance"):
            assert pc.poll(0.2) == []
        assert pc.position(mq) == 5
        assert "offset 500 of" in caplog.text and "past its max 5" in caplog.text
        produce(broker, "LiteRange", 2, prefix="new")
        assert sorted(m.body for m in drain(pc, 2)) == [b"new0", b"new1"]
