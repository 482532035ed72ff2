"""The store benchmark runs end to end in quick mode (times are printed, never asserted)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_store_bench_quick_runs_and_prints_ratios(tmp_path) -> None:
    out_json = tmp_path / "bench.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "store_bench.py"),
            "--quick",
            "--json",
            str(out_json),
        ],
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
