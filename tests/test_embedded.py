"""shmq.EmbeddedBroker: a namesrv and a broker in this process, topics created, a produce and a
consume through it, and nothing left behind (store directory, shared memory, agents)."""

from __future__ import annotations

import os

import pytest

import shmq
from e2e_helpers import shm_entries
from shmq.ipc.procs import pid_alive


def read_from_start(namesrv: str, topic: str, count: int) -> list:
    """Up to ``count`` messages of ``topic`` from its first offset (20 s at most)."""
    got = []
    with shmq.PullConsumer(f"{topic}-reader", namesrv, consume_from_where="FIRST_OFFSET") as pc:
        pc.subscribe(topic)
        pc.start()
        for _ in range(40):
            got += pc.poll(0.5)
            if len(got) >= count:
                break
    return got


def test_embedded_broker_serves_a_produce_and_a_pull_then_cleans_up():
    before = shm_entries()
    with shmq.EmbeddedBroker(topics={"EmbeddedT": 2}) as mq:
        store = mq.store
        assert os.path.isdir(store)
        with shmq.Producer("embedded-p", mq.namesrv) as producer:
            results = [producer.send(shmq.Message("EmbeddedT", f"m{i}".encode())) for i in range(6)]
        assert {r.message_queue.queue_id for r in results} == {0, 1}
        got = read_from_start(mq.namesrv, "EmbeddedT", 6)
        assert sorted(m.body for m in got) == [f"m{i}".encode() for i in range(6)]
        agents = mq.stats()["agents"]
        pids = [a["pid"] for a in agents.values()]
    assert not os.path.exists(store)
    assert shm_entries() - before == set()
    assert not any(pid_alive(pid) for pid in pids)


def test_the_documented_maximum_message_goes_through_with_default_settings():
    body = bytes(range(256)) * (4 * 1024 * 1024 // 256)  # maxMessageSize: 4 MiB
    with shmq.EmbeddedBroker(topics={"Big": 1}) as mq:
        with shmq.Producer("big-p", mq.namesrv) as producer:
            sent = producer.send(shmq.Message("Big", body))
        assert sent.send_status is shmq.SendStatus.SEND_OK
        got = read_from_start(mq.namesrv, "Big", 1)
        assert [m.body == body for m in got] == [True]
        too_large = pytest.raises(shmq.MessageTooLargeError, match="maxMessageSize")
        with shmq.Producer("big-p2", mq.namesrv) as producer, too_large:
            producer.send(shmq.Message("Big", body + b"x"))
