"""Soak: bulk sends and reads through many cleanup cycles with small files. Every
acknowledged message is read back in order (the reader keeps up before the next phase) unless
the cleaner deleted its CommitLog file first, the store's disk use stays bounded as the cleaner
deletes files behind it, and no process grows: the broker's supervisor and agents, and the
client (this process).

``fileReservedTime`` 0 makes every CommitLog file but the one being written expire at once,
and cleanup does not wait for consumers (nor does RocketMQ's): a round that comes while the
reader is still in a file that a phase's sends have just left behind deletes the rest of it.
Such a skip is allowed only for offsets the broker reports gone (below the queue's min
offset), and must stay rare, or the soak would check nothing."""

from __future__ import annotations

import contextlib
import os
import time

import numpy as np
import pytest
from waiting import wait_for

from e2e_helpers import cluster, shm_entries
from shmq.client.producer.producer import Producer
from shmq.client.transport.queue_reader import QueueReader

TOPIC = "Soak"
FILE = 2 << 20
PHASES = 24
PER_PHASE = 12_000  # about 3 MiB of 200-byte bodies: a file and a half per phase
PHASE_S = 0.5  # with cleanResourceInterval 100 ms: about five cleaner rounds a phase
HOURS = ";".join(str(h) for h in range(24))


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) << 10 for line in f if line.startswith("VmRSS:"))


def disk_bytes(root: str) -> int:
    total = 0
    for path, _, names in os.walk(root):
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                total += os.stat(os.path.join(path, name)).st_blocks * 512
    return total


def assert_deleted(reader: QueueReader, mq, missing: np.ndarray) -> None:
    """The offsets a pull skipped lie below the queue's min offset: cleanup removed them (the
    min offset moves once the cleaner has dealt with the queue, soon after the file went)."""
    wait_for(lambda: reader.min_offset(mq) > missing[-1],
             what=f"the min offset past a gap of {len(missing)} from {missing[0]}")  # fmt: skip


@pytest.mark.slow
def test_bulk_traffic_across_cleanup_cycles_loses_nothing_and_stays_bounded(tmp_path):
    before = shm_entries()
    conf = {
        "mappedFileSizeCommitLog": FILE,
        "mappedFileSizeConsumeQueue": 20 * 8192,
        "maxHashSlotNum": 1000,
        "maxIndexNum": 4000,
        "deleteWhen": HOURS,
        "fileReservedTime": 0,
        "cleanResourceInterval": 100,
        "cleanResourceInitialDelay": 200,
        "messageIndexEnable": "false",
    }
    with cluster(tmp_path, **conf) as c:
        c.create_topic(TOPIC)
        body = np.zeros(PER_PHASE * 200, dtype=np.uint8)
        offs = np.arange(PER_PHASE + 1, dtype=np.int64) * 200
        seq = body.view(np.uint32).reshape(PER_PHASE, 50)  # the first word of each body
        samples: list[dict[int, int]] = []
        disk: list[int] = []
        with Producer("soak-p", c.namesrv) as producer, QueueReader("soak-c", c.namesrv) as r:
            [mq] = r.queues(TOPIC)
            offset, read, acked, skipped = 0, 0, 0, 0
            for phase in range(PHASES):
                phase_end = time.monotonic() + PHASE_S  # a few cleaner rounds per phase
                seq[:, 0] = np.arange(acked, acked + PER_PHASE, dtype=np.uint32)
                for start in range(0, PER_PHASE, 4000):
                    stop = min(PER_PHASE, start + 4000)
                    sent = producer.send_bulk(
                        TOPIC,
                        (body[offs[start] : offs[stop]], offs[start : stop + 1] - offs[start]),
                    )
                    assert len(sent) == stop - start
                acked += PER_PHASE
                deadline = time.monotonic() + 60
                while read < acked:  # read back everything acknowledged, in order
                    assert time.monotonic() < deadline, f"phase {phase}: read {read} of {acked}"
                    result = r.pull_bulk(mq, offset, 8192, timeout=1.0)
                    batch = result.batch
                    if batch is not None and len(batch):
                        # one queue: a message's seq is its queue offset
                        qoffs = batch.queue_offsets
                        firsts = batch.bodies[batch.body_offsets[:-1]]  # low byte of the seq
                        assert np.array_equal(firsts, qoffs % 256), "a body at a wrong offset"
                        assert qoffs[0] >= read and np.all(np.diff(qoffs) > 0), "a repeat"
                        gone = int(qoffs[-1]) + 1 - read - len(batch)
                        if gone:
                            assert_deleted(r, mq, np.setdiff1d(np.arange(read, qoffs[-1]), qoffs))
                            skipped += gone
                        read = int(qoffs[-1]) + 1
                    offset = result.next_begin_offset
                agents = c.runtime_info()["agents"]
                pids = [c.broker_proc.pid, *(a["pid"] for a in agents.values()), os.getpid()]
                samples.append({pid: rss(pid) for pid in pids})
                disk.append(disk_bytes(c.store))
                time.sleep(max(0.0, phase_end - time.monotonic()))
            assert read == acked == PHASES * PER_PHASE
            assert skipped < acked // 20, f"cleanup took {skipped} of {acked} before the read"
            assert all(a["restarts"] == 0 for a in agents.values())
    written = PHASES * PER_PHASE * 300  # records are about 300 bytes
    assert max(disk) < min(written / 3, 24 << 20), f"the store grew to {max(disk) >> 20} MiB"
    warm, last = samples[PHASES // 3], samples[-1]
    for pid, size in last.items():
        assert size - warm[pid] < 16 << 20, f"pid {pid} grew by {(size - warm[pid]) >> 20} MiB"
    assert shm_entries() - before == set()
