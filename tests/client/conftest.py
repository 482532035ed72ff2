"""One namesrv + broker for the client tests of a module (each test uses its own topics and
groups), and helpers to create topics and produce."""

from __future__ import annotations

import time

import pytest

from e2e_helpers import cluster, shm_entries
from shmq.client.transport.queue_reader import QueueReader
from shmq.client.types import MessageQueue


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    before = shm_entries()
    # a failed message comes back from the retry topic after a second, not 10 s
    levels = " ".join(["1s"] * 18)
    with cluster(tmp_path_factory.mktemp("cluster"), defaultTopicQueueNums=4,
                 messageDelayLevel=levels) as c:  # fmt: skip
        yield c
    assert shm_entries() - before == set()


def create_topic(c, topic: str, queues: int = 8, broker_name: str = "broker-a") -> None:
    """Create ``topic`` and wait until the namesrv routes it."""
    c.create_topic(topic, queues, broker_name)
    with QueueReader("probe", c.namesrv) as reader:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                found = {mq.broker_name for mq in reader.queues(topic)}
                if broker_name in found:
                    return
            except Exception:
                pass
            reader.routes.invalidate(topic)
            time.sleep(0.05)
    raise AssertionError(f"no route for {topic}")


def wait_for(predicate, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def read_all(c, topic: str, queue_id: int, count: int) -> list:
    """The first ``count`` messages of a queue, read through shared memory."""
    with QueueReader("tcp-check", c.namesrv) as reader:
        mq = MessageQueue(topic, "broker-a", queue_id)
        out: list = []
        deadline = time.monotonic() + 10
        while len(out) < count and time.monotonic() < deadline:
            out += reader.pull(mq, len(out), count - len(out), timeout=0.5).messages
        return out
