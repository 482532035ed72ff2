"""What message trace costs a producer: W1's ``send_async`` (100-byte messages, one message
per call) with ``enable_msg_trace`` off and on, as a ratio.

    python bench/trace_bench.py --quick     # CI: tens of seconds
    python bench/trace_bench.py
    python bench/trace_bench.py --json out.json

One embedded broker (ASYNC_FLUSH, one queue) serves every run; each run is a fresh producer
process that sends ``count`` messages with ``send_async`` and waits for every future (msgs/s
from the first send to the last answer). With trace on, every stored message queues a Pub
context that the producer's trace dispatcher packs and sends to ``RMQ_SYS_TRACE_TOPIC`` on
the same broker, so the cost shown is the hooks, the dispatcher thread (sharing the GIL) and
the trace messages the broker stores. As in RocketMQ, contexts past the dispatcher's queue
(1024) are dropped rather than slow the sends: the ``dropped`` column counts them. Runs
alternate off / on, ``ROUNDS`` times; the best of each is compared (the host is shared).
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


def producer_main(namesrv: str, count: int, trace: bool, out) -> None:
    """Send ``count`` messages with ``send_async``; put (msgs/s, contexts dropped)."""
    from shmq.client.producer.producer import Producer
    from shmq.message import Message

    body = b"x" * BODY
    with Producer("bench-trace-producer", namesrv, enable_msg_trace=trace) as producer:
        producer.send(Message(TOPIC, body))  # connect and warm up
        start = time.perf_counter()
        futures = [producer.send_async(Message(TOPIC, body)) for _ in range(count)]
        for f in futures:
            f.result(30)
        rate = count / (time.perf_counter() - start)
        dropped = producer._trace.dispatcher.discarded if trace else 0
    out.put((rate, dropped))


def run(namesrv: str, count: int, trace: bool) -> tuple[float, int]:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=producer_main, args=(namesrv, count, trace, out))
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
    best = {False: 0.0, True: 0.0}
    dropped = 0
    with embedded_broker(TOPIC, mapped_file_size_commit_log=1 << 30) as namesrv:
        for _ in range(ROUNDS):
            for trace in (False, True):
                print(f"send_async ({count:,} messages), trace {'on' if trace else 'off'}...",
                      file=sys.stderr, flush=True)  # fmt: skip
                rate, lost = run(namesrv, count, trace)
                best[trace] = max(best[trace], rate)
                dropped = max(dropped, lost)
    row = {"api": "send_async", "messages": count, "off_msgs_per_s": best[False],
           "on_msgs_per_s": best[True], "ratio": best[True] / best[False],
           "dropped": dropped}  # fmt: skip
    table = Table(title=f"W1 send_async with message trace ({platform.node()}, "
                        f"{os.cpu_count()} CPUs)")  # fmt: skip
    for column in ("API", "messages", "trace off msg/s", "trace on msg/s", "ratio", "dropped"):
        table.add_column(column, justify="left" if column == "API" else "right")
    table.add_row(row["api"], num(count), num(row["off_msgs_per_s"]), num(row["on_msgs_per_s"]),
                  f"{row['ratio']:.3f}", str(dropped))  # fmt: skip
    Console().print(table)
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump([row], f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
