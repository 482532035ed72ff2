"""The bench's outputs: the printed table with shmq ÷ peer ratios and the goals of issue 12,
the JSON rows, and one PNG chart per workload (matplotlib, Agg backend: no display)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.extras import PAGES_API, PAGES_SYSTEM, SEM_SYSTEM
from bench.number_text import num
from bench.workloads import Workload

SHMQ = "shmq"
FLOORS = (PAGES_SYSTEM, SEM_SYSTEM)  # what the hardware allows: compared in goals, not ratios
SINGLE_APIS = ("send_async", "send_oneway")  # shmq's one-message-per-call APIs without a wait
IN_MEMORY = ("multiprocessing.Queue", "faster-fifo", "pyzmq ipc")  # W3's latency references
BULK_GOAL = 5_000_000  # W1 send_bulk, msg/s
BULK_FLOOR_SHARE = 0.6  # W1 send_bulk against the page floor of the same run (issue 56)
W3_P50_FACTOR = 2.0  # W3 p50 against the best in-memory peer's (issue 56; 1.5 in issue 12)
CONSUMER_CPU_GOAL_US = 15.0  # the consumer's CPU per paced W3 message (issue 56)
C1_GOAL = 300_000  # msgs/s of a PushConsumer's no-op listener on a backlog


def write_json(rows: list[dict[str, Any]], path: Path) -> Path:
    path.write_text(json.dumps(rows, indent=1) + "\n")
    return path


def _measured(rows: list[dict[str, Any]], **match: Any) -> list[dict[str, Any]]:
    return [
        r
        for r in rows
        if r["skipped"] is None and r["msgs_per_s"] and all(r[k] == v for k, v in match.items())
    ]


def _shmq_rows(rows: list[dict[str, Any]], workload: str) -> tuple[dict | None, dict | None]:
    """shmq's best single-message row (``send_async`` / ``send_oneway``: most msgs/s, or
    for latency the lowest p99) and its bulk row."""
    mine = _measured(rows, workload=workload, system=SHMQ)
    singles = [r for r in mine if r["api"] in SINGLE_APIS]
    single = None
    if singles:
        latency = all(r["p99_us"] for r in singles)
        single = (min(singles, key=lambda r: r["p99_us"]) if latency
                  else max(singles, key=lambda r: r["msgs_per_s"]))  # fmt: skip
    bulk = next((r for r in mine if r["api"] == "send_bulk"), None)
    return single, bulk


def ratio(shmq: dict | None, peer: dict, latency: bool) -> float | None:
    """shmq ÷ peer: msgs/s for throughput (> 1: shmq faster), p99 for latency (< 1: shmq's
    tail is shorter). None for shmq's own rows and the floors, which are no peers."""
    if shmq is None or peer["skipped"] is not None or peer["system"] in (SHMQ, *FLOORS):
        return None
    key = "p99_us" if latency else "msgs_per_s"
    if not shmq.get(key) or not peer.get(key):
        return None
    return shmq[key] / peer[key]


def _fmt(value: float | None, spec: str = ",.0f") -> str:
    return "" if value is None else format(value, spec)


def print_table(rows: list[dict[str, Any]], workloads: list[Workload], caption: str) -> None:
    """One table per workload run (and C1 when measured), then the goals of those. A ratio
    column names the shmq row it divides (the faster of send_async and send_oneway, or the
    one with the lower p99; send_bulk) and is filled for peers only, not for floors. "CPU
    µs/msg" is the consumer process's CPU per paced message (W3)."""
    from rich.console import Console
    from rich.table import Table

    console = Console(width=220, markup=False)  # skip reasons hold "pip install '.[bench]'"
    sections = [(w.name, w.title, w.latency) for w in workloads]
    if any(r["workload"] == "C1" for r in rows):
        sections.append(("C1", "a PushConsumer's no-op listener on a backlog, 100 B", False))
    for name, title, latency in sections:
        single, bulk = _shmq_rows(rows, name)
        per = " p99 ÷" if latency else " ÷"
        references = [(f"shmq {r['api']}{per}", r) for r in (single, bulk) if r is not None]
        table = Table(title=f"{name}: {title}", caption=caption, title_justify="left")
        for col in ("system", "api", "durable", "messages", "msgs/s", "MB/s", "p50 µs",
                    "p99 µs", "p99.9 µs", "CPU µs/msg", "msgs/fsync",
                    *(c for c, _ in references), "skipped"):  # fmt: skip
            table.add_column(col, overflow="fold", max_width=60 if col == "skipped" else None)
        for r in (r for r in rows if r["workload"] == name):
            table.add_row(
                r["system"],
                r["api"],
                "yes" if r["durable"] else "no",
                _fmt(r["messages"]),
                _fmt(r["msgs_per_s"]),
                _fmt(r["mb_per_s"], ",.1f"),
                _fmt(r["p50_us"]),
                _fmt(r["p99_us"]),
                _fmt(r["p999_us"]),
                _fmt(r.get("consumer_cpu_us"), ",.1f"),
                _fmt(r["msgs_per_fsync"], ",.1f"),
                *(_fmt(ratio(mine, r, latency), ".2f") for _, mine in references),
                r["skipped"] or "",
            )
        console.print(table)
    for line in goals(rows, {name for name, _, _ in sections}):
        console.print(line)


def _one(rows: list[dict[str, Any]], workload: str, system: str, api: str) -> dict | None:
    return next(iter(_measured(rows, workload=workload, system=system, api=api)), None)


def _verdict(met: bool) -> str:
    return "MET" if met else "NOT MET"


def goals(rows: list[dict[str, Any]], workloads: set[str]) -> list[str]:
    """Issue 12's goals of the ``workloads`` run (each line starts with its workload's
    name), like against like, each with its ratio and whether it is met (a goal of a
    workload run whose rows were not measured says so)."""
    out: list[str] = []

    def throughput(label: str, mine: dict | None, theirs: dict | None, factor: float) -> None:
        if mine is None or theirs is None:
            out.append(f"{label} ≥ {factor:g}×: not measured")
            return
        got = mine["msgs_per_s"] / theirs["msgs_per_s"]
        out.append(f"{label} ≥ {factor:g}×: {got:.2f}× ({mine['msgs_per_s']:,.0f} vs "
                   f"{theirs['msgs_per_s']:,.0f} msg/s) {_verdict(got >= factor)}")  # fmt: skip

    def rate(label: str, mine: dict | None, floor: float) -> None:
        if mine is None:
            out.append(f"{label} ≥ {floor:,.0f} msg/s: not measured")
            return
        got = mine["msgs_per_s"]
        out.append(f"{label} ≥ {floor:,.0f} msg/s: {got:,.0f} {_verdict(got >= floor)}")

    for api in SINGLE_APIS:
        mine = _one(rows, "W1", SHMQ, api)
        throughput(f"W1 shmq {api} vs faster-fifo put", mine,
                   _one(rows, "W1", "faster-fifo", "put"), 1.5)  # fmt: skip
        throughput(f"W1 shmq {api} vs multiprocessing.Queue put", mine,
                   _one(rows, "W1", "multiprocessing.Queue", "put"), 3.0)  # fmt: skip
    bulk = _one(rows, "W1", SHMQ, "send_bulk")
    rate("W1 shmq send_bulk", bulk, BULK_GOAL)
    pages = _one(rows, "W1", PAGES_SYSTEM, PAGES_API)
    if pages:
        mb = pages["mb_per_s"]
        goal_mb = BULK_GOAL * mb / pages["msgs_per_s"]  # MB/s of stored records at the goal
        out.append(f"W1 floor: the writer fills new, prefaulted CommitLog pages at {mb:,.0f} MB/s "
                   f"({4096 / mb:.1f} µs per 4 KiB page), at most "
                   f"{pages['msgs_per_s']:,.0f} stored 100-byte records/s (the goal's "
                   f"{BULK_GOAL / 1e6:g} M need {goal_mb:,.0f} MB/s)")  # fmt: skip
        if bulk:
            share = bulk["msgs_per_s"] / pages["msgs_per_s"]
            out.append(f"W1 shmq send_bulk ≥ {BULK_FLOOR_SHARE:g}× the page floor: {share:.2f}× "
                       f"({bulk['msgs_per_s']:,.0f} vs {pages['msgs_per_s']:,.0f} msg/s) "
                       f"{_verdict(share >= BULK_FLOOR_SHARE)}")  # fmt: skip
    throughput("W1 shmq send_bulk vs pyzmq ipc send", bulk, _one(rows, "W1", "pyzmq ipc", "send"),
               3.0)  # fmt: skip
    lists = _one(rows, "W1", "multiprocessing.Queue", "put(list)")
    if bulk and lists:
        out.append(f"W1 shmq send_bulk vs multiprocessing.Queue put(list of 1,000) (no goal): "
                   f"{bulk['msgs_per_s'] / lists['msgs_per_s']:.2f}×")  # fmt: skip
    rate("W1 shmq send (sync, 1 producer)", _one(rows, "W1", SHMQ, "send"), 20_000)

    peers = [r for r in _measured(rows, workload="W3") if r["system"] in IN_MEMORY]
    sem = next((r for r in rows if r["workload"] == "W3" and r["system"] == SEM_SYSTEM), None)
    wake = sem.get("consumer_cpu_us") if sem else None
    floor = f"; a parked process's wake-up alone costs {wake:,.1f} µs here" if wake else ""
    if peers:
        best50 = min(peers, key=lambda r: r["p50_us"])
        best99 = min(peers, key=lambda r: r["p99_us"])
        for api in ("send_oneway", "send_async"):
            mine = _one(rows, "W3", SHMQ, api)
            if mine is None:
                out.append(f"W3 shmq {api} latency: not measured")
                continue
            r50 = mine["p50_us"] / best50["p50_us"]
            r99 = mine["p99_us"] / best99["p99_us"]
            out.append(f"W3 shmq {api} p50 ≤ {W3_P50_FACTOR:g}× best in-memory "
                       f"({best50['system']} {best50['p50_us']:,.0f} µs): {r50:.2f}× "
                       f"({mine['p50_us']:,.0f} µs) {_verdict(r50 <= W3_P50_FACTOR)}")  # fmt: skip
            out.append(f"W3 shmq {api} p99 ≤ 3× best in-memory ({best99['system']} "
                       f"{best99['p99_us']:,.0f} µs): {r99:.2f}× ({mine['p99_us']:,.0f} µs) "
                       f"{_verdict(r99 <= 3.0)}")  # fmt: skip
            cpu = mine.get("library_cpu_us")
            if cpu is not None:
                out.append(f"W3 shmq {api} consumer CPU per paced message (the PushConsumer's "
                           f"threads) ≤ {CONSUMER_CPU_GOAL_US:g} µs: {cpu:,.1f} µs (the whole "
                           f"process {mine['consumer_cpu_us']:,.1f} µs{floor}) "
                           f"{_verdict(cpu <= CONSUMER_CPU_GOAL_US)}")  # fmt: skip
    else:
        out.append("W3 latency goals: no in-memory peer measured")
    timed = [r for r in rows if r["workload"] == "W3" and r["skipped"] is None and r["p50_us"]]
    sync = next((r for r in timed if r["system"] == SHMQ and r["api"].startswith("send:")), None)
    if sync and sem and sem["p50_us"]:
        got = sync["p50_us"] / sem["p50_us"]
        out.append(f"W3 shmq send (sync, call to answer) p50 ≤ 3× the bare semaphore round "
                   f"trip ({sem['p50_us']:,.1f} µs): {got:.2f}× ({sync['p50_us']:,.1f} µs) "
                   f"{_verdict(got <= 3.0)}")  # fmt: skip
    else:
        out.append("W3 shmq send (sync) vs the semaphore round trip: not measured")

    fifo4 = _one(rows, "W4", "faster-fifo", "put")
    for api in SINGLE_APIS:
        throughput(f"W4 shmq {api} vs faster-fifo put", _one(rows, "W4", SHMQ, api), fifo4, 1.0)
    throughput("W4 shmq send_bulk vs pyzmq ipc send", _one(rows, "W4", SHMQ, "send_bulk"),
               _one(rows, "W4", "pyzmq ipc", "send"), 2.0)  # fmt: skip
    backlog = next((r for r in _measured(rows, workload="C1")), None)
    rate("C1 PushConsumer no-op listener on a backlog", backlog, C1_GOAL)
    return [line for line in out if line.split(" ", 1)[0] in workloads]


# bar colours of the throughput charts, and what the legend calls them
KINDS = {
    "shmq": ("tab:orange", "shmq"),
    "peer": ("tab:blue", "other systems"),
    "floor": ("tab:gray", "floor: what this machine allows"),
}
LATENCIES = (("p50_us", "p50"), ("p99_us", "p99"), ("p999_us", "p99.9"))


def _kind(system: str) -> str:
    return "shmq" if system == SHMQ else "floor" if system in FLOORS else "peer"


def write_charts(rows: list[dict[str, Any]], workloads: list[Workload], out: Path, stem: str):
    """One PNG per workload: msgs/s bars (log scale) coloured shmq / other systems / floor,
    or p50/p99/p99.9 bars for latency; each bar is labelled with its value and a legend
    says what the colours are. Skipped rows are named on the chart with nothing drawn."""
    try:
        import matplotlib
    except ImportError:
        print("charts skipped: matplotlib is not installed (pip install -e '.[bench]')")
        return []
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    paths = []
    for w in workloads:
        mine = [r for r in rows if r["workload"] == w.name]
        if not mine:
            continue
        labels = [f"{r['system']} · {r['api']}" for r in mine]
        fig, ax = plt.subplots(figsize=(10, 0.45 * len(mine) + 1.8))
        ys = range(len(mine))
        bars: list[tuple[float, float, float]] = []  # (y, value, font size) to label
        if w.latency:
            for k, (key, name) in enumerate(LATENCIES):
                at = [y + (k - 1) * 0.27 for y in ys]
                ax.barh(at, [r[key] or 0 for r in mine], height=0.27, label=name)
                bars += [(y, r[key], 7) for y, r in zip(at, mine, strict=True) if r[key]]
            ax.set_xlabel("latency from intended send time, µs (log)")
            ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
        else:
            kinds = [_kind(r["system"]) for r in mine]
            ax.barh(list(ys), [r["msgs_per_s"] or 0 for r in mine],
                    color=[KINDS[k][0] for k in kinds])  # fmt: skip
            bars += [(y, r["msgs_per_s"], 8) for y, r in zip(ys, mine, strict=True)
                     if r["msgs_per_s"]]  # fmt: skip
            ax.set_xlabel("messages per second (log)")
            handles = [Patch(color=color, label=name) for k, (color, name) in KINDS.items()
                       if k in kinds]  # fmt: skip
            ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        for y, value, size in bars:
            ax.text(value * 1.1, y, num(value), va="center", fontsize=size)
        for y, r in zip(ys, mine, strict=True):
            if r["skipped"]:
                ax.text(0.01, y, "skipped", va="center", fontsize=8, color="gray",
                        transform=ax.get_yaxis_transform())  # fmt: skip
        ax.set_xscale("log")
        if bars:  # room right of the longest bar for its label
            ax.set_xlim(right=max(v for _, v, _ in bars) * 8)
        ax.set_yticks(list(ys), labels)
        ax.invert_yaxis()
        ax.set_title(f"{w.name}: {w.title}", fontsize=10)
        fig.tight_layout()
        path = out / f"{stem}-{w.name}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths
