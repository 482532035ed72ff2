"""Batch and bulk sends larger than the producer ring (bytes) and its completion slots:
they are sent in chunks with two in flight, and every result names where its message
really is (a send that appended everything before reading any answer had its first answers
overwritten by later ones)."""

from __future__ import annotations

import numpy as np
import pytest

from e2e_helpers import cluster, shm_entries
from shmq.client.producer.producer import Producer
from shmq.client.transport.queue_reader import QueueReader
from shmq.client.types import SendStatus
from shmq.message import Message

TOPIC = "Chunks"


@pytest.fixture(scope="module")
def small_rings(tmp_path_factory):
    before = shm_entries()
    with cluster(tmp_path_factory.mktemp("chunks"), ringSlots=256, ringSize=64 * 1024) as c:
        c.create_topic(TOPIC, 1)
        yield c
    assert shm_entries() - before == set()


def read_all(namesrv: str, start: int, n: int) -> list[bytes]:
    with QueueReader("chunks-reader", namesrv) as reader:
        [mq] = reader.queues(TOPIC)
        out: list[bytes] = []
        offset = start
        while len(out) < n:
            result = reader.pull_bulk(mq, offset, 4096, timeout=5.0)
            assert result.batch is not None, f"read {len(out)} of {n}"
            out += list(result.batch)
            offset = result.next_begin_offset
        return out


def test_a_bulk_send_far_larger_than_the_ring_is_answered_right(small_rings):
    n = 3000  # ~12 rings of completion slots, ~9 rings of bytes
    bodies = [i.to_bytes(4, "big") * 40 for i in range(n)]
    with Producer("chunks-bulk", small_rings.namesrv) as producer:
        first = producer.send_bulk(TOPIC, [b"start"]).queue_offsets[0] + 1
        result = producer.send_bulk(TOPIC, bodies)
    assert result.send_status is SendStatus.SEND_OK
    assert result.queue_offsets.tolist() == list(range(first, first + n))
    assert (np.diff(result.physical_offsets) > 0).all()
    assert read_all(small_rings.namesrv, first, n) == bodies


def test_a_batch_send_far_larger_than_the_ring_is_answered_right(small_rings):
    n = 1000
    msgs = [Message(TOPIC, f"m{i}".encode() * 20) for i in range(n)]
    with Producer("chunks-batch", small_rings.namesrv) as producer:
        first = producer.send_bulk(TOPIC, [b"start"]).queue_offsets[0] + 1
        results = producer.send_batch(msgs)
    assert [r.queue_offset for r in results] == list(range(first, first + n))
    assert len({r.msg_id for r in results}) == n
    assert read_all(small_rings.namesrv, first, n) == [m.body for m in msgs]
