"""Consumer groups with real processes: push consumers as subprocesses of the test (see
``e2e_clients.py push``), a namesrv and a broker as subprocesses, messages produced here."""

from __future__ import annotations

import collections
import os
import time

import pytest
from test_push_consumer import produce
from waiting import wait_for

from e2e_helpers import cluster, read_json_lines, shm_entries, stop
from shmq.client.transport.queue_reader import QueueReader

pytestmark = pytest.mark.slow


def rows(path: str) -> list[dict]:
    return read_json_lines(path) if os.path.exists(path) else []


def received(paths) -> collections.Counter:
    return collections.Counter(r["body"] for p in paths for r in rows(p) if "body" in r)


def assignment(path: str) -> list[int] | None:
    found = [r["assignment"] for r in rows(path) if "assignment" in r]
    return found[-1] if found else None


def push(c, name: str, *args: str) -> tuple:
    out = os.path.join(c.tmp, f"{name}.jsonl")
    proc = c.client(
        "push",
        "--topic",
        "Group",
        "--group",
        "workers",
        "--out",
        out,
        "--rebalance-interval",
        "60",
        "--persist-interval",
        "0.2",
        *args,
        log=f"{name}.log",
    )
    return proc, out


def test_clustering_split_then_a_member_leaves(tmp_path):
    before = shm_entries()
    with cluster(tmp_path) as c:
        c.create_topic("Group", 8)
        members = [push(c, f"c{i}") for i in range(3)]
        outs = [out for _, out in members]

        def split() -> bool:
            now = [assignment(o) for o in outs]
            return (
                all(now)
                and sorted(len(a) for a in now) == [2, 3, 3]
                and sorted(q for a in now for q in a) == list(range(8))
            )

        wait_for(split, timeout=60, what="3 members to split 8 queues 3/3/2")
        first = produce(c, "Group", 400, prefix="a")
        wait_for(lambda: sum(received(outs).values()) >= 400, timeout=60, what="the first 400")
        assert received(outs) == collections.Counter(first)
        for (_, out), queues in zip(members, [assignment(o) for o in outs], strict=True):
            assert {r["queue"] for r in rows(out) if "body" in r} <= set(queues)

        # each member commits what it consumed within its persist interval; a queue that
        # moves between the two that stay is read from its commit, so wait for them all
        # (otherwise that queue's last messages are consumed twice: at-least-once)
        with QueueReader("workers", c.namesrv) as reader:
            queues = reader.queues("Group")
            wait_for(
                lambda: sum(reader.committed(mq) for mq in queues) == 400,
                timeout=30,
                what="the first 400 committed",
            )
        leaver, _ = members[2]
        assert stop(leaver) == 0
        stayers = [out for _, out in members[:2]]
        wait_for(
            lambda: sorted(q for o in stayers for q in assignment(o)) == list(range(8)),
            timeout=30,
            what="the two others to take the leaver's queues",
        )
        second = produce(c, "Group", 400, prefix="b")
        wait_for(lambda: sum(received(outs).values()) >= 800, timeout=60, what="the second 400")
        time.sleep(0.5)  # a test of absence: a message twice would come by now
        # every message exactly once: the others went on from the leaver's committed offsets
        assert received(outs) == collections.Counter(first + second)
        for proc, _ in members[:2]:
            assert stop(proc) == 0
    assert shm_entries() - before == set()


def test_broadcasting_delivers_all_to_each(tmp_path):
    before = shm_entries()
    with cluster(tmp_path) as c:
        c.create_topic("Group", 8)
        members = [
            push(
                c,
                f"b{i}",
                "--model",
                "BROADCASTING",
                "--offset-dir",
                str(tmp_path / "offsets"),
                "--instance",
                f"i{i}",
            )
            for i in range(2)
        ]
        for _, out in members:
            wait_for(
                lambda out=out: assignment(out) == list(range(8)),
                timeout=60,
                what="all 8 queues each",
            )
        bodies = produce(c, "Group", 300)
        for _, out in members:
            wait_for(
                lambda out=out: sum(received([out]).values()) >= 300, timeout=60, what="all to each"
            )
            assert received([out]) == collections.Counter(bodies)
        for proc, _ in members:
            assert stop(proc) == 0
    assert shm_entries() - before == set()


def test_offsets_survive_a_broker_restart(tmp_path):
    before = shm_entries()
    with cluster(tmp_path) as c:
        c.create_topic("Group", 4)
        first = produce(c, "Group", 100, prefix="a")
        proc, out = push(c, "one")
        wait_for(lambda: sum(received([out]).values()) >= 100, timeout=60, what="the first 100")
        assert stop(proc) == 0
        c.stop_broker()
        c.start_broker()
        proc, out2 = push(c, "two")
        wait_for(
            lambda: assignment(out2) is not None and len(assignment(out2)) == 4,
            timeout=60,
            what="the second member to hold all 4 queues",
        )
        second = produce(c, "Group", 50, prefix="b")
        wait_for(lambda: sum(received([out2]).values()) >= 50, timeout=60, what="the next 50")
        time.sleep(0.5)  # a test of absence: an old message again would come by now
        assert received([out]) == collections.Counter(first)
        assert received([out2]) == collections.Counter(second)  # nothing old again
        assert stop(proc) == 0
    assert shm_entries() - before == set()
