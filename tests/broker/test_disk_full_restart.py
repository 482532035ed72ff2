"""A broker SIGKILLed on a full disk starts again on it: recovery comes up, serves what was
dispatched, refuses puts naming the disk, and allocates the consume-queue, index and
CommitLog files it lacked once space is back, without another restart. A real broker
process on a small tmpfs; the disk is filled by a file the test writes."""

from __future__ import annotations

import base64
import time
from pathlib import Path

import pytest
from test_disk_full import TOPIC, fill, free_space, send_until_refused
from test_ha import sigkill_broker
from waiting import wait_for

from e2e_helpers import cluster, shm_entries, small_tmpfs, until_sent
from shmq.client.admin.admin import Admin
from shmq.client.consumer.lite_pull import PullConsumer
from shmq.client.producer.producer import Producer
from shmq.client.types import SendStatus
from shmq.message import Message

FILE = 1 << 20  # CommitLog file size
CQ_UNITS = 200  # per consume-queue file: the crash leaves the second one uncreated
READER = "on-full-disk"  # the group that reads while the disk is full


def read_count(namesrv: str, group: str, expected: int, timeout: float = 30.0) -> int:
    """How many messages a new consumer of ``group`` reads from the first offset, reading
    until ``expected`` came or ``timeout`` passed."""
    got: list = []
    deadline = time.monotonic() + timeout
    with PullConsumer(group, namesrv, consume_from_where="FIRST_OFFSET") as pc:
        pc.subscribe(TOPIC)
        pc.start()
        while len(got) < expected and time.monotonic() < deadline:
            got.extend(pc.poll(0.5))
    return len(got)


@pytest.mark.slow
@pytest.mark.crash
def test_a_broker_killed_on_a_full_disk_starts_on_it_and_takes_puts_once_space_is_back(tmp_path):
    before = shm_entries()
    with small_tmpfs(tmp_path, "8m") as mnt:
        disk = Path(mnt)
        conf = {
            "mappedFileSizeCommitLog": FILE,
            "mappedFileSizeConsumeQueue": 20 * CQ_UNITS,
            "maxHashSlotNum": 500,
            "maxIndexNum": 150,  # the index rolls on the full disk too
            "storePathRootDir": str(disk / "store"),
            "preallocateMappedFileEnable": "false",
            "diskSpaceWarningLevelRatio": 100,  # puts are refused by the CommitLog alone
        }
        with cluster(tmp_path, **conf) as c:
            c.create_topic(TOPIC)
            # a new group's heartbeat creates its retry topic, which a full disk cannot persist
            c.create_topic(f"%RETRY%{READER}")
            with Producer("restart-p", c.namesrv, send_timeout=10) as producer:
                for i in range(100):
                    producer.send(Message(TOPIC, b"before %d" % i))
                fill(disk, leave=0)  # the CommitLog's file has room; nothing else has
                sent = [producer.send(Message(TOPIC, b"full %d" % i)) for i in range(300)]
                assert {r.send_status for r in sent} == {SendStatus.SEND_OK}
            wait_for(lambda: c.runtime_info()["dispatched_offset"] > 0, what="a dispatch")
            sigkill_broker(c, "broker-a")
            c.start_broker()  # recovery on the full disk
            assert read_count(c.namesrv, READER, CQ_UNITS) >= CQ_UNITS
            with Producer("restart-p2", c.namesrv, send_timeout=10) as producer:
                _, why = send_until_refused(producer, limit=2000)
                assert "SERVICE_NOT_AVAILABLE" in why and "disk" in why, why
                stored = 400
                free_space(disk)
                key = "space-is-back"
                until_sent(producer, Message(TOPIC, b"back", keys=[key]))
            assert read_count(c.namesrv, "after-space", stored + 1) >= stored + 1
            with Admin(c.namesrv) as admin:
                found = wait_for(lambda: admin.query_msg_by_key(TOPIC, key),
                                 what="the key of a message put once space was back")  # fmt: skip
            assert [base64.b64decode(m["body"]) for m in found] == [b"back"], found
            assert all(a["alive"] for a in c.runtime_info()["agents"].values())
    assert shm_entries() - before == set()
