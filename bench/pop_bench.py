"""POP consumption (``shmq.SimpleConsumer``) against push consumption, and the wake-up latency
of a long-polling receive.

    python bench/pop_bench.py --quick      # about 30 s (CI)
    python bench/pop_bench.py
    python bench/pop_bench.py --json out.json

An embedded broker (ASYNC_FLUSH), 100-byte messages, one topic of 8 queues:

  push      order_tx_bench's ``drain``: one producer sends M messages (200,000; --quick
            50,000), a ``PushConsumer`` with a listener that does nothing drains them
            (first message to last)
  pop       a ``SimpleConsumer`` of another group drains the same backlog on the broker's
            host (shmq's local pop: the broker answers with offsets, the client reads the
            store's files), ``receive_batch`` of up to 1,024 and one ``ack_batch`` each
  wake-up   a receiver long-polls ``receive`` (await 10 s) while a producer sends a message
            every 10 ms (500; --quick 200): send call to receive return, p50 / p99

Goal: POP receive + ack ≥ 0.5 × push consumption of the same backlog.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import threading
import time
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.number_text import num
from bench.order_tx_bench import BODY, _ratio, drain

GOAL_POP = 0.5
BACKLOG_TOPIC = "DrainConcurrent"  # drain's topic, left full for the POP group
PACE_S = 0.01


def pop_drain(mq, count: int) -> dict[str, Any]:
    """Time a ``SimpleConsumer`` receiving and acking the ``count`` messages of the
    backlog ``drain`` left."""
    import shmq

    consumer = shmq.SimpleConsumer("bench-pop", mq.namesrv, subscriptions={BACKLOG_TOPIC: "*"},
                                   await_duration=1, consume_from_where="FIRST_OFFSET")  # fmt: skip
    with consumer:
        consumer.start()
        got = first = 0
        deadline = time.monotonic() + 120
        while got < count and time.monotonic() < deadline:
            batch = consumer.receive_batch(1024)
            if len(batch):
                first = first or time.perf_counter()
                consumer.ack_batch(batch)
                got += len(batch)
        elapsed = time.perf_counter() - first
    if got < count:
        return {"run": "pop receive + ack", "skipped": f"{got} of {count} in 120 s"}
    return {"run": "pop receive + ack", "messages": got, "per_s": got / elapsed}


def wake_up(mq, count: int) -> dict[str, Any]:
    """Send-to-receive latency of a long-polling ``receive``, messages paced ``PACE_S``."""
    import numpy as np

    import shmq

    topic = "PopWake"
    mq.create_topic(topic, 8)
    sent: dict[bytes, float] = {}
    woke: dict[bytes, float] = {}
    with shmq.SimpleConsumer("bench-pop-wake", mq.namesrv, subscriptions={topic: "*"},
                             await_duration=10) as consumer:  # fmt: skip
        consumer.start()
        consumer.receive(1)  # the group's first pop: routes, store files, kernels

        def receive() -> None:
            while len(woke) < count:
                msgs = consumer.receive(32)
                now = time.perf_counter()
                for m in msgs:
                    woke[m.body] = now
                if msgs:
                    consumer.ack_batch(msgs)

        receiver = threading.Thread(target=receive, daemon=True)
        receiver.start()
        with shmq.Producer("bench-pop-wake-p", mq.namesrv) as producer:
            producer.send(shmq.Message(topic, b"warm-up"))
            time.sleep(0.2)
            woke.clear()
            for i in range(count):
                body = b"%d" % i + BODY[:90]
                sent[body] = time.perf_counter()
                producer.send(shmq.Message(topic, body))
                time.sleep(PACE_S)
        receiver.join(30)
    us = np.array([(woke[b] - sent[b]) * 1e6 for b in sent if b in woke])
    if us.size < count:
        return {"run": "wake-up", "skipped": f"{us.size} of {count} received"}
    return {"run": "wake-up", "messages": count, "p50_us": float(np.percentile(us, 50)),
            "p99_us": float(np.percentile(us, 99))}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run for CI (~30 s)")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    import shmq

    drained, paced = (50_000, 200) if args.quick else (200_000, 500)
    with shmq.EmbeddedBroker(log_level=logging.WARNING, mapped_file_size_commit_log=256 << 20,
                             ring_size=16 << 20) as mq:  # fmt: skip
        push = drain(mq, drained, False)
        results = [push, pop_drain(mq, drained), wake_up(mq, paced)]
    console = Console()
    table = Table("run", "messages", "per second", "p50 µs", "p99 µs", "note",
                  title=f"POP consumption ({platform.node()}, {os.cpu_count()} CPUs)")  # fmt: skip
    for r in results:
        table.add_row(r["run"], f"{r.get('messages', 0):,}", num(r.get("per_s")),
                      num(r.get("p50_us")), num(r.get("p99_us")), r.get("skipped", ""))  # fmt: skip
    console.print(table)
    goals = [_ratio("P1 POP receive + ack ≥ 0.5 × push consumption (same backlog)",
                    results[1].get("per_s"), results[0].get("per_s"), GOAL_POP)]  # fmt: skip
    for name, value, met in goals:
        console.print(f"{name}: {value} {met}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "goals": [g[0] for g in goals if g[2] == "MET"]}, f,
                      indent=2)  # fmt: skip
    complete = all("skipped" not in r for r in results)
    if not complete:
        console.print("[red]a run did not finish[/red]")
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
