"""The cleaner agent in a real broker (on a small tmpfs for the disk-full test): expired
CommitLog files are deleted on schedule, reput deletes the consume-queue and index files
below them, every process (agents, supervisor, a consumer) unmaps them so the disk space
really comes back, a disk over 90 % refuses puts until it is below again, and an admin may
have expired files deleted outside ``deleteWhen``'s hours."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from waiting import wait_for

from e2e_helpers import cluster, shm_entries, small_tmpfs, until_sent
from e2e_helpers import shmq as shmq_cli
from shmq.client.admin.admin import Admin
from shmq.client.producer.producer import Producer
from shmq.client.transport.queue_reader import QueueReader
from shmq.client.types import PullStatus
from shmq.errors import SendError
from shmq.message import Message

TOPIC = "Cleaned"
FILE = 1 << 20
HOURS = ";".join(str(h) for h in range(24))  # deleteWhen: every hour is delete time


@pytest.fixture
def disk(tmp_path):
    with small_tmpfs(tmp_path, "32m") as mnt:
        yield Path(mnt)


def used(path) -> int:
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def deleted_store_files(pid: int, store: str) -> list[str]:
    """Store files that process ``pid`` still maps or holds open although they were
    deleted (they keep their disk space)."""
    found = []
    with open(f"/proc/{pid}/maps") as f:
        found += [line.split()[-2] for line in f if store in line and "(deleted)" in line]
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            continue
        if store in target and target.endswith("(deleted)"):
            found.append(target)
    return found


def commitlog_files(store: str) -> list[str]:
    return sorted(os.listdir(os.path.join(store, "commitlog")))


@pytest.mark.slow
def test_expired_files_are_deleted_and_released_and_a_full_disk_refuses_puts(disk, tmp_path):
    before = shm_entries()
    store = str(disk / "store")
    conf = {
        "storePathRootDir": store,
        "mappedFileSizeCommitLog": FILE,
        "maxHashSlotNum": 500,
        "maxIndexNum": 4000,
        "deleteWhen": HOURS,
        "fileReservedTime": 1,
        "cleanResourceInterval": 300,
        "cleanResourceInitialDelay": 300,
        "preallocateMappedFileEnable": "false",
    }
    with cluster(tmp_path, **conf) as c:
        c.create_topic(TOPIC)
        with Producer("clean-p", c.namesrv) as producer, QueueReader("clean-c", c.namesrv) as r:
            for i in range(5000):  # about 5 CommitLog files
                producer.send(Message(TOPIC, b"%04d" % i + b"x" * 996))
            [mq] = r.queues(TOPIC)
            offset = 0
            while offset < 5000:  # a consumer reads everything, mapping every file
                offset = r.pull(mq, offset, 512).next_begin_offset
            files = commitlog_files(store)
            assert len(files) >= 5
            old = time.time() - 2 * 3600
            for name in files[:3]:
                os.utime(os.path.join(store, "commitlog", name), (old, old))
            full = used(disk)
            wait_for(lambda: commitlog_files(store) == files[3:], what="the aged files to go")
            agents = c.runtime_info()["agents"]
            pids = [c.broker_proc.pid, *(a["pid"] for a in agents.values()), os.getpid()]
            r.pull(mq, 4990, 10)  # a read lets the consumer notice the deleted files

            def released() -> bool:
                r.pull(mq, 4990, 10)
                return not any(deleted_store_files(pid, store) for pid in pids)

            wait_for(released, what="every process to release the deleted files")
            assert full - used(disk) >= 3 * FILE - (256 << 10)
            # consume-queue files below the new minimum went too, and the queue's min moved
            # to its first message still stored, the first of the oldest CommitLog file kept,
            # even within a consume-queue file (RocketMQ's correctMinOffset)
            low = r.min_offset(mq)
            [first] = r.pull(mq, low, 1).messages
            assert first.physical_offset == int(files[3]) and first.body[:4] == b"%04d" % low
            cq_dir = os.path.join(store, "consumequeue", TOPIC, "0")
            assert int(sorted(os.listdir(cq_dir))[0]) > 0

            # over 90 % of the disk: puts are refused with the reason, then accepted again
            filler = disk / "filler"
            with open(filler, "wb") as f:
                f.write(b"\0" * (int(os.statvfs(disk).f_blocks * 0.93) * 4096 - used(disk)))

            def refused() -> str | None:  # once a cleaner round saw the disk full
                try:
                    producer.send(Message(TOPIC, b"refused"))
                except SendError as exc:
                    return str(exc)
                return None

            assert "SERVICE_NOT_AVAILABLE: disk is" in wait_for(refused, what="puts refused")
            os.unlink(filler)
            until_sent(producer, Message(TOPIC, b"accepted"))
            assert all(a["alive"] and a["restarts"] == 0 for a in agents.values())
    assert shm_entries() - before == set()


def test_delete_expired_commitlog_deletes_outside_delete_when(tmp_path):
    """mqadmin deleteExpiredCommitLog: expired files wait for deleteWhen's hour, unless an
    admin asks; then they go at once, and files newer than fileReservedTime stay."""
    before = shm_entries()
    other_hour = (time.localtime().tm_hour + 12) % 24
    conf = {"mappedFileSizeCommitLog": FILE, "deleteWhen": str(other_hour),
            "fileReservedTime": 1, "cleanResourceInterval": 200,
            "cleanResourceInitialDelay": 200}  # fmt: skip
    with cluster(tmp_path, **conf) as c:
        c.create_topic(TOPIC)
        with Producer("manual-p", c.namesrv) as producer:
            for i in range(3000):  # about 3 CommitLog files
                producer.send(Message(TOPIC, b"%04d" % i + b"x" * 996))
        store = c.store
        files = commitlog_files(store)
        assert len(files) >= 3
        old = time.time() - 2 * 3600
        for name in files[:2]:
            os.utime(os.path.join(store, "commitlog", name), (old, old))
        time.sleep(1.0)  # a test of absence: several rounds, none at deleteWhen's hour
        assert commitlog_files(store) == files
        with Admin(c.namesrv) as admin:
            assert admin.delete_expired_commitlog() == ["broker-a"]
        wait_for(lambda: commitlog_files(store) == files[2:], what="the expired files to go")
        out = shmq_cli("admin", "delete-expired-commitlog", "-n", c.namesrv)
        assert (out.returncode, out.stdout.strip()) == (
            0, "broker-a: deleting expired CommitLog files"), out.stderr  # fmt: skip
        time.sleep(0.6)  # a test of absence: the admin's round came and went
        assert commitlog_files(store) == files[2:]  # the rest is not expired
        first = first_kept(c, store, files[2])
        # a restarted broker still answers from the CommitLog's first offset (recovery
        # publishes it; before, the min offset fell back to the consume-queue file's start
        # until the cleaner's next deletion)
        c.stop_broker()
        c.start_broker()
        assert first_kept(c, store, files[2]) == first
    assert shm_entries() - before == set()


def first_kept(c, store: str, first_file: str) -> int:
    """The queue's min offset, which GET_MIN_OFFSET and a local pull's result agree on, and
    which is the first message of the oldest CommitLog file kept."""
    with QueueReader("min-c", c.namesrv) as r:
        [mq] = r.queues(TOPIC)
        low = r.min_offset(mq)
        result = r.pull(mq, low, 1)
        assert result.min_offset == low > 0
        [msg] = result.messages
        assert msg.physical_offset == int(first_file) and msg.body[:4] == b"%04d" % low
    for transport in ("shm", "tcp"):  # a pull below it reads nothing and moves to it
        with QueueReader("min-c", c.namesrv, transport=transport) as r:
            below = r.pull(r.queues(TOPIC)[0], 0, 1)
        assert (below.pull_status, below.next_begin_offset, below.min_offset) == (
            PullStatus.OFFSET_ILLEGAL, low, low), transport  # fmt: skip
        assert not below.messages
    return low
