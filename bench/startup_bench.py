"""How long `shmq start` takes: at a host's first start (kernels compiled) and warm.

    python bench/startup_bench.py --quick       # one cold and two warm starts (CI)
    python bench/startup_bench.py               # three warm starts, the median
    python bench/startup_bench.py --json out.json

Each run is `shmq start --daemon --demo` on free ports with a store of its own, timed from
the command's start to its return (the broker answering, its agents started), then `shmq
stop`. The cold run gets an empty kernel cache (``SHMQ_CACHE_DIR``), as after an install
or upgrade; the warm runs reuse it. Beside them, the floor: a Python process that imports
numpy and numba and exits (every broker process pays at least that).

Goals (issue 49): a warm start ≤ 3 s, a first start ≤ 60 s on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from rich.console import Console

GOAL_WARM_S = 3.0
GOAL_COLD_S = 60.0
SHMQ = [sys.executable, "-m", "shmq_cli.main"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(cache: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["SHMQ_CACHE_DIR"] = cache
    return env


def timed_start(cache: str) -> float:
    """Seconds `shmq start --daemon --demo` takes with kernel cache ``cache``."""
    store = tempfile.mkdtemp(prefix="shmq-startup-bench-")
    env = _env(cache)
    try:
        ports = ["--namesrv-port", str(_free_port()), "--broker-port", str(_free_port())]
        started = time.perf_counter()
        run = subprocess.run([*SHMQ, "start", "--daemon", "--demo", "--store", store, *ports],
                             env=env, capture_output=True, text=True)  # fmt: skip
        took = time.perf_counter() - started
        if run.returncode != 0:
            raise SystemExit(f"shmq start failed: {run.stderr.strip()}")
        return took
    finally:
        subprocess.run([*SHMQ, "stop", "--store", store], env=env, capture_output=True)
        shutil.rmtree(store, ignore_errors=True)


def floor_s() -> float:
    """A process that imports numpy and numba and exits."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import numpy, numba"], check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one cold and two warm starts")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    console = Console()
    cache = tempfile.mkdtemp(prefix="shmq-startup-cache-")
    try:
        cold = timed_start(cache)
        warm = [timed_start(cache) for _ in range(2 if args.quick else 3)]
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    floor = min(floor_s() for _ in range(3))
    warm_s = statistics.median(warm)
    load = os.getloadavg()[0]
    console.print(f"startup ({os.cpu_count()} CPUs, load {load:.1f})")
    console.print(f"  first start (kernels compiled): {cold:6.1f} s")
    console.print(f"  warm start (median of {len(warm)}):   {warm_s:6.1f} s "
                  f"= {warm_s / floor:.1f}x a numpy+numba import ({floor:.2f} s)")  # fmt: skip
    for name, got, goal in (("warm start", warm_s, GOAL_WARM_S),
                            ("first start", cold, GOAL_COLD_S)):  # fmt: skip
        console.print(f"goal {name} <= {goal:g} s: {got:.1f} s "
                      f"{'MET' if got <= goal else 'NOT MET'}")  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cold_s": cold, "warm_s": warm, "floor_s": floor, "load": load}, f)


if __name__ == "__main__":
    main()
