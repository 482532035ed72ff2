"""``python -m bench --quick`` runs end to end on a tiny subset and writes rows of the
documented shape; a system that cannot run is a skipped row with its reason, never a number.
(Speeds are printed, never asserted: the machine is shared.)"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KEYS = {
    "workload", "system", "api", "durable", "messages", "msgs_per_s", "mb_per_s",
    "p50_us", "p99_us", "p999_us", "consumer_cpu_us", "library_cpu_us",
    "skipped", "msgs_per_fsync",
}  # fmt: skip


# ``python -m bench --quick``, shrunk: CI runs the real quick bench once, after the tests;
# this run checks what it writes, not how fast (a thousandth of each workload, at least
# 100 messages; W5 from 2 producers, not 8; the W1 extras' 1 GiB page floor and
# 100,000-message backlog made small)
TINY = """
import dataclasses, sys
import bench.extras, bench.workloads
bench.workloads.QUICK_DIVISOR = 1000
w5 = bench.workloads.WORKLOADS["W5"]
bench.workloads.WORKLOADS["W5"] = dataclasses.replace(w5, producers=2)
pages, backlog = bench.extras.new_page_writes, bench.extras.push_consumer_backlog
bench.extras.new_page_writes = lambda megabytes: pages(16)
bench.extras.push_consumer_backlog = lambda messages: backlog(2_000)
from bench.run import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_bench_quick_w1_writes_rows_and_charts(tmp_path: Path) -> None:
    argv = ["--quick", "--workloads", "W1,W5", "--systems", "shmq,multiprocessing.Queue"]
    with subprocess.Popen(
        [sys.executable, "-c", TINY, *argv, "--out", str(tmp_path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    ) as proc:
        stdout, stderr = proc.communicate(timeout=280)
    assert proc.returncode == 0, stdout + stderr
    # the embedded broker lives in the bench's process: its segments are named after it
    assert not [n for n in os.listdir("/dev/shm") if f"shmq-{proc.pid}-" in n]
    (path,) = tmp_path.glob("*-quick.json")
    rows = json.loads(path.read_text())
    assert all(set(r) == KEYS for r in rows), rows
    measured = [r for r in rows if r["skipped"] is None]
    assert {(r["workload"], r["system"]) for r in measured} >= {
        ("W1", "shmq"),
        ("W1", "multiprocessing.Queue"),
        ("W1", "page cache (floor)"),
        ("W5", "shmq"),
    }
    for r in measured:
        assert r["messages"] > 0 and r["msgs_per_s"] > 0 and r["mb_per_s"] > 0, r
    # multiprocessing.Queue keeps nothing on disk: W5 (SYNC_FLUSH) is skipped, with why
    skipped = [r for r in rows if r["workload"] == "W5" and r["system"] != "shmq"]
    assert skipped and all("durable" in r["skipped"] for r in skipped), skipped
    assert all(r["msgs_per_s"] is None for r in skipped)
    assert any(r["msgs_per_fsync"] for r in rows if r["workload"] == "W5"), rows
    if importlib.util.find_spec("matplotlib") is not None:
        charts = sorted(p.name.split("-quick-")[1] for p in tmp_path.glob("*.png"))
        assert charts == ["W1.png", "W5.png"]
    assert "shmq send_bulk ÷" in stdout
    assert "W1 floor: the writer fills new, prefaulted CommitLog pages at" in stdout
    # the title counts what --quick sends, and only the goals of W1 (and C1 beside it) print
    sent = max(r["messages"] for r in measured if (r["workload"], r["system"]) == ("W1", "shmq"))
    assert f"W1: {sent:,} × 100 B, 1 producer → 1 consumer" in stdout
    assert not re.search(r"^(W2|W3|W4) ", stdout, re.MULTILINE), stdout


def test_missing_peer_is_skipped_with_its_reason(monkeypatch) -> None:
    from bench.peers.redis_streams import RedisStreamsPeer
    from bench.run import run_peer
    from bench.workloads import WORKLOADS

    monkeypatch.setitem(sys.modules, "redis", types.ModuleType("redis"))  # the client is there
    monkeypatch.setattr("bench.peers.redis_streams.find_program", lambda *_: None)
    rows = run_peer(RedisStreamsPeer(), [WORKLOADS["W1"]], quick=True)
    assert rows and all("redis-server not found" in r["skipped"] for r in rows)
    assert all(r["msgs_per_s"] is None for r in rows)
    monkeypatch.setitem(sys.modules, "redis", None)  # the client is not installed
    rows = run_peer(RedisStreamsPeer(), [WORKLOADS["W1"]], quick=True)
    assert rows and all("redis client is not installed" in r["skipped"] for r in rows)


def _row(system: str, api: str, rate: float | None, skipped: str | None = None) -> dict:
    out = dict.fromkeys(KEYS)
    out.update(workload="W1", system=system, api=api, durable=False, skipped=skipped,
               messages=100_000 if rate else None, msgs_per_s=rate,
               mb_per_s=rate * 100 / 1e6 if rate else None)  # fmt: skip
    return out


def test_report_names_its_ratios_and_prints_reasons_verbatim(capsys) -> None:
    from bench.extras import PAGES_API, PAGES_SYSTEM
    from bench.report import goals, print_table, ratio
    from bench.workloads import WORKLOADS

    oneway = _row("shmq", "send_oneway", 200_000.0)
    bulk = _row("shmq", "send_bulk", 1_000_000.0)
    peer = _row("faster-fifo", "put", 100_000.0)
    floor = _row(PAGES_SYSTEM, PAGES_API, 2_000_000.0)
    missing = _row("pyzmq ipc", "send", None, skipped="not installed; pip install -e '.[bench]'")
    rows = [_row("shmq", "send_async", 100_000.0), oneway, bulk, peer, floor, missing]
    print_table(rows, [WORKLOADS["W1"].scaled(True)], "caption")
    out = capsys.readouterr().out
    assert "'.[bench]'" in out and "'.'" not in out  # not eaten as rich markup
    assert "W1: 100,000 × 100 B, 1 producer → 1 consumer" in out
    assert "shmq send_oneway ÷" in out and "shmq send_bulk ÷" in out  # the row divided
    assert ratio(oneway, peer, False) == 2.0 and ratio(bulk, peer, False) == 10.0
    assert ratio(oneway, floor, False) is None and ratio(oneway, oneway, False) is None
    lines = goals(rows, {"W1"})
    assert lines and all(line.startswith("W1 ") for line in lines), lines
    assert all(line.startswith("W3 ") for line in goals(rows, {"W3"}))
