"""End-to-end throughput and latency: one producer process, one consumer process, a broker.

    python bench/e2e_bench.py --quick       # about 30 s (CI)
    python bench/e2e_bench.py               # larger runs
    python bench/e2e_bench.py --json out.json

A namesrv and a broker (writer, reput and flush agents in their own processes, ASYNC_FLUSH,
store in a temporary directory on disk) serve one producer process and one consumer process
with 100-byte messages:
  pipelined   the producer keeps many messages in flight (``send_bulk`` of 4,096 bodies);
              msgs/s and MB/s from the first send to the consumer's last receive
  sync        one ``send`` at a time, each waiting for the broker's answer
  latency     ``send_oneway`` paced at 10,000 msg/s; each body carries its intended send
              time, the consumer (long-polling) stamps arrival: p50/p99/p99.9 in µs,
              measured from the intended time (coordinated omission corrected); the same
              at 1,000 msg/s for context
and, in the same run, the floor: the one-way time of a bare posix_ipc semaphore ping-pong
between two processes. Goals (issue 3): pipelined ≥ 500,000 msg/s, sync ≥ 50,000 msg/s,
latency p50 ≤ 1.5× the bare semaphore one-way time.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import struct
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from embedded import embedded_broker, gather_results

TOPIC = "BenchE2E"
BODY = 100
STAMP = struct.Struct(">qq")  # intended send time (monotonic ns), sequence


def _body(seq: int, intended_ns: int = 0) -> bytes:
    return STAMP.pack(intended_ns, seq) + b"x" * (BODY - STAMP.size)


# -- client processes ---------------------------------------------------------------------


def producer_main(namesrv: str, mode: str, count: int, rate: float, ready, go, out) -> None:
    from shmq.client.producer.producer import Producer
    from shmq.message import Message

    with Producer("bench-producer", namesrv) as producer:
        producer.send(Message(TOPIC, _body(-1)))  # connect and warm up
        ready.set()
        go.wait()
        start = time.perf_counter()
        if mode == "pipelined":
            batch = 4096
            bodies = np.frombuffer(b"".join(_body(i) for i in range(batch)), dtype=np.uint8)
            offsets = np.arange(batch + 1, dtype=np.int64) * BODY
            for i in range(0, count, batch):
                n = min(batch, count - i)
                producer.send_bulk(TOPIC, (bodies[: n * BODY], offsets[: n + 1]))
        elif mode == "sync":
            for i in range(count):
                producer.send(Message(TOPIC, _body(i)))
        else:  # paced oneway sends for latency
            t0 = time.monotonic_ns() + 1_000_000
            interval = 1e9 / rate
            for i in range(count):
                intended = t0 + int(i * interval)
                gap = intended - time.monotonic_ns()
                if gap > 200_000:  # sleep through long gaps, spin only the last stretch
                    time.sleep((gap - 100_000) / 1e9)
                while time.monotonic_ns() < intended:
                    pass
                producer.send_oneway(Message(TOPIC, _body(i, intended)))
        out.put(("producer", time.perf_counter() - start))


def consumer_main(namesrv: str, count: int, ready, out) -> None:
    from shmq.client.transport.queue_reader import QueueReader

    with QueueReader("bench-consumer", namesrv) as consumer:
        queues = consumer.queues(TOPIC)
        offsets = {mq: consumer.max_offset(mq) for mq in queues}
        ready.set()
        latencies = np.zeros(count, dtype=np.int64)
        received = 0
        first = last = 0.0
        while received < count:
            got = 0
            for mq in queues:
                result = consumer.pull(mq, offsets[mq], 1024)
                offsets[mq] = result.next_begin_offset
                now = time.monotonic_ns()
                for msg in result.messages:
                    intended, seq = STAMP.unpack_from(msg.body)
                    if 0 <= seq < count and intended:
                        latencies[seq] = now - intended
                got += len(result.messages)
            if got:
                if not received:
                    first = time.perf_counter()
                received += got
                last = time.perf_counter()
            else:
                consumer.wait(offsets, 1.0)
        out.put(("consumer", (first, last, latencies)))


def _ping(sem_a: str, sem_b: str, n: int) -> None:
    import posix_ipc

    a, b = posix_ipc.Semaphore(sem_a), posix_ipc.Semaphore(sem_b)
    for _ in range(n):
        a.acquire()
        b.release()


def semaphore_floor(n: int) -> dict:
    """One-way wake-up time of a bare posix_ipc semaphore between two processes."""
    import posix_ipc

    tag = f"/shmq-bench-{os.getpid()}"
    a = posix_ipc.Semaphore(tag + "a", posix_ipc.O_CREX)
    b = posix_ipc.Semaphore(tag + "b", posix_ipc.O_CREX)
    try:
        proc = mp.get_context("spawn").Process(target=_ping, args=(a.name, b.name, n))
        proc.start()
        rtts = np.zeros(n)
        for i in range(n):
            t = time.perf_counter_ns()
            a.release()
            b.acquire()
            rtts[i] = time.perf_counter_ns() - t
            time.sleep(0.0001)  # let the other side park, as an idle consumer does
        proc.join(10)
    finally:
        for s in (a, b):
            s.unlink()
            s.close()
    one_way = rtts / 2 / 1000
    return {
        "p50_us": float(np.percentile(one_way, 50)),
        "p99_us": float(np.percentile(one_way, 99)),
    }


# -- orchestration ------------------------------------------------------------------------


def run(mode: str, namesrv: str, count: int, rate: float = 0.0) -> dict:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    c_ready, p_ready, go = ctx.Event(), ctx.Event(), ctx.Event()
    consumer = ctx.Process(target=consumer_main, args=(namesrv, count, c_ready, out))
    consumer.start()
    c_ready.wait(120)
    producer = ctx.Process(
        target=producer_main, args=(namesrv, mode, count, rate, p_ready, go, out)
    )
    producer.start()
    p_ready.wait(120)
    start = time.perf_counter()
    go.set()
    results = gather_results(out, [producer, consumer], mode)
    _, last, latencies = results["consumer"]
    elapsed = max(last - start, results["producer"])
    row = {"mode": mode, "messages": count, "rate": rate, "producer_s": results["producer"]}
    row["msgs_per_s"] = count / (elapsed if mode == "pipelined" else results["producer"])
    row["mb_per_s"] = row["msgs_per_s"] * BODY / 1e6
    if mode == "latency":
        lat = latencies[latencies > 0] / 1000
        row.update(
            {
                f"p{p}_us": float(np.percentile(lat, float(p.replace("_", "."))))
                for p in ("50", "99", "99_9")
            }
        )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args()
    pipelined_n, sync_n, latency_n = (
        (100_000, 10_000, 5_000) if args.quick else (1_000_000, 100_000, 20_000)
    )
    rows = []
    with embedded_broker(TOPIC) as namesrv:
        floor = semaphore_floor(2000 if args.quick else 10000)
        plan = [("pipelined", pipelined_n, 0.0), ("sync", sync_n, 0.0),
                ("latency", latency_n, 10_000.0), ("latency", latency_n // 5, 1_000.0)]  # fmt: skip
        for mode, n, rate in plan:
            print(f"running {mode} ({n:,} messages)...", file=sys.stderr, flush=True)
            rows.append(run(mode, namesrv, n, rate=rate))
    report(rows, floor, args.json_path)


def report(rows: list[dict], floor: dict, json_path: str | None) -> None:
    from rich.console import Console
    from rich.table import Table

    pipelined, sync, latency, slow = rows
    table = Table(title="shmq end to end, 100-byte messages, ASYNC_FLUSH, 1 producer, 1 consumer")
    for col in ("measure", "result", "goal", "ratio to goal"):
        table.add_column(col)
    table.add_row("pipelined sends", f"{pipelined['msgs_per_s']:,.0f} msg/s, "
                  f"{pipelined['mb_per_s']:.1f} MB/s", "500,000 msg/s",
                  f"{pipelined['msgs_per_s'] / 500_000:.2f}")  # fmt: skip
    table.add_row("sync sends", f"{sync['msgs_per_s']:,.0f} msg/s", "50,000 msg/s",
                  f"{sync['msgs_per_s'] / 50_000:.2f}")  # fmt: skip
    table.add_row("latency at 10k msg/s", f"p50 {latency['p50_us']:.0f} µs, p99 "
                  f"{latency['p99_us']:.0f} µs, p99.9 {latency['p99_9_us']:.0f} µs",
                  f"p50 ≤ {1.5 * floor['p50_us']:.0f} µs",
                  f"{1.5 * floor['p50_us'] / latency['p50_us']:.2f}")  # fmt: skip
    table.add_row("latency at 1k msg/s (context)", f"p50 {slow['p50_us']:.0f} µs, p99 "
                  f"{slow['p99_us']:.0f} µs, p99.9 {slow['p99_9_us']:.0f} µs", "", "")  # fmt: skip
    table.add_row("bare semaphore one-way (floor)", f"p50 {floor['p50_us']:.0f} µs, p99 "
                  f"{floor['p99_us']:.0f} µs", "", "")  # fmt: skip
    Console().print(table)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(
                {"machine": platform.node(), "rows": rows, "semaphore_floor": floor}, f, indent=2
            )


if __name__ == "__main__":
    main()
