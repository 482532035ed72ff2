"""What message trace costs a producer: W1's ``send_async`` and ``send`` (100-byte messages,
one message per call) with ``enable_msg_trace`` off and on, as a ratio.

    python bench/trace_bench.py --quick     # CI: tens of seconds
    python bench/trace_bench.py
    python bench/trace_bench.py --json out.json

One embedded broker (ASYNC_FLUSH, one queue) serves every run; each run is a fresh producer
process that sends ``count`` messages with ``send_async`` and waits for every future (msgs/s
from the first send to the last answer), or a tenth as many with ``send``. With trace on,
every stored message queues a Pub that the producer's trace dispatcher formats, packs and
sends to ``RMQ_SYS_TRACE_TOPIC`` on the same broker, so the cost shown is the hooks, the
dispatcher thread (sharing the GIL) and the trace messages the broker stores. As in
RocketMQ, contexts past the dispatcher's queue (2048 trace messages' worth) are dropped
rather than slow the sends: the ``dropped`` column counts them. Runs alternate off / on,
``ROUNDS`` times; the best of each is compared (the host is shared).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from embedded import embedded_broker
from rich.console import Console
from rich.table import Table

from bench.number_text import num

TOPIC = "BenchTrace"
BODY = 100
ROUNDS = 3
COUNT = 300_000
QUICK_COUNT = 50_000


def producer_main(namesrv: str, api: str, count: int, trace: bool, out) -> None:
    """Send ``count`` messages with ``api``; put (msgs/s, contexts dropped)."""
    from shmq.client.producer.producer import Producer
    from shmq.message import Message

    body = b"x" * BODY
    with Producer("bench-trace-producer", namesrv, enable_msg_trace=trace) as producer:
        producer.send(Message(TOPIC, body))  # connect and warm up
        start = time.perf_counter()
        if api == "send":
            for _ in range(count):
                producer.send(Message(TOPIC, body))
        else:
            futures = [producer.send_async(Message(TOPIC, body)) for _ in range(count)]
            for f in futures:
                f.result(30)
        rate = count / (time.perf_counter() - start)
        dropped = producer._trace.dispatcher.discarded if trace else 0
    out.put((rate, dropped))


def run(namesrv: str, api: str, count: int, trace: bool) -> tuple[float, int]:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=producer_main, args=(namesrv, api, count, trace, out))
    proc.start()
    result = out.get(timeout=600)
    proc.join(60)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run for CI")
    parser.add_argument("--json", dest="json_path", help="write the results here")
    args = parser.parse_args(argv)
    count = QUICK_COUNT if args.quick else COUNT
    rows = []
    with embedded_broker(TOPIC, mapped_file_size_commit_log=1 << 30) as namesrv:
        for api, n in (("send_async", count), ("send", count // 10)):
            best = {False: 0.0, True: 0.0}
            dropped = 0
            for _ in range(ROUNDS):
                for trace in (False, True):
                    print(f"{api} ({n:,} messages), trace {'on' if trace else 'off'}...",
                          file=sys.stderr, flush=True)  # fmt: skip
                    rate, lost = run(namesrv, api, n, trace)
                    best[trace] = max(best[trace], rate)
                    dropped = max(dropped, lost)
            rows.append({"api": api, "messages": n, "off_msgs_per_s": best[False],
                         "on_msgs_per_s": best[True], "ratio": best[True] / best[False],
                         "dropped": dropped})  # fmt: skip
    table = Table(title=f"W1 with message trace ({platform.node()}, {os.cpu_count()} CPUs)")
    for column in ("API", "messages", "trace off msg/s", "trace on msg/s", "ratio", "dropped"):
        table.add_column(column, justify="left" if column == "API" else "right")
    for row in rows:
        table.add_row(row["api"], num(row["messages"]), num(row["off_msgs_per_s"]),
                      num(row["on_msgs_per_s"]), f"{row['ratio']:.3f}",
                      str(row["dropped"]))  # fmt: skip
    Console().print(table)
    for row in rows:
        print(f"{row['api']}: trace on / off = {row['ratio']:.2f}")
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
