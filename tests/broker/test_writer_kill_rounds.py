"""SIGKILL the writer agent again and again under SYNC_FLUSH while sync, async and bulk
producers send, at random points of its passes; afterwards every acknowledged id is stored,
and no id is stored twice (issue 53, item 1: a restarted writer's ring journal must make
it exactly-once, also for a ring the supervisor fences because the writer died twice
reading it: what the dead writer stored from it is answered, not sent again)."""

from __future__ import annotations

import collections
import os
import random
import signal
import threading
import time
from collections.abc import Callable

import pytest
from waiting import wait_for

from e2e_helpers import embedded
from shmq.client.producer.producer import Producer
from shmq.errors import SendTimeoutError, ShmqError
from shmq.ipc import counters as cn
from shmq.message import Message
from spec_decoder import walk_commitlog

TOPIC = "KillRounds"
# about 1.6 s each on 2 cores (the writer's restart dominates): CI runs 60, a soak more
ROUNDS = int(os.environ.get("SHMQ_WRITER_KILL_ROUNDS", "60"))
BULK = 32
ASYNC_WINDOW = 512


class Sender(threading.Thread):
    """One producer sending ids ``<kind>-<n>`` until told to stop; ``acked`` are the ids
    the broker answered SEND_OK (or FLUSH_DISK_TIMEOUT: stored, not flushed in time)."""

    def __init__(self, kind: str, namesrv: str, stop: threading.Event) -> None:
        super().__init__(name=f"sender-{kind}")
        self.kind, self.namesrv, self.stop = kind, namesrv, stop
        self.acked: list[str] = []
        self.failed = 0
        self.sent = 0

    def run(self) -> None:
        send: Callable[[Producer], None] = getattr(self, f"_{self.kind}")
        with Producer(f"kill-{self.kind}", self.namesrv, send_timeout=3) as producer:
            while not self.stop.is_set():
                send(producer)

    def _ids(self, count: int) -> list[str]:
        first, self.sent = self.sent, self.sent + count
        return [f"{self.kind}-{n}" for n in range(first, first + count)]

    def _sync(self, producer: Producer) -> None:
        [one] = self._ids(1)
        try:
            producer.send(Message(TOPIC, one.encode()))
            self.acked.append(one)
        except ShmqError:
            self.failed += 1

    def _bulk(self, producer: Producer) -> None:
        ids = self._ids(BULK)
        try:
            producer.send_bulk(TOPIC, [i.encode() for i in ids])
            self.acked.extend(ids)
        except ShmqError:
            self.failed += 1

    def _async(self, producer: Producer) -> None:
        ids = self._ids(ASYNC_WINDOW)
        futures = []
        for one in ids:
            try:
                futures.append((one, producer.send_async(Message(TOPIC, one.encode()))))
            except ShmqError:
                self.failed += 1
        for one, future in futures:
            try:
                future.result(30)
                self.acked.append(one)
            except ShmqError:
                self.failed += 1


def kill_writer_once(mq, rng: random.Random) -> None:
    """Wait for the (restarted) writer to append, then SIGKILL it somewhere in its passes."""
    words = mq.broker.counters.words
    start = cn.load(words, cn.WRITE_OFFSET)
    wait_for(lambda: cn.load(words, cn.WRITE_OFFSET) > start, timeout=60,
             what="the writer to append again")  # fmt: skip
    time.sleep(rng.uniform(0.0, 0.15))
    pid = mq.stats()["agents"]["writer"]["pid"]
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: (w := mq.stats()["agents"]["writer"])["pid"] != pid and w["alive"],
             timeout=60, what="the writer's restart")  # fmt: skip


@pytest.mark.slow
@pytest.mark.crash
@pytest.mark.timeout(600)
def test_writer_killed_in_many_rounds_stores_every_acked_id_once(tmp_path):
    rng = random.Random(53)
    root = str(tmp_path / "store")
    stop = threading.Event()
    with embedded(root, topics={TOPIC: 4}, flush_disk_type="SYNC_FLUSH",
                  agent_restart_max=10 * ROUNDS) as mq:  # fmt: skip
        senders = [Sender(kind, mq.namesrv, stop) for kind in ("sync", "async", "bulk")]
        for sender in senders:
            sender.start()
        try:
            for _ in range(ROUNDS):
                kill_writer_once(mq, rng)
        finally:
            stop.set()
            for sender in senders:
                sender.join(120)
        assert mq.stats()["agents"]["writer"]["restarts"] >= 1
    records, _ = walk_commitlog(os.path.join(root, "commitlog"))
    stored = collections.Counter(r["body"].decode() for r in records if r["topic"] == TOPIC)
    twice = sorted((n, body) for body, n in stored.items() if n > 1)
    by_kind = collections.Counter(body.split("-")[0] for _, body in twice)
    assert not twice, f"{len(twice)} ids stored more than once ({dict(by_kind)}): {twice[:5]}"
    lost = [one for s in senders for one in s.acked if one not in stored]
    assert not lost, f"{len(lost)} acknowledged ids not stored: {lost[:5]}"
    assert all(s.acked for s in senders), {s.kind: len(s.acked) for s in senders}


def test_an_async_send_answered_late_is_not_stored_twice(tmp_path):
    """The writer stopped (SIGSTOP) past the producer's send timeout: the async sends fail
    with SendTimeoutError, unretried, and once the writer runs again each is stored once.
    Before, the completion thread sent them again through a new ring while the writer
    still had them in the old one (which it drains when released): stored two or three
    times, and the producer saw no error (the duplicates of issue 53, item 1)."""
    root = str(tmp_path / "store")
    n = 40
    with (
        embedded(root, topics={TOPIC: 1}, flush_disk_type="SYNC_FLUSH") as mq,
        Producer("late", mq.namesrv, send_timeout=1) as producer,
    ):
        producer.send(Message(TOPIC, b"first"))  # the ring is registered
        pid = mq.stats()["agents"]["writer"]["pid"]
        os.kill(pid, signal.SIGSTOP)
        try:
            futures = [producer.send_async(Message(TOPIC, b"late-%d" % i)) for i in range(n)]
            # the writer runs again once the sends failed, or (before the fix) once they
            # were sent again through a new ring, which it then reads beside the old one
            wait_for(lambda: all(f.done() for f in futures)
                     or producer.stats().get("async_retries", 0) >= n, timeout=30,
                     what="the sends to time out")  # fmt: skip
        finally:
            os.kill(pid, signal.SIGCONT)
        errors = [f.exception(30) for f in futures]
        producer.send(Message(TOPIC, b"last"))
    records, _ = walk_commitlog(os.path.join(root, "commitlog"))
    stored = collections.Counter(r["body"] for r in records if r["topic"] == TOPIC)
    assert {b"late-%d" % i: stored[b"late-%d" % i] for i in range(n)} == {
        b"late-%d" % i: 1 for i in range(n)
    }
    assert all(isinstance(e, SendTimeoutError) for e in errors), errors[:3]
    assert "may still be stored" in str(errors[0])
