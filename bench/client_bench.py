"""Client API throughput end to end: one producer process → broker → one push consumer.

    python bench/client_bench.py --quick     # CI: tens of seconds
    python bench/client_bench.py             # larger runs
    python bench/client_bench.py --json out.json

A namesrv and a broker (ASYNC_FLUSH, store on disk in a temporary directory, one queue)
serve one producer process and one ``PushConsumer`` process, 100-byte messages. Each row is
one producer API:
  send_async   one message per call, futures resolved by the producer's completion thread
  send_batch   ``BATCH`` messages per call (one ring write, all answers awaited)
  bulk         ``send_bulk`` of ``BULK`` bodies given as one numpy buffer plus offsets
msgs/s is counted from the producer's first send to the consumer listener's last message,
so it is the slower of the two ends. The consumer runs with ``pull_batch_size`` and
``consume_message_batch_max_size`` at 1024 (the listener counts, nothing more); for the
bulk row it is a ``bulk=True`` push consumer (a ``MessageBatch`` of up to 16,384 per call). Goal
(issue 4): bulk path ≥ 5,000,000 msg/s.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from embedded import embedded_broker, gather_results

from bench.report import BULK_GOAL  # issue 4's bulk goal is W1's (issue 12)

TOPIC = "BenchClient"
BODY = 100
BATCH = 64
BULK = 4096


def producer_main(namesrv: str, api: str, count: int, ready, go, out) -> None:
    from shmq.client.producer.producer import Producer
    from shmq.message import Message

    topic = f"{TOPIC}-{api}"
    body = b"x" * BODY
    with Producer("bench-client-producer", namesrv) as producer:
        producer.send(Message(topic, body))  # connect, create the topic, warm up
        ready.set()
        go.wait()
        start = time.perf_counter()
        if api == "send_async":
            futures = [producer.send_async(Message(topic, body)) for _ in range(count)]
            for f in futures:
                f.result(30)
        elif api == "send_batch":
            msgs = [Message(topic, body) for _ in range(BATCH)]
            for i in range(0, count, BATCH):
                producer.send_batch(msgs[: min(BATCH, count - i)])
        else:
            data = np.frombuffer(body * BULK, dtype=np.uint8)
            offsets = np.arange(BULK + 1, dtype=np.int64) * BODY
            for i in range(0, count, BULK):
                n = min(BULK, count - i)
                producer.send_bulk(topic, (data[: n * BODY], offsets[: n + 1]))
        out.put(("producer", (start, time.perf_counter())))


def consumer_main(namesrv: str, api: str, count: int, ready, out) -> None:
    import threading

    from shmq.client.consumer.push import PushConsumer
    from shmq.client.types import ConsumeResult

    lock = threading.Lock()
    state = {"n": 0, "last": 0.0}
    done = threading.Event()

    def listener(msgs, ctx):
        with lock:
            state["n"] += len(msgs)
            state["last"] = time.perf_counter()
            if state["n"] >= count:
                done.set()
        return ConsumeResult.CONSUME_SUCCESS

    count += 1  # the producer's warm-up message comes first
    bulk = api == "bulk"  # the consume side of send_bulk: one MessageBatch per pull
    consumer = PushConsumer(
        f"bench-{api}",
        namesrv,
        listener=listener,
        consume_from_where="LAST_OFFSET",
        bulk=bulk,
        pull_batch_size=16384 if bulk else 1024,
        consume_message_batch_max_size=1024,
        pull_threshold_for_queue=65535,
        consume_concurrently_max_span=65535,
    )
    consumer.subscribe(f"{TOPIC}-{api}")
    consumer.start()
    ready.set()
    done.wait(600)
    out.put(("consumer", (state["n"], state["last"])))
    consumer.shutdown()


def run(namesrv: str, api: str, count: int) -> dict:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    c_ready, p_ready, go = ctx.Event(), ctx.Event(), ctx.Event()
    producer = ctx.Process(target=producer_main, args=(namesrv, api, count, p_ready, go, out))
    producer.start()
    p_ready.wait(120)  # the warm-up message is stored before the consumer group exists
    consumer = ctx.Process(target=consumer_main, args=(namesrv, api, count, c_ready, out))
    consumer.start()
    c_ready.wait(120)
    time.sleep(0.5)
    go.set()
    results = gather_results(out, [producer, consumer], api)
    start, produced = results["producer"]
    received, last = results["consumer"]
    elapsed = max(last, produced) - start
    return {
        "api": api,
        "messages": count,
        "received": received - 1,
        "producer_msgs_per_s": count / (produced - start),
        "msgs_per_s": count / elapsed,
        "mb_per_s": count * BODY / elapsed / 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args()
    counts = (
        {"send_async": 50_000, "send_batch": 100_000, "bulk": 400_000}
        if args.quick
        else {"send_async": 300_000, "send_batch": 1_000_000, "bulk": 4_000_000}
    )
    rows = []
    with embedded_broker(f"{TOPIC}-warm-up", mapped_file_size_commit_log=1 << 30) as namesrv:
        for api, n in counts.items():
            print(f"running {api} ({n:,} messages)...", file=sys.stderr, flush=True)
            rows.append(run(namesrv, api, n))
    report(rows, args.json_path)


def report(rows: list[dict], json_path: str | None) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="shmq client APIs end to end: 1 producer → 1 push consumer, 100-byte "
                  "messages, ASYNC_FLUSH")  # fmt: skip
    for col in ("api", "messages", "producer msg/s", "end to end msg/s", "MB/s", "goal", "ratio"):
        table.add_column(col)
    for r in rows:
        bulk = r["api"] == "bulk"
        table.add_row(
            r["api"],
            f"{r['messages']:,}",
            f"{r['producer_msgs_per_s']:,.0f}",
            f"{r['msgs_per_s']:,.0f}",
            f"{r['mb_per_s']:.1f}",
            f"{BULK_GOAL:,} msg/s" if bulk else "",
            f"{r['msgs_per_s'] / BULK_GOAL:.2f}" if bulk else "",
        )
    Console().print(table)
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"machine": platform.node(), "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
