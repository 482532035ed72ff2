"""Client processes for the end-to-end tests (run as scripts by ``e2e_helpers``).

``produce``: sends ``--count`` messages (body ``{tag}-{i}``) one by one, writing one JSON line
per acknowledged send to ``--out``; errors are written as lines with ``"error"`` and the loop
goes on. ``consume``: pulls the given queues until ``--expect`` messages arrived in total (or
``--stop-file`` exists and it is caught up), committing offsets, one JSON line per message.
``push``: a ``PushConsumer`` of ``--group`` on ``--topic`` until SIGTERM (then a clean
shutdown), one JSON line per message consumed and one per change of its queue assignment;
with ``--orderly`` an orderly consumer, whose lines also say which process and thread
consumed the message and when (``time.monotonic``, shared by the host's processes).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time

from shmq.client.consumer.push import PushConsumer
from shmq.client.producer.producer import Producer
from shmq.client.transport.queue_reader import QueueReader
from shmq.client.types import ConsumeOrderlyStatus, ConsumeResult
from shmq.message import Message


def produce(args: argparse.Namespace) -> None:
    with (
        Producer(f"p-{args.tag}", args.namesrv, send_timeout=args.send_timeout) as producer,
        open(args.out, "w") as out,
    ):
        for i in range(args.count):
            body = f"{args.tag}-{i}"
            try:
                r = producer.send(Message(args.topic, body, keys=[body]))
            except Exception as exc:  # the test looks at errors, it must not stop here
                out.write(json.dumps({"body": body, "error": str(exc)}) + "\n")
                continue
            row = {"body": body, "queue": r.message_queue.queue_id, "offset": r.queue_offset,
                   "status": r.send_status.value, "msgId": r.offset_msg_id}  # fmt: skip
            out.write(json.dumps(row) + "\n")
            out.flush()
            if args.pause:
                time.sleep(args.pause)


def consume(args: argparse.Namespace) -> None:
    queue_ids = {int(q) for q in args.queues.split(",")}
    received = 0
    with QueueReader(args.group, args.namesrv) as consumer, open(args.out, "w") as out:
        queues = [mq for mq in consumer.queues(args.topic) if mq.queue_id in queue_ids]
        offsets = {mq: max(consumer.committed(mq), 0) for mq in queues}
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline:
            got = 0
            for mq in queues:
                result = consumer.pull(mq, offsets[mq], 64)
                for msg in result.messages:
                    out.write(json.dumps({"queue": mq.queue_id, "offset": msg.queue_offset,
                                          "body": msg.body.decode()}) + "\n")  # fmt: skip
                got += len(result.messages)
                if result.next_begin_offset != offsets[mq]:
                    offsets[mq] = result.next_begin_offset
                    consumer.commit(mq, offsets[mq])
            received += got
            if args.expect and received >= args.expect:
                break
            if not got:
                if args.stop_file and os.path.exists(args.stop_file):
                    caught_up = all(consumer.max_offset(mq) <= offsets[mq] for mq in queues)
                    if caught_up:
                        break
                consumer.wait(offsets, 0.2)
        out.flush()


def push(args: argparse.Namespace) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    lock = threading.Lock()
    out = open(args.out, "w")  # noqa: SIM115 (closed below, after the consumer)

    def write(row: dict) -> None:
        with lock:
            out.write(json.dumps(row) + "\n")
            out.flush()

    def on_message(msgs, ctx):
        start = time.monotonic()
        if args.pause:
            time.sleep(args.pause)
        end = time.monotonic()
        for msg in msgs:
            row = {"queue": msg.queue_id, "offset": msg.queue_offset, "body": msg.body.decode(),
                   "host": msg.store_host}  # fmt: skip
            if args.orderly:
                row.update(pid=os.getpid(), thread=threading.get_ident(), start=start, end=end)
            write(row)
        return ConsumeOrderlyStatus.SUCCESS if args.orderly else ConsumeResult.CONSUME_SUCCESS

    consumer = PushConsumer(
        args.group,
        args.namesrv,
        listener=on_message,
        message_model=args.model,
        consume_from_where="FIRST_OFFSET",
        rebalance_interval=args.rebalance_interval,
        persist_consumer_offset_interval=args.persist_interval,
        offset_store_dir=args.offset_dir or "~/.shmq_offsets",
        instance_name=args.instance,
        orderly=args.orderly,
    )
    consumer.subscribe(args.topic, args.tags)
    consumer.start()
    assigned = None
    try:
        while not stop.wait(0.05):
            now = [mq.queue_id for mq in consumer.assignment()]
            if now != assigned:
                assigned = now
                write({"assignment": now, "clientId": consumer.instance.client_id})
    finally:
        consumer.shutdown()
        out.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["produce", "consume", "push"])
    parser.add_argument("--namesrv", required=True)
    parser.add_argument("--topic", default="E2E")
    parser.add_argument("--out", required=True)
    parser.add_argument("--tag", default="p")
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--pause", type=float, default=0.0)
    parser.add_argument("--send-timeout", type=float, default=3.0)
    parser.add_argument("--group", default="g")
    parser.add_argument("--queues", default="0,1,2,3,4,5,6,7")
    parser.add_argument("--expect", type=int, default=0)
    parser.add_argument("--stop-file")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--model", default="CLUSTERING")
    parser.add_argument("--tags", default="*")
    parser.add_argument("--rebalance-interval", type=float, default=20.0)
    parser.add_argument("--persist-interval", type=float, default=5.0)
    parser.add_argument("--offset-dir")
    parser.add_argument("--instance", default="DEFAULT")
    parser.add_argument("--orderly", action="store_true")
    args = parser.parse_args()
    {"produce": produce, "consume": consume, "push": push}[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
