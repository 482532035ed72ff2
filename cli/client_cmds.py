"""``shmq produce`` and ``shmq consume``: send and read messages from the command line."""

from __future__ import annotations

import json
import sys
import time

import click

from shmq.errors import ShmqError

SUMMARY_ABOVE = 1000  # with --count above this, print a summary instead of every message
BATCH = 64


@click.command("produce")
@click.option("-t", "--topic", required=True)
@click.option("--tags")
@click.option("--keys", help="Message keys, space-separated.")
@click.option("--body", help="Message body text.")
@click.option("--size", type=click.IntRange(1), help="Body size in bytes (generated).")
@click.option("--count", type=click.IntRange(1), default=1, show_default=True)
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), help="Messages per second.")
@click.option("--group", default="shmq-cli-producer", show_default=True)
@click.option("-n", "--namesrv", default="127.0.0.1:9876", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print each SendResult as JSON.")
def produce(
    topic: str,
    tags: str | None,
    keys: str | None,
    body: str | None,
    size: int | None,
    count: int,
    rate: float | None,
    group: str,
    namesrv: str,
    as_json: bool,
) -> None:
    """Send messages; prints each SendResult, or a summary with --count."""
    from shmq.client.producer import Producer
    from shmq.message import Message

    if body is None and size is None:
        raise click.UsageError("give --body TEXT or --size N")
    payload = body.encode() if body is not None else (b"shmq" * (size // 4 + 1))[:size]
    key_list = keys.split() if keys else []
    summary = count > SUMMARY_ABOVE and not as_json
    batch = 1 if rate is not None or not summary else BATCH
    with Producer(group, namesrv) as producer:
        started = time.perf_counter()
        sent = 0
        progress = _progress(count) if summary else None
        task = progress.add_task("produce", total=count) if progress else None
        if progress:
            progress.start()
        try:
            while sent < count:
                n = min(batch, count - sent)
                if rate is not None:
                    _pace(started, sent, rate)
                msgs = [Message(topic, payload, tags=tags, keys=key_list) for _ in range(n)]
                results = producer.send_batch(msgs) if n > 1 else [producer.send(msgs[0])]
                sent += n
                if progress:
                    progress.update(task, completed=sent)
                else:
                    for r in results:
                        click.echo(json.dumps(r.to_json()) if as_json else _send_line(r))
        finally:
            if progress:
                progress.stop()
        elapsed = time.perf_counter() - started
    if summary:
        mb = sent * len(payload) / elapsed / 1e6
        click.echo(f"sent {sent} messages to {topic} in {elapsed:.2f} s: "
                   f"{sent / elapsed:,.0f} msgs/s, {mb:.1f} MB/s")  # fmt: skip


def _send_line(r) -> str:
    return (
        f"SendResult [sendStatus={r.send_status.value}, msgId={r.msg_id}, "
        f"offsetMsgId={r.offset_msg_id}, messageQueue={r.message_queue}, "
        f"queueOffset={r.queue_offset}]"
    )


def _pace(started: float, sent: int, rate: float) -> None:
    due = started + sent / rate
    delay = due - time.perf_counter()
    if delay > 0:
        time.sleep(delay)


def _progress(total: int):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=True,
        disable=not sys.stderr.isatty(),
    )


@click.command("consume")
@click.option("-t", "--topic", required=True)
@click.option("-g", "--group", default="shmq-cli-consumer", show_default=True)
@click.option("--tags", default="*", show_default=True, help="Tag expression, e.g. 'A || B'.")
@click.option("--from", "from_where", type=click.Choice(["first", "last"]), default="last",
              show_default=True, help="Where a group with no committed offset starts.")  # fmt: skip
@click.option("--count", type=click.IntRange(1), help="Stop after this many messages.")
@click.option("--timeout", type=float, default=10.0, show_default=True,
              help="Give up after this many seconds without a new message.")  # fmt: skip
@click.option("-n", "--namesrv", default="127.0.0.1:9876", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per message.")
def consume(
    topic: str,
    group: str,
    tags: str,
    from_where: str,
    count: int | None,
    timeout: float,
    namesrv: str,
    as_json: bool,
) -> None:
    """Read messages of a topic from every queue, committing offsets for the group."""
    from shmq.client.queue_reader import QueueReader
    from shmq.message import message_to_json

    summary = count is not None and count > SUMMARY_ABOVE and not as_json
    received = 0
    started = time.perf_counter()
    with QueueReader(group, namesrv) as consumer:
        queues = consumer.queues(topic)
        offsets, committed_at = {}, {}
        for mq in queues:
            committed_at[mq] = committed = consumer.committed(mq)
            offsets[mq] = committed if committed >= 0 else (
                0 if from_where == "first" else consumer.max_offset(mq)
            )  # fmt: skip
        last_message = time.monotonic()
        try:
            while count is None or received < count:
                got = 0
                for mq in queues:
                    want = 32 if count is None else min(1024, count - received)
                    if want <= 0:
                        break
                    result = consumer.pull(mq, offsets[mq], want, tags)
                    offsets[mq] = result.next_begin_offset
                    for msg in result.messages:
                        if not summary:
                            if as_json:
                                click.echo(json.dumps(message_to_json(msg)))
                            else:
                                click.echo(_message_line(msg))
                    got += len(result.messages)
                    received += len(result.messages)
                if got:
                    last_message = time.monotonic()
                    continue
                idle = time.monotonic() - last_message
                if idle >= timeout:
                    break
                consumer.wait(offsets, min(1.0, timeout - idle))
        finally:  # every queue's position, read or not: a later run resumes there
            for mq, offset in offsets.items():
                if offset != committed_at[mq]:
                    consumer.commit(mq, offset)
    elapsed = time.perf_counter() - started
    if summary or count is None or received < count:
        rate = f": {received / elapsed:,.0f} msgs/s" if received else ""
        line = f"received {received} messages from {topic} in {elapsed:.2f} s{rate}"
        click.echo(line, err=not summary)
    if count is not None and received < count:
        raise ShmqError(f"timeout: received {received} of {count} messages in {timeout:g} s "
                        "without a new one")  # fmt: skip


def _message_line(msg) -> str:
    body = msg.body.decode("utf-8", "replace")
    return (
        f"{msg.topic} q{msg.queue_id} #{msg.queue_offset} msgId={msg.msg_id} "
        f"tags={msg.tags or ''} keys={' '.join(msg.keys)} body={body[:200]}"
    )
