"""The bench's outputs: the printed table with shmq ÷ peer ratios and the goals of issue 6,
the JSON rows, and one PNG chart per workload (matplotlib, Agg backend: no display)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.workloads import Workload

SHMQ = "shmq"
# issue 6's goals on W1: shmq msgs/s ≥ factor × the peer's (best API each)
W1_GOALS = {
    "multiprocessing.Queue": 5.0,
    "faster-fifo": 2.0,
    "pyzmq ipc": 1.5,
    "Redis Streams": 10.0,
}


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
    """shmq's single-message row (the first that is not the bulk path) and bulk row."""
    mine = _measured(rows, workload=workload, system=SHMQ)
    single = next((r for r in mine if r["api"] != "send_bulk"), None)
    bulk = next((r for r in mine if r["api"] == "send_bulk"), None)
    return single, bulk


def ratio(shmq: dict | None, peer: dict, latency: bool) -> float | None:
    """shmq ÷ peer: msgs/s for throughput (> 1: shmq faster), p99 for latency (< 1: shmq's
    tail is shorter)."""
    if shmq is None or peer["skipped"] is not None:
        return None
    key = "p99_us" if latency else "msgs_per_s"
    if not shmq.get(key) or not peer.get(key):
        return None
    return shmq[key] / peer[key]


def _fmt(value: float | None, spec: str = ",.0f") -> str:
    return "" if value is None else format(value, spec)


def print_table(rows: list[dict[str, Any]], workloads: list[Workload], caption: str) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=200)
    for w in workloads:
        single, bulk = _shmq_rows(rows, w.name)
        table = Table(title=f"{w.name}: {w.title}", caption=caption, title_justify="left")
        for col in ("system", "api", "durable", "messages", "msgs/s", "MB/s", "p50 µs",
                    "p99 µs", "p99.9 µs", "msgs/fsync", "shmq single ÷", "shmq bulk ÷",
                    "skipped"):  # fmt: skip
            table.add_column(col, overflow="fold", max_width=60 if col == "skipped" else None)
        for r in (r for r in rows if r["workload"] == w.name):
            peer = r["system"] != SHMQ
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
                _fmt(r["msgs_per_fsync"], ",.1f"),
                _fmt(ratio(single, r, w.latency) if peer else None, ".2f"),
                _fmt(ratio(bulk, r, w.latency) if peer else None, ".2f"),
                r["skipped"] or "",
            )
        console.print(table)
    for line in goals(rows):
        console.print(line)


def goals(rows: list[dict[str, Any]]) -> list[str]:
    """Issue 6's goals, each met or not, from the best row of each side."""
    out = []
    mine = _measured(rows, workload="W1", system=SHMQ)
    if mine:
        best = max(mine, key=lambda r: r["msgs_per_s"])
        for system, factor in W1_GOALS.items():
            theirs = _measured(rows, workload="W1", system=system)
            if not theirs:
                out.append(f"W1 goal shmq ≥ {factor}× {system}: not measured (skipped)")
                continue
            for peer in theirs:  # against each of the peer's APIs (one message, batched)
                got = best["msgs_per_s"] / peer["msgs_per_s"]
                out.append(
                    f"W1 goal shmq ≥ {factor}× {system}: {got:.2f}× "
                    f"(shmq {best['api']} vs {peer['api']}) "
                    f"{'MET' if got >= factor else 'NOT MET'}"
                )
    lat = [r for r in _measured(rows, workload="W3") if r["p99_us"]]
    mine = [r for r in lat if r["system"] == SHMQ]
    peers = [r for r in lat if r["system"] != SHMQ]
    if mine and peers:
        for r in mine:
            worse = [p["system"] for p in peers if p["p99_us"] < r["p99_us"]]
            out.append(
                f"W3 goal shmq p99 ≤ every peer's: shmq {r['api']} p99 {r['p99_us']:,.0f} µs "
                + ("MET" if not worse else f"NOT MET (lower: {', '.join(worse)})")
            )
    return out


def write_charts(rows: list[dict[str, Any]], workloads: list[Workload], out: Path, stem: str):
    """One PNG per workload: msgs/s bars (log scale) or p50/p99/p99.9 bars for latency;
    skipped rows are named on the chart with nothing drawn."""
    try:
        import matplotlib
    except ImportError:
        print("charts skipped: matplotlib is not installed (pip install -e '.[bench]')")
        return []
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for w in workloads:
        mine = [r for r in rows if r["workload"] == w.name]
        if not mine:
            continue
        labels = [f"{r['system']} · {r['api']}" for r in mine]
        fig, ax = plt.subplots(figsize=(10, 0.45 * len(mine) + 1.8))
        ys = range(len(mine))
        if w.latency:
            for k, (key, name) in enumerate(
                (("p50_us", "p50"), ("p99_us", "p99"), ("p999_us", "p99.9"))
            ):
                ax.barh([y + (k - 1) * 0.27 for y in ys], [r[key] or 0 for r in mine],
                        height=0.27, label=name)  # fmt: skip
            ax.set_xlabel("latency from intended send time, µs (log)")
            ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
        else:
            colors = ["tab:orange" if r["system"] == SHMQ else "tab:blue" for r in mine]
            ax.barh(list(ys), [r["msgs_per_s"] or 0 for r in mine], color=colors)
            ax.set_xlabel("messages per second (log)")
        for y, r in zip(ys, mine, strict=True):
            if r["skipped"]:
                ax.text(0.01, y, "skipped", va="center", fontsize=8, color="gray",
                        transform=ax.get_yaxis_transform())  # fmt: skip
        ax.set_xscale("log")
        ax.set_yticks(list(ys), labels)
        ax.invert_yaxis()
        ax.set_title(f"{w.name}: {w.title}", fontsize=10)
        fig.tight_layout()
        path = out / f"{stem}-{w.name}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths
