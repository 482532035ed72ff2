"""A full disk refuses puts with a reason and stops nothing: real broker processes (a master
or a slave) on a small tmpfs; the disk is filled by a file the test writes and freed by
deleting it."""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

import pytest
from test_ha import caught_up, commitlog_bytes, read_log
from waiting import wait_for

from e2e_helpers import cluster, free_port, shm_entries, small_tmpfs, until_sent
from shmq.client.consumer.lite_pull import PullConsumer
from shmq.client.producer.producer import Producer
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
    """Write a filler file until only ``leave`` bytes are free, or none: the broker's mapped
    files may take pages of the disk meanwhile, so a write that finds it full ends the fill."""
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    left = max(0, free - leave)
    chunk = b"\0" * (1 << 16)
    with open(disk / "filler", "ab", buffering=0) as f:
        while left > 0:
            try:
                left -= f.write(chunk[: min(left, len(chunk))])
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                return


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
    """How many messages a new consumer reads from the first offset, once ``expected``."""
    got: list = []
    with PullConsumer(group, namesrv, consume_from_where="FIRST_OFFSET") as pc:
        pc.subscribe(TOPIC)
        pc.start()
        wait_for(lambda: got.extend(pc.poll(0.5)) or len(got) >= expected, interval=0,
                 what=f"{expected} messages of {TOPIC}")  # fmt: skip
    return len(got)


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


@pytest.mark.slow
def test_a_full_disk_slave_ends_replication_keeps_its_store_and_the_master_serves(disk, tmp_path):
    """The slave's store is on the small tmpfs: once it has no room for the next CommitLog
    file, it hangs up on the master naming the problem, keeps what it stored, and takes
    up replication again when space is back; the master's producers see nothing of it."""
    before = shm_entries()
    with cluster(tmp_path, brokerRole="ASYNC_MASTER", haListenPort=free_port(),
                 mappedFileSizeCommitLog=FILE) as c:  # fmt: skip
        c.create_topic(TOPIC)
        slave_store = str(disk / "store")
        c.add_broker("slave", brokerName="broker-a", brokerId=1, brokerRole="SLAVE",
                     storePathRootDir=slave_store, preallocateMappedFileEnable="false",
                     maxHashSlotNum=500, maxIndexNum=2000)  # fmt: skip
        with Producer("full-slave-p", c.namesrv, send_timeout=10) as producer:
            assert producer.send(Message(TOPIC, b"first")).send_status is SendStatus.SEND_OK
            caught_up(c)
            fill(disk, leave=FILE // 2)  # no room for the slave's second CommitLog file
            sent = [producer.send(Message(TOPIC, b"x" * 1000)).send_status for _ in range(1500)]
            assert set(sent) == {SendStatus.SEND_OK}  # beyond the first file: on the master
            wait_for(
                lambda: "no disk space" in read_log(tmp_path, "slave.log"),
                what="the slave to name the full disk",
            )
            problem = next(
                line
                for line in read_log(tmp_path, "slave.log").splitlines()
                if "HA connection to master" in line and "no disk space" in line
            )
            assert "closed" in problem, problem
            slave = c.runtime_info("slave")
            assert 0 < slave["write_offset"] <= FILE < c.runtime_info()["write_offset"]
            assert commitlog_bytes(slave_store, slave["write_offset"]) == (
                commitlog_bytes(c.store, slave["write_offset"])
            )
            assert all(a["alive"] and a["restarts"] == 0 for a in agents(c).values())
            assert all(a["alive"] for a in c.runtime_info("slave")["agents"].values())
            assert producer.send(Message(TOPIC, b"still")).send_status is SendStatus.SEND_OK
            free_space(disk)
            end = caught_up(c)  # replication resumes where the slave's store ended
            assert commitlog_bytes(slave_store, end) == commitlog_bytes(c.store, end)
    assert shm_entries() - before == set()
