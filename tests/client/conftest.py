"""One namesrv + broker for the client tests of a module (each test uses its own topics and
groups), and a helper to read what was produced."""

from __future__ import annotations

import pytest
from waiting import wait_for

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


def read_all(c, topic: str, queue_id: int, count: int) -> list:
    """The first ``count`` messages of a queue, read through shared memory."""
    with QueueReader("tcp-check", c.namesrv) as reader:
        mq = MessageQueue(topic, "broker-a", queue_id)
        out: list = []

        def all_read() -> bool:
            out.extend(reader.pull(mq, len(out), count - len(out), timeout=0.5).messages)
            return len(out) >= count

        wait_for(all_read, interval=0, what=f"{count} messages of {topic}:{queue_id}")
        return out
