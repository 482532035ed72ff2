"""A real writer process killed with SIGKILL at random moments, several rounds on one store:
every message reported flushed must come back intact, and what comes back is exactly an
unbroken prefix of what was written (nothing invented, nothing after a gap)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from shmq.store import GetStatus, MessageStore

sys.path.insert(0, os.path.dirname(__file__))
from crash_writer import QUEUES, SMALL, TOPIC, body_for

pytestmark = [pytest.mark.crash, pytest.mark.slow]


def run_and_kill(store_dir: str, mode: str, rng: random.Random) -> int:
    """Start a writer, SIGKILL it after a random delay; the last sequence reported flushed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen(
        [
            sys.executable,
            os.path.join(os.path.dirname(__file__), "crash_writer.py"),
            store_dir,
            mode,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        first = child.stdout.readline()  # the child has recovered and is writing
        assert first.startswith("start"), first + child.stderr.read()
        time.sleep(rng.uniform(0.05, 0.6))
        child.send_signal(signal.SIGKILL)
        out, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL, err
    flushed = [int(line.split()[1]) for line in out.splitlines() if line.startswith("flushed")]
    return flushed[-1] if flushed else -1


def read_queue(store: MessageStore, queue_id: int) -> list[bytes]:
    bodies: list[bytes] = []
    offset = 0
    while True:
        got = store.get(TOPIC, queue_id, offset, 32)
        if got.status is not GetStatus.FOUND:
            assert got.status in (GetStatus.OFFSET_OVERFLOW_ONE, GetStatus.NO_MATCHED_LOGIC_QUEUE)
            return bodies
        bodies += [m.body for m in got.messages]
        offset = got.next_begin_offset


@pytest.mark.parametrize("mode", ["single", "batch"])
def test_sigkill_rounds_keep_every_flushed_message(tmp_path, mode):
    rng = random.Random(f"crash-{mode}")
    store_dir = str(tmp_path / "store")
    must_have = -1
    for _ in range(5):
        must_have = max(must_have, run_and_kill(store_dir, mode, rng))
        with MessageStore.open(store_dir, **SMALL) as store:
            assert store.recovery.abnormal  # the abort marker was left behind
            seqs: list[int] = []
            for q in range(QUEUES):
                bodies = read_queue(store, q)
                q_seqs = [int.from_bytes(b[:8], "big") for b in bodies]
                # every body is intact and each queue is in append order
                assert all(b == body_for(s) for b, s in zip(bodies, q_seqs, strict=True))
                assert q_seqs == sorted(q_seqs)
                seqs += q_seqs
            seqs.sort()
            assert seqs == list(range(len(seqs))), "recovered messages are not a prefix"
            assert len(seqs) - 1 >= must_have, f"lost flushed messages up to {must_have}"
            if mode == "single" and seqs:
                [m] = store.query_by_key(TOPIC, f"s{seqs[-1]}")
                assert m.body == body_for(seqs[-1])
            # the store keeps working after recovery: the next put lands after the prefix
            assert store.max_physical_offset == store.dispatch_limit
