"""A full disk refuses puts with a reason and stops nothing: a real broker process on a small
tmpfs; the disk is filled by a file the test writes and freed by deleting it."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import pytest

from e2e_helpers import cluster, shm_entries, small_tmpfs, until_sent
from shmq.client.producer import Producer
from shmq.client.pull_consumer import PullConsumer
from shmq.client.types import SendStatus
from shmq.errors import SendError
from shmq.message import Message

TOPIC = "Full"
FILE = 1 << 20  # CommitLog file size


@pytest.fixture
def disk(tmp_path):
    with small_tmpfs(tmp_path, "12m") as mnt:
        yield Path(mnt)


def fill(disk, leave: int) -> None:
    """Write a filler file until only ``leave`` bytes are free."""
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    with open(disk / "filler", "ab") as f:
        f.write(b"\0" * max(0, free - leave))


def free_space(disk) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(disk / "filler")


def send_until_refused(producer: Producer, limit: int = 20_000) -> tuple[int, str]:
    for i in range(limit):
        try:
            producer.send(Message(TOPIC, b"x" * 1000))
        except SendError as exc:
            return i, str(exc)
    raise AssertionError(f"{limit} sends of 1 KB were all stored on a full disk")


def read_all(namesrv: str, group: str, expected: int) -> int:
    got = 0
    with PullConsumer(group, namesrv, consume_from_where="FIRST_OFFSET") as pc:
        pc.subscribe(TOPIC)
        pc.start()
        deadline = time.monotonic() + 30
        while got < expected and time.monotonic() < deadline:
            got += len(pc.poll(0.5))
    return got


def agents(c) -> dict:
    return c.runtime_info()["agents"]


@pytest.mark.slow
def test_a_full_disk_refuses_sends_serves_reads_and_recovers(disk, tmp_path):
    before = shm_entries()
    conf = {
        "mappedFileSizeCommitLog": FILE,
        "maxHashSlotNum": 500,
        "maxIndexNum": 2000,
        "storePathRootDir": str(disk / "store"),
        "preallocateMappedFileEnable": "false",
    }
    with cluster(tmp_path, **conf) as c:
        c.create_topic(TOPIC)
        with Producer("full-p", c.namesrv, send_timeout=10) as producer:
            assert producer.send(Message(TOPIC, b"first")).send_status is SendStatus.SEND_OK
            fill(disk, leave=FILE // 2)  # no room for a second CommitLog file
            stored, why = send_until_refused(producer)
            stored += 1
            assert "SERVICE_NOT_AVAILABLE" in why and "no disk space" in why, why
            states = agents(c)
            assert all(a["alive"] and a["restarts"] == 0 for a in states.values()), states
            assert read_all(c.namesrv, "full-reader", stored) == stored
            free_space(disk)
            until_sent(producer, Message(TOPIC, b"space is back"))  # retried within 1 s
            stored += 1
        # a restart on a full disk comes up, serves reads and refuses puts
        assert c.stop_broker() == 0
        fill(disk, leave=0)
        c.start_broker()
        assert read_all(c.namesrv, "after-restart", stored) == stored
        with Producer("full-p2", c.namesrv, send_timeout=10) as producer:
            _, why = send_until_refused(producer, limit=2000)
            assert "SERVICE_NOT_AVAILABLE" in why
            free_space(disk)
            until_sent(producer, Message(TOPIC, b"back again"))
        assert all(a["alive"] and a["restarts"] == 0 for a in agents(c).values())
    assert shm_entries() - before == set()
