"""What a Prometheus scrape every second costs W1 (100-byte messages, one producer process →
broker → one push consumer process), as a ratio against the same run without scraping.

    python bench/metrics_bench.py --quick     # CI: about a minute
    python bench/metrics_bench.py
    python bench/metrics_bench.py --json out.json

One embedded broker (ASYNC_FLUSH, ``metricsExporterType=PROM``) serves every run, so the
endpoint's process exists in both; in the scraped runs a thread of this process GETs
``/metrics`` at once and then every second, as Prometheus would. Each API runs ``ROUNDS``
times without and with scraping, alternated; the best of each is compared (the host is
shared: the best run is the one least disturbed by others). The APIs are client_bench's:
``send_async`` (one message per call) and ``bulk`` (``send_bulk``), msgs/s from the first
send to the last message consumed. Goal (issue 54): the ratio within noise of 1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from client_bench import TOPIC, run
from embedded import embedded_broker
from rich.console import Console
from rich.table import Table

from bench.number_text import num

ROUNDS = 2
SCRAPE_EVERY_S = 1.0
COUNTS = {"send_async": 1_000_000, "bulk": 4_000_000}  # W1's count; bulk: long enough to scrape
QUICK_COUNTS = {"send_async": 150_000, "bulk": 2_000_000}


class Scraper:
    """GETs ``url`` at once and then every ``SCRAPE_EVERY_S`` until stopped; the time each
    scrape took."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.took: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scraper")

    def __enter__(self) -> Scraper:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            started = time.perf_counter()
            with urllib.request.urlopen(self.url, timeout=10) as answer:
                answer.read()
            self.took.append(time.perf_counter() - started)
            if self._stop.wait(SCRAPE_EVERY_S):
                return


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(namesrv: str, url: str, api: str, count: int) -> dict:
    """The best msgs/s of ``ROUNDS`` runs without and with scraping, alternated."""
    best = {"off": 0.0, "on": 0.0}
    scrapes: list[float] = []
    for _ in range(ROUNDS):
        for mode in ("off", "on"):
            print(f"running {api} ({count:,} messages), scrape {mode}...", file=sys.stderr,
                  flush=True)  # fmt: skip
            if mode == "on":
                with Scraper(url) as scraper:
                    row = run(namesrv, api, count)
                scrapes += scraper.took
            else:
                row = run(namesrv, api, count)
            best[mode] = max(best[mode], row["msgs_per_s"])
    scrapes.sort()
    return {
        "api": api,
        "messages": count,
        "off_msgs_per_s": best["off"],
        "on_msgs_per_s": best["on"],
        "ratio": best["on"] / best["off"],
        "scrapes": len(scrapes),
        "scrape_p50_ms": scrapes[len(scrapes) // 2] * 1000,
        "scrape_max_ms": scrapes[-1] * 1000,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run for CI")
    parser.add_argument("--json", dest="json_path", help="write the results here")
    args = parser.parse_args(argv)
    port = free_port()
    conf = {"metrics_exporter_type": "PROM", "metrics_prom_exporter_port": port,
            "mapped_file_size_commit_log": 1 << 30}  # fmt: skip
    rows = []
    with embedded_broker(f"{TOPIC}-warm-up", **conf) as namesrv:
        url = f"http://127.0.0.1:{port}/metrics"
        for api, count in (QUICK_COUNTS if args.quick else COUNTS).items():
            rows.append(measure(namesrv, url, api, count))
    report(rows, args.json_path)
    return 0


def report(rows: list[dict], json_path: str | None) -> None:
    table = Table(title=f"W1 with a scrape every {SCRAPE_EVERY_S:g} s ({platform.node()}, "
                        f"{os.cpu_count()} CPUs)")  # fmt: skip
    for column in ("API", "messages", "no scrape msg/s", "scraped msg/s", "ratio",
                   "scrapes", "scrape p50 / max"):  # fmt: skip
        table.add_column(column, justify="left" if column == "API" else "right")
    for r in rows:
        table.add_row(r["api"], num(r["messages"]), num(r["off_msgs_per_s"]),
                      num(r["on_msgs_per_s"]), f"{r['ratio']:.3f}", str(r["scrapes"]),
                      f"{r['scrape_p50_ms']:.1f} / {r['scrape_max_ms']:.1f} ms")  # fmt: skip
    Console().print(table)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
