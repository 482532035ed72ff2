"""``ipc.procs``: a process's CPU seconds to the nanosecond, not in 10 ms clock ticks (an
agent that parks most of the time uses a few ms a second)."""

from __future__ import annotations

import subprocess
import sys

from shmq.ipc.procs import cpu_seconds

BURN = """
import sys, time
for line in sys.stdin:
    start = time.process_time()
    while time.process_time() - start < 0.003:
        pass
    print("burnt", flush=True)
"""


def test_cpu_seconds_counts_a_few_ms_of_another_process():
    child = subprocess.Popen([sys.executable, "-c", BURN], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline() == "burnt\n"  # started: its start-up CPU is behind
        before = cpu_seconds(child.pid)
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline() == "burnt\n"
        used = cpu_seconds(child.pid) - before
        assert 0.003 <= used < 0.009  # clock ticks would say 0 or 0.01
    finally:
        child.kill()
        child.wait()
    assert cpu_seconds(child.pid) is None  # reaped: it does not run
