"""shmq beside what a Python user would otherwise pick, same machine, same run, same workload.

    python -m bench --quick                      # CI: a tenth of every count, a few minutes
    python -m bench                              # full counts, about ten minutes
    python -m bench --workloads W1,W3 --systems shmq,pyzmq-ipc --out /tmp/results

Workloads (``bench.workloads``): W1 1,000,000 × 100 B one producer → one consumer; W2
100,000 × 1 KiB; W3 latency at a paced 10,000 msg/s (p50/p99/p99.9 µs from the intended
send time); W4 four producers → one consumer; W5 SYNC_FLUSH with eight producers (msgs/s
and messages per fsync; durable systems only). Beside them (``bench.extras``): the bare
semaphore round trip (W3's floor for a sync send) and C1, a PushConsumer's no-op listener
on a backlog. The report prints issue 12's goals, like against like, met or not.
Systems (``bench.peers``): shmq (single-message and bulk APIs), multiprocessing.Queue,
faster-fifo, pyzmq PUSH/PULL over ipc://, Redis Streams and RabbitMQ (servers started by the
bench). A system that cannot run here is
reported as skipped with the reason. A system too slow for a workload's full count in the
time budget sends fewer messages (``Peer.cap``); the row says how many.

Writes ``<out>/<date>.json`` (``<date>-quick.json`` for --quick, ignored by git): a list of
rows ``{"workload", "system", "api", "durable", "messages", "msgs_per_s", "mb_per_s",
"p50_us", "p99_us", "p999_us", "consumer_cpu_us", "library_cpu_us", "skipped",
"msgs_per_fsync"}`` (null where not measured; ``consumer_cpu_us``: the consumer process's CPU
per paced message, ``library_cpu_us`` that of its threads other than the harness's loop),
and a PNG chart per workload next to it.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from bench.harness import CaseFailed, run_case
from bench.peers import PEERS
from bench.peers.base import Endpoint, Peer, PeerUnavailable
from bench.report import print_table, write_charts, write_json
from bench.workloads import QUICK_DIVISOR, WORKLOADS, Api, Workload, make_case

RESULTS = Path(__file__).resolve().parent / "results"
CASE_TIMEOUT_S = {True: 90.0, False: 240.0}  # by --quick


def _slug(name: str) -> str:
    return name.lower().replace(" ", "-").replace(".", "-")


def row(
    workload: Workload, peer: Peer, api: str, *, skipped: str | None = None, **values: Any
) -> dict[str, Any]:
    """One result row in the JSON schema, null where not measured."""
    out: dict[str, Any] = {
        "workload": workload.name,
        "system": peer.system,
        "api": api,
        "durable": peer.durable,
        "messages": None,
        "msgs_per_s": None,
        "mb_per_s": None,
        "p50_us": None,
        "p99_us": None,
        "p999_us": None,
        "consumer_cpu_us": None,
        "library_cpu_us": None,
        "skipped": skipped,
        "msgs_per_fsync": None,
    }
    out.update(values)
    return out


def run_peer(peer: Peer, workloads: list[Workload], quick: bool) -> list[dict[str, Any]]:
    """Every workload for one system, each server started once and stopped at the end."""
    reason = peer.unavailable()
    if reason:
        return [row(w, peer, a.label, skipped=reason) for w in workloads for a in peer.apis_for(w)]
    rows = []
    with contextlib.ExitStack() as stack:
        servers: dict[str, Endpoint | str] = {}
        for w in workloads:
            apis = peer.apis_for(w) or (Api("-"),)
            why = peer.skip_reason(w, quick)
            if why:
                rows += [row(w, peer, a.label, skipped=why) for a in apis]
                continue
            key = peer.server_key(w.flavor)
            if key not in servers:
                _log(f"{peer.system}: starting ({w.flavor})")
                try:
                    servers[key] = stack.enter_context(peer.server(w.flavor))
                except PeerUnavailable as exc:
                    servers[key] = f"server did not start: {exc}"
            endpoint = servers[key]
            if isinstance(endpoint, str):
                rows += [row(w, peer, a.label, skipped=endpoint) for a in apis]
                continue
            for api in apis:
                cap = api.cap or peer.cap
                if cap is not None and quick:
                    cap = max(cap // QUICK_DIVISOR, 100)
                rows.append(run_one(peer, endpoint, w, api, cap, quick))
    return rows


def run_one(
    peer: Peer, endpoint: Endpoint, workload: Workload, api: Api, cap: int | None, quick: bool
) -> dict[str, Any]:
    case = make_case(workload, api, peer.system, cap)
    _log(f"{workload.name} {peer.system} {api.label}: {case.total:,} messages")
    try:
        case_endpoint = peer.prepare(endpoint, case)
    except Exception as exc:  # the peer's own client errors: report, go on with the next
        return row(workload, peer, api.label, skipped=f"failed to set up: {exc!r}")
    extra: dict[str, Any] = {}
    try:
        outcome = run_case(peer, case_endpoint, case, CASE_TIMEOUT_S[quick])
    except (CaseFailed, PeerUnavailable, TimeoutError, OSError) as exc:
        return row(workload, peer, api.label, skipped=f"failed: {exc}")
    finally:
        with contextlib.suppress(Exception):
            extra = peer.finish(endpoint, case_endpoint, case)
    rate = outcome.messages / outcome.seconds
    result = row(
        workload,
        peer,
        api.label,
        messages=outcome.messages,
        msgs_per_s=rate,
        mb_per_s=rate * workload.body_size / 1e6,
        p50_us=outcome.p50_us,
        p99_us=outcome.p99_us,
        p999_us=outcome.p999_us,
        consumer_cpu_us=outcome.consumer_cpu_us,
        library_cpu_us=outcome.library_cpu_us,
        **extra,
    )
    _log(
        f"  {rate:,.0f} msg/s in {outcome.seconds:.2f} s"
        f" (producers {outcome.producer_seconds:.2f} s)"
        + (f", p99 {outcome.p99_us:,.0f} µs" if outcome.p99_us else "")
    )
    return result


def run_extras(names: list[str], systems: list[str], quick: bool) -> list[dict[str, Any]]:
    """The measurements some goals compare with (``bench.extras``): the semaphore round
    trip and the sync send's call time beside W3, the PushConsumer on a backlog beside W1."""
    from bench import extras

    rows = []
    if "W3" in names:
        count = 2_000 if quick else 20_000
        _log("W3 floor: semaphore round trips between two processes, paced at 10,000/s")
        rows.append(extras.semaphore_round_trip(count, 10_000.0))
        if "shmq" in systems:
            _log("W3 shmq: sync sends timed from call to answer, paced at 10,000/s")
            rows.append(extras.sync_send_round_trip(count, 10_000.0))
    if "W1" in names and "shmq" in systems:
        # a whole CommitLog file in quick mode too: this VM hands out pages it freed a moment
        # ago in ~0.5 µs and never-used ones in ~5 µs, and 256 MiB fit in the recycled ones
        _log("W1 floor: 1,024 MiB written into new pages of a mapped file")
        rows.append(extras.new_page_writes(1024))
        _log(f"  {rows[-1]['mb_per_s']:,.0f} MB/s")
        count = 100_000 if quick else 500_000
        _log(f"C1 shmq: a PushConsumer's no-op listener on a backlog of {count:,} messages")
        rows.append(extras.push_consumer_backlog(count))
        _log(f"  {rows[-1]['msgs_per_s'] or 0:,.0f} msg/s")
    return rows


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _pick(arg: str | None, known: dict[str, Any], what: str) -> list[str]:
    if not arg:
        return list(known)
    by_slug = {_slug(k): k for k in known}
    names = []
    for item in arg.split(","):
        name = by_slug.get(_slug(item.strip()))
        if name is None:
            raise SystemExit(f"unknown {what} {item!r}; known: {', '.join(map(_slug, known))}")
        names.append(name)
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of every count (CI)")
    parser.add_argument("--workloads", help="comma-separated, e.g. W1,W3 (default: all)")
    parser.add_argument("--systems", help="comma-separated, e.g. shmq,pyzmq-ipc (default: all)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    args = parser.parse_args(argv)
    names = _pick(args.workloads, WORKLOADS, "workload")
    workloads = [WORKLOADS[w].scaled(args.quick) for w in names]
    systems = _pick(args.systems, PEERS, "system")
    # SIGTERM (a CI timeout, kill) unwinds like Ctrl-C, so servers and processes are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.monotonic()
    rows: list[dict[str, Any]] = []
    try:
        for system in systems:
            rows += run_peer(PEERS[system], workloads, args.quick)
        rows += run_extras(names, systems, args.quick)
    except (KeyboardInterrupt, SystemExit):
        _log("interrupted: every process, server and temporary file of the bench is gone")
        raise
    elapsed = time.monotonic() - started
    stem = datetime.date.today().isoformat() + ("-quick" if args.quick else "")
    args.out.mkdir(parents=True, exist_ok=True)
    path = write_json(rows, args.out / f"{stem}.json")
    charts = write_charts(rows, workloads, args.out, stem)
    load = os.getloadavg()
    print_table(rows, workloads, f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, "
                f"{os.cpu_count()} CPUs, run took {elapsed:.0f} s")  # fmt: skip
    print(f"results: {path}; charts: {', '.join(str(c) for c in charts)}")
    return 0
