"""Timer messages: how late the schedule agent delivers them, and how fast.

    python bench/schedule_bench.py --quick      # about 20 s (CI)
    python bench/schedule_bench.py              # issue 14's run: 100,000 due over 10 s
    python bench/schedule_bench.py --json out.json

An embedded broker (ASYNC_FLUSH, timerPrecisionMs 1000). Two runs, each sending its timer
messages with ``send_async`` before the first is due:

  spread   N messages due evenly over a window (100,000 over 10 s; --quick 20,000 over 2 s):
           delivery lateness (store time of the delivered copy minus its TIMER_DELIVER_MS)
           p50 / p99 / max
  burst    N messages all due at the same millisecond: the schedule agent's deliveries per
           second (N over the time from the due moment to the last delivery's store time)

Goals (issue 14): p99 lateness ≤ 2 × timerPrecisionMs; ≥ 100,000 deliveries/s.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import time

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.number_text import num

PRECISION_MS = 1000
GOAL_P99_MS = 2 * PRECISION_MS
GOAL_RATE = 100_000
LEAD_S = 1.5  # the first message is due this long after sending starts (plus send time)


def send_timers(namesrv: str, topic: str, due: np.ndarray) -> None:
    import shmq

    with shmq.Producer("schedule-bench", namesrv) as producer:
        futures = [
            producer.send_async(shmq.Message(topic, b"x" * 100, deliver_time_ms=int(ms)))
            for ms in due.tolist()
        ]
        for future in futures:
            future.result(60)


def delivered(broker, topic: str, expect: int, timeout: float) -> tuple[np.ndarray, np.ndarray]:
    """``(due ms, store ms)`` of the delivered copies in ``topic`` (waits for ``expect``)."""
    from shmq.client.admin.admin import Admin
    from shmq.store.reader import StoreReader

    cfg = broker._broker.config.store
    reader = StoreReader(broker.store, cfg.mapped_file_size_commit_log, cfg.consume_queue_file_size)
    deadline = time.monotonic() + timeout
    try:
        with Admin(broker.namesrv) as admin:
            while True:
                queues = admin.topic_status(topic)
                if sum(q.max_offset for q in queues) >= expect or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
        due, stored = [], []
        for q in queues:
            offset = 0
            while offset < q.max_offset:
                msgs, offset = reader.read_queue(topic, q.queue_id, offset, q.max_offset, 4096)
                due += [int(m.properties["TIMER_DELIVER_MS"]) for m in msgs]
                stored += [m.store_timestamp for m in msgs]
                if not msgs:
                    break
    finally:
        reader.close()
    return np.array(due, dtype=np.int64), np.array(stored, dtype=np.int64)


def spread(broker, count: int, window_s: float) -> dict:
    topic = "TimerSpread"
    broker.create_topic(topic, 4)
    start = int(time.time() * 1000) + int((LEAD_S + count / 50_000) * 1000)
    due = start + (np.arange(count) * window_s * 1000 / count).astype(np.int64)
    send_timers(broker.namesrv, topic, due)
    got_due, stored = delivered(broker, topic, count, window_s + 30)
    late = stored - got_due
    return {
        "run": f"spread: {count:,} due over {window_s:g} s",
        "messages": int(late.size),
        "early": int((late < 0).sum()),
        "p50_ms": float(np.percentile(late, 50)) if late.size else None,
        "p99_ms": float(np.percentile(late, 99)) if late.size else None,
        "max_ms": int(late.max()) if late.size else None,
    }


def burst(broker, count: int) -> dict:
    topic = "TimerBurst"
    broker.create_topic(topic, 4)
    at = int(time.time() * 1000) + int((LEAD_S + count / 50_000) * 1000)
    send_timers(broker.namesrv, topic, np.full(count, at, dtype=np.int64))
    _, stored = delivered(broker, topic, count, 60)
    span_ms = max(int(stored.max()) - at, 1) if stored.size else None
    return {
        "run": f"burst: {count:,} due at once",
        "messages": int(stored.size),
        "deliveries_per_s": stored.size / (span_ms / 1000) if span_ms else None,
        "span_ms": span_ms,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run for CI (~20 s)")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    import shmq

    count, window = (20_000, 2.0) if args.quick else (100_000, 10.0)
    with shmq.EmbeddedBroker(log_level=logging.WARNING, timer_precision_ms=PRECISION_MS) as mq:
        results = [spread(mq, count, window), burst(mq, count)]
    console = Console()
    table = Table("run", "messages", "early", "p50 ms", "p99 ms", "max ms", "deliveries/s",
                  title=f"timer messages ({platform.node()}, {os.cpu_count()} CPUs)")  # fmt: skip
    for r in results:
        table.add_row(
            r["run"], f"{r['messages']:,}", str(r.get("early", "")),
            num(r.get("p50_ms")), num(r.get("p99_ms")), num(r.get("max_ms")),
            num(r.get("deliveries_per_s")),
        )  # fmt: skip
    console.print(table)
    p99, rate = results[0]["p99_ms"], results[1]["deliveries_per_s"]
    goals = [
        ("S1 timer lateness p99 ≤ 2 × timerPrecisionMs", f"{num(p99)} ms vs {GOAL_P99_MS} ms",
         p99 is not None and p99 <= GOAL_P99_MS and results[0]["early"] == 0),
        ("S2 schedule agent deliveries ≥ 100,000/s", f"{num(rate)}/s",
         rate is not None and rate >= GOAL_RATE),
    ]  # fmt: skip
    for name, value, met in goals:
        console.print(f"{name}: {value} {'MET' if met else 'NOT MET'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "goals": [g[0] for g in goals if g[2]]}, f, indent=2)
    complete = results[0]["messages"] == count and results[1]["messages"] == count
    if not complete:
        console.print("[red]not every timer message was delivered[/red]")
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
