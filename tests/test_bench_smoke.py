"""The store benchmark runs end to end (times are printed, never asserted), shrunk: CI runs
the real ``bench/store_bench.py --quick`` once, after the tests; this run checks what it
prints and writes from 2,000 messages a size instead of 100,000 and 20,000."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TINY = """
import bench.store_bench as store_bench
measure = store_bench.measure
store_bench.measure = lambda size, count, file_size: measure(size, min(count, 2_000), file_size)
store_bench.main()
"""


def test_store_bench_quick_runs_and_prints_ratios(tmp_path) -> None:
    out_json = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-c", TINY, "--quick", "--json", str(out_json)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"\d+(\.\d+)?\s?%", proc.stdout), proc.stdout
    assert "copy" in proc.stdout
    assert json.loads(out_json.read_text())
