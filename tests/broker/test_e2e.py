"""End to end with real processes: a namesrv and a broker as subprocesses, producer and
consumer processes, the store checked afterwards by the independent decoder."""

from __future__ import annotations

import collections
import os
import signal
import time

import pytest
from waiting import wait_for

from e2e_helpers import cluster, read_json_lines, shm_entries
from spec_decoder import read_consume_queue, walk_commitlog


def wait_all(procs, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    for proc in procs:
        proc.wait(max(0.1, deadline - time.monotonic()))
        assert proc.returncode == 0, f"client exited with {proc.returncode}"


def wait_lines(path: str, count: int) -> None:
    """Until the client's output file has ``count`` lines (a produce loop well under way)."""
    wait_for(lambda: len(read_json_lines(path)) >= count, ignore=FileNotFoundError,
             what=f"{count} lines in {path}")  # fmt: skip


def stored_bodies(store: str, topic: str) -> collections.Counter:
    records, _ = walk_commitlog(os.path.join(store, "commitlog"))
    return collections.Counter(r["body"].decode() for r in records if r["topic"] == topic)


def test_producers_and_consumers_exactly_once_in_order(tmp_path):
    before = shm_entries()
    with cluster(tmp_path) as c:
        c.create_topic("E2E", 4)
        producers = [
            c.client(
                "produce",
                "--tag",
                f"p{i}",
                "--count",
                "300",
                "--out",
                str(tmp_path / f"p{i}.jsonl"),
                log=f"p{i}.log",
            )
            for i in range(3)
        ]
        stop_file = str(tmp_path / "stop")
        consumers = [
            c.client(
                "consume",
                "--queues",
                queues,
                "--stop-file",
                stop_file,
                "--out",
                str(tmp_path / f"c{k}.jsonl"),
                log=f"c{k}.log",
            )
            for k, queues in enumerate(("0,1", "2,3"))
        ]
        wait_all(producers)
        open(stop_file, "w").close()
        wait_all(consumers)
        acked = [row for i in range(3) for row in read_json_lines(str(tmp_path / f"p{i}.jsonl"))]
        got = [row for k in range(2) for row in read_json_lines(str(tmp_path / f"c{k}.jsonl"))]
        assert not [row for row in acked if "error" in row]
        assert {row["status"] for row in acked} == {"SEND_OK"}
        assert len(acked) == 900
        by_body = {row["body"]: (row["queue"], row["offset"]) for row in acked}
        assert len(by_body) == 900
        # every message exactly once, where its SendResult said, in queue order
        assert sorted(row["body"] for row in got) == sorted(by_body)
        assert {row["body"]: (row["queue"], row["offset"]) for row in got} == by_body
        per_queue = collections.defaultdict(list)
        for row in got:
            per_queue[row["queue"]].append(row["offset"])
        for offsets in per_queue.values():
            assert offsets == list(range(len(offsets)))
        assert c.stop_broker() == 0
        # the independent decoder agrees: every acked message stored once, queues consistent
        assert stored_bodies(c.store, "E2E") == collections.Counter(list(by_body))
        records, _ = walk_commitlog(os.path.join(c.store, "commitlog"))
        by_phys = {r["phys"]: r for r in records}
        for qid, offsets in per_queue.items():
            units = read_consume_queue(c.store, "E2E", qid)
            assert len(units) == len(offsets)
            for i, unit in enumerate(units):
                record = by_phys[unit.offset]
                assert (record["queue_id"], record["queue_offset"]) == (qid, i)
        assert not os.path.exists(os.path.join(c.store, "abort"))
    assert shm_entries() - before == set()


def test_sigterm_then_restart_keeps_messages_and_offsets(tmp_path):
    before = shm_entries()
    with cluster(tmp_path, defaultTopicQueueNums=2) as c:
        wait_all(
            [c.client("produce", "--count", "200", "--out", str(tmp_path / "p.jsonl"), log="p.log")]
        )
        wait_all(
            [
                c.client(
                    "consume", "--expect", "100", "--out", str(tmp_path / "c1.jsonl"), log="c1.log"
                )
            ]
        )
        first = read_json_lines(str(tmp_path / "c1.jsonl"))
        assert 100 <= len(first) < 200
        assert c.stop_broker() == 0  # SIGTERM: clean stop
        assert not os.path.exists(os.path.join(c.store, "abort"))
        assert os.path.exists(os.path.join(c.store, "config", "consumerOffset.json"))
        c.start_broker()
        stop_file = tmp_path / "stop"
        stop_file.touch()
        wait_all(
            [
                c.client(
                    "consume",
                    "--stop-file",
                    str(stop_file),
                    "--out",
                    str(tmp_path / "c2.jsonl"),
                    log="c2.log",
                )
            ]
        )
        second = read_json_lines(str(tmp_path / "c2.jsonl"))
        sent = sorted(row["body"] for row in read_json_lines(str(tmp_path / "p.jsonl")))
        assert sorted(row["body"] for row in first + second) == sent  # none lost, none twice
    assert shm_entries() - before == set()


@pytest.mark.slow
@pytest.mark.crash
def test_sigkill_of_the_writer_agent_during_produce(tmp_path):
    before = shm_entries()
    with cluster(tmp_path, defaultTopicQueueNums=2) as c:
        out = str(tmp_path / "p.jsonl")
        producer = c.client(
            "produce",
            "--count",
            "3000",
            "--pause",
            "0.0005",
            "--send-timeout",
            "5",
            "--out",
            out,
            log="p.log",
        )
        wait_lines(out, 500)
        writer = c.runtime_info()["agents"]["writer"]["pid"]
        os.kill(writer, signal.SIGKILL)
        producer.wait(180)  # no hang: every send ends with a result or an error
        assert producer.returncode == 0
        info = c.runtime_info()
        assert info["agents"]["writer"]["alive"]
        assert info["agents"]["writer"]["restarts"] >= 1
        assert info["agents"]["writer"]["pid"] != writer
        rows = read_json_lines(out)
        acked = [row["body"] for row in rows if "error" not in row]
        assert len(acked) >= 2900  # a few sends may fail over the restart, not more
        assert c.stop_broker() == 0
        stored = stored_bodies(c.store, "E2E")
        missing = [b for b in acked if b not in stored]
        assert missing == []
        assert max(stored.values()) == 1  # the journal keeps a restarted writer exactly-once
    assert shm_entries() - before == set()


@pytest.mark.slow
@pytest.mark.crash
@pytest.mark.parametrize(
    ("dispatcher", "flush"),
    [("reput", "ASYNC_FLUSH"), ("writer", "ASYNC_FLUSH"), ("flush", "SYNC_FLUSH")],
)
def test_sigkill_of_the_dispatching_agent_loses_and_repeats_nothing(tmp_path, dispatcher, flush):
    """Whichever agent builds the consume queues and wakes the consumers (reput, or with
    dispatchInline the writer, or in SYNC_FLUSH the flush agent), SIGKILLed twice while a
    consumer follows the sends: every sent message is consumed, each queue's offsets have
    no gap and no repeat."""
    before = shm_entries()
    conf = {"dispatchInline": str(dispatcher != "reput").lower(), "flushDiskType": flush}
    with cluster(tmp_path, defaultTopicQueueNums=2, **conf) as c:
        out = str(tmp_path / "p.jsonl")
        producer = c.client("produce", "--count", "2000", "--pause", "0.0005", "--out", out,
                            log="p.log")  # fmt: skip
        wait_lines(out, 300)  # the topic exists: a consumer follows the sends
        stop_file = tmp_path / "stop"
        consumer = c.client("consume", "--stop-file", str(stop_file), "--out",
                            str(tmp_path / "c.jsonl"), log="c.log")  # fmt: skip
        for lines in (400, 900):
            wait_lines(out, lines)
            os.kill(c.runtime_info()["agents"][dispatcher]["pid"], signal.SIGKILL)
        producer.wait(180)
        assert producer.returncode == 0
        stop_file.touch()
        wait_all([consumer])
        assert c.runtime_info()["agents"][dispatcher]["restarts"] >= 1
        assert ("reput" in c.runtime_info()["agents"]) == (dispatcher == "reput")
        sent = [row for row in read_json_lines(out) if "error" not in row]
        got = read_json_lines(str(tmp_path / "c.jsonl"))
        assert sorted(row["body"] for row in got) == sorted(row["body"] for row in sent)
        per_queue = collections.defaultdict(list)
        for row in got:
            per_queue[row["queue"]].append(row["offset"])
        for offsets in per_queue.values():
            assert offsets == list(range(len(offsets)))
    assert shm_entries() - before == set()
