"""Messages scanned per second by a selective SQL92 consumer against the tag-filter path, in
the same run (issue 55): a backlog where 1 % of the messages match, read from the mapped files
by a consumer on the broker's host (``QueueReader``, transport "shm").

    python bench/sql_filter_bench.py              # 100,000 messages
    python bench/sql_filter_bench.py --quick      # 20,000 messages (CI)

The tag path skips the other 99 % by their tag hash in the consume queue without reading
their records; the SQL path reads and decodes every record and evaluates the expression on
its properties (shmq has no consume-queue bloom bit map yet), so it shows what that costs.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from shmq import EmbeddedBroker, Message, MessageSelector, Producer
from shmq.client.transport.queue_reader import QueueReader

TOPIC = "SqlBench"


def scan(reader: QueueReader, expression: object) -> tuple[int, float]:
    """Read the whole topic with ``expression``: (messages kept, seconds)."""
    kept = 0
    started = time.perf_counter()
    for mq in reader.queues(TOPIC):
        offset, end = 0, reader.max_offset(mq)
        while offset < end:
            result = reader.pull(mq, offset, 1024, expression)
            kept += len(result.messages)
            offset = result.next_begin_offset
    return kept, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true", help="20,000 messages (CI)")
    args = parser.parse_args()
    n = 20_000 if args.quick else args.messages
    with tempfile.TemporaryDirectory(prefix="sql-bench-") as store, \
            EmbeddedBroker(store, topics={TOPIC: 2}, enable_property_filter=True) as mq, \
            Producer("sql-bench-p", mq.namesrv) as producer:  # fmt: skip
        futures = []
        for i in range(n):
            hit = i % 100 == 0
            props = {"region": "eu" if hit else "cn", "amount": str(i)}
            futures.append(
                producer.send_async(
                    Message(TOPIC, b"x" * 100, tags="Hit" if hit else "Miss", properties=props)
                )
            )
            if len(futures) >= 1000:
                for f in futures:
                    f.result(30)
                futures.clear()
        for f in futures:
            f.result(30)
        with QueueReader("sql-bench", mq.namesrv, transport="shm") as reader:
            while sum(reader.max_offset(q) for q in reader.queues(TOPIC)) < n:
                time.sleep(0.05)
            runs = {"tag 'Hit'": "Hit",
                    "sql region = 'eu'": MessageSelector.by_sql("region = 'eu'"),
                    "sql IN and amount": MessageSelector.by_sql(
                        "region IN ('eu') AND amount >= 0")}  # fmt: skip
            scan(reader, "Hit")  # warm the kernels
            rates = {}
            for name, expression in runs.items():
                kept, seconds = scan(reader, expression)
                rates[name] = n / seconds
                print(f"{name:22} kept {kept:6}  scanned {rates[name]:12,.0f} msg/s "
                      f"({seconds:.2f} s)")  # fmt: skip
            tag = rates.pop("tag 'Hit'")
            for name, rate in rates.items():
                print(f"{name} against the tag path: {rate / tag:.3f}")


if __name__ == "__main__":
    main()
