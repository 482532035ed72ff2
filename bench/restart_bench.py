"""How long the broker takes to serve again after a crash (issue 53, item 5).

    python bench/restart_bench.py --quick      # one crash of each kind (CI)
    python bench/restart_bench.py              # three of each, the median

A store of 4 MiB CommitLog files is filled (``shmq start --daemon``, 20 MB of 100-byte
messages; ``--quick`` 8 MB), then:

  group crash   the whole process group (supervisor, agents, proxy) is SIGKILLed; timed from
                ``shmq start --daemon`` on that store to the first SEND_OK of a producer that
                starts with it and retries until one send is acknowledged
  writer crash  the writer agent alone is SIGKILLed under a connected producer; timed from
                the kill to the next SEND_OK

The producer runs beside the command, as a client waiting for the broker would: ``shmq start
--daemon`` itself returns later, once the gRPC proxy serves too (shown as "start returned").
For the group crash the broker's log (``-v``) gives where the time went: the daemon's imports
(until the namesrv listens), the store recovered, the control server listening, the agent
template ready (it preloads the agents' code meanwhile), the agents running, the broker
registered with the namesrv, the broker started (shmq.log's timestamps, relative to the
command).

Goals: ≤ 2 s to the first SEND_OK after a group crash, ≤ 0.5 s after a writer crash.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

GOAL_GROUP_S = 2.0
GOAL_WRITER_S = 0.5
SHMQ = [sys.executable, "-m", "shmq_cli.main"]
TOPIC = "RestartBench"
FILE_SIZE = "4M"
# what shmq.log says when each phase of a start ends
PHASES = (
    ("namesrv listening", re.compile(r"namesrv server listening")),
    ("store recovered", re.compile(r"shmq\.store\.message_store: store .* recovered")),
    ("control listening", re.compile(r"broker-\S+ server listening")),
    ("agent template ready", re.compile(r"agent template ready")),
    ("agents running", re.compile(r"shmq\.broker\.supervisor: agents running")),
    ("registered", re.compile(r"shmq\.namesrv\.routes: new broker registered")),
    ("broker started", re.compile(r"shmq\.broker\.supervisor: broker \S+ started")),
)
STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(store: str, ports: list[str]) -> None:
    run = subprocess.run([*SHMQ, "-v", "start", "--daemon", "--store", store, "--mapped-file-size",
                          FILE_SIZE, *ports], capture_output=True, text=True)  # fmt: skip
    if run.returncode != 0:
        raise SystemExit(f"shmq start failed: {run.stderr.strip()}")


def _runtime(store: str) -> dict:
    with open(os.path.join(store, "shmq.json")) as f:
        return json.load(f)


def _fill(namesrv: str, megabytes: int) -> None:
    import shmq

    with shmq.Producer("restart-bench-fill", namesrv) as producer:
        bodies = [b"x" * 100] * 1000
        for _ in range(megabytes * 10):
            producer.send_bulk(TOPIC, bodies)


def _first_send_ok(namesrv: str, deadline: float) -> float:
    """The monotonic time of the first SEND_OK of a producer started now (it retries)."""
    import shmq

    while time.monotonic() < deadline:
        try:
            with shmq.Producer("restart-bench", namesrv, send_timeout=1.0) as producer:
                while time.monotonic() < deadline:
                    try:
                        producer.send(shmq.Message(TOPIC, b"after the crash"))
                        return time.monotonic()
                    except shmq.ShmqError:
                        time.sleep(0.01)
        except shmq.ShmqError:
            time.sleep(0.05)
    raise SystemExit("no SEND_OK within the deadline")


def _agents(namesrv_store: str) -> dict:
    run = subprocess.run([*SHMQ, "status", "--store", namesrv_store, "--json"],
                         capture_output=True, text=True, check=True)  # fmt: skip
    return {p["role"]: p["pid"] for p in json.loads(run.stdout)["processes"] if p.get("pid")}


def group_crash(store: str, ports: list[str], namesrv: str) -> tuple[float, dict[str, float]]:
    """Seconds to the first SEND_OK after the whole group was SIGKILLed, and the phases."""
    os.killpg(_runtime(store)["pid"], signal.SIGKILL)
    time.sleep(0.5)  # the agents die with their parent (PDEATHSIG)
    log = os.path.join(store, "shmq.log")
    log_from = os.path.getsize(log)
    returned: list[float] = []
    failed: list[BaseException] = []

    def start() -> None:
        try:
            _start(store, ports)
            returned.append(time.monotonic())
        except BaseException as exc:  # reported in the main thread
            failed.append(exc)

    started_wall = time.time()
    started = time.monotonic()
    command = threading.Thread(target=start)
    command.start()
    done = _first_send_ok(namesrv, started + 120)
    command.join()
    if failed:
        raise failed[0]
    phases = _phases(log, log_from, started_wall)
    phases["start returned"] = returned[0] - started
    return done - started, phases


def _phases(log: str, offset: int, started_wall: float) -> dict[str, float]:
    with open(log) as f:
        f.seek(offset)
        lines = f.read().splitlines()
    out: dict[str, float] = {}
    for name, pattern in PHASES:
        for line in lines:
            stamp = STAMP.match(line)
            if stamp and pattern.search(line):
                at = datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
                out[name] = at - started_wall
                break
    return out


def writer_crash(store: str, namesrv: str) -> float:
    """Seconds from a SIGKILL of the writer to the next SEND_OK of a connected producer."""
    import shmq

    with shmq.Producer("restart-bench-writer", namesrv, send_timeout=1.0) as producer:
        producer.send(shmq.Message(TOPIC, b"before"))
        writer = _agents(store)["writer"]
        killed = time.monotonic()
        os.kill(writer, signal.SIGKILL)
        deadline = killed + 60
        while time.monotonic() < deadline:
            try:
                producer.send(shmq.Message(TOPIC, b"after the writer's crash"))
                return time.monotonic() - killed
            except shmq.ShmqError:
                time.sleep(0.005)
    raise SystemExit("no SEND_OK within a minute of the writer's crash")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    rounds = 1 if args.quick else 3
    store = tempfile.mkdtemp(prefix="shmq-restart-bench-")
    namesrv_port = _free_port()
    ports = ["--namesrv-port", str(namesrv_port), "--broker-port", str(_free_port())]
    namesrv = f"127.0.0.1:{namesrv_port}"
    groups, writers, phases = [], [], []
    try:
        _start(store, ports)
        subprocess.run([*SHMQ, "admin", "update-topic", "-n", namesrv, "-t", TOPIC],
                       check=True, capture_output=True)  # fmt: skip
        _fill(namesrv, 8 if args.quick else 20)
        for _ in range(rounds):
            took, phase = group_crash(store, ports, namesrv)
            groups.append(took)
            phases.append(phase)
            writers.append(writer_crash(store, namesrv))
    finally:
        subprocess.run([*SHMQ, "stop", "--store", store], capture_output=True)
        shutil.rmtree(store, ignore_errors=True)
    group_s, writer_s = statistics.median(groups), statistics.median(writers)
    print(f"restart ({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, {rounds} round(s))")
    last = phases[-1]
    print("  group crash, phases from `shmq start`: "
          + ", ".join(f"{k} {v:.2f} s" for k, v in last.items()))  # fmt: skip
    for name, runs, got, goal in (
        ("group crash to first SEND_OK", groups, group_s, GOAL_GROUP_S),
        ("writer crash to next SEND_OK", writers, writer_s, GOAL_WRITER_S),
    ):
        spread = f" (min {min(runs):.2f}, max {max(runs):.2f})" if len(runs) > 1 else ""
        print(f"goal {name} <= {goal:g} s: {got:.2f} s{spread} "
              f"{'MET' if got <= goal else 'NOT MET'}")  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"group_s": groups, "writer_s": writers, "phases": phases}, f, indent=2)


if __name__ == "__main__":
    main()
