"""``shmq produce`` and ``shmq consume``: send and read messages from the command line.

Both print what they did when they end, also on Ctrl-C (then with exit status 130, as Unix
tools do); up to ``SHOW_EACH`` messages are printed one per line, more as a progress bar and
a summary (``--json`` prints every one).
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable, Iterator

import click

from shmq.errors import ShmqError
from shmq.names import MAX_GROUP_LENGTH, MAX_TOPIC_LENGTH, name_problem
from shmq_cli.feedback import plural, say_if_slow

SHOW_EACH = 10  # with --count above this, a summary instead of a line per message
BATCH = 64
LOADING = "loading shmq's read kernels (compiled on a host's first run; cached for next time)"
INTERRUPTED = 128 + 2  # exit status after SIGINT


def _valid_name(kind: str, limit: int):
    def check(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
        problem = name_problem(kind, value, limit)
        if problem:
            raise click.BadParameter(problem)
        return value

    return check


def _topic_option():
    return click.option("-t", "--topic", required=True,
                        callback=_valid_name("topic", MAX_TOPIC_LENGTH))  # fmt: skip


def _group_option(default: str):
    return click.option("-g", "--group", default=default, show_default=True,
                        callback=_valid_name("group", MAX_GROUP_LENGTH))  # fmt: skip


def _rate(n: int, seconds: float) -> str:
    """``", 5,120 msgs/s"``, or nothing when too few messages or too short a time to say."""
    return f", {n / seconds:,.0f} msgs/s" if n > 1 and seconds > 1e-3 else ""


@click.command("produce")
@_topic_option()
@click.option("--tags")
@click.option("--keys", help="Message keys, space-separated.")
@click.option("--body", help="Message body text.")
@click.option("--size", type=click.IntRange(1), help="Body size in bytes (generated).")
@click.option("--count", type=click.IntRange(1), default=1, show_default=True)
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), help="Messages per second.")
@_group_option("shmq-cli-producer")
@click.option("-n", "--namesrv", default="127.0.0.1:9876", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print each SendResult as JSON.")
@click.pass_context
def produce(
    ctx: click.Context,
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
    """Send messages; prints each SendResult, or a summary above 10 messages."""
    from shmq.client.producer import Producer
    from shmq.message import Message

    if body is None and size is None:
        raise click.UsageError("give --body TEXT or --size N")
    payload = body.encode() if body is not None else (b"shmq" * (size // 4 + 1))[:size]
    key_list = keys.split() if keys else []
    summary = count > SHOW_EACH and not as_json
    batch = 1 if rate is not None or not summary else BATCH
    sent = 0
    started = time.perf_counter()
    interrupted = False
    with Producer(group, namesrv) as producer, _progress("produce", count, summary) as bar:
        try:
            while sent < count:
                n = min(batch, count - sent)
                if rate is not None:
                    _pace(started, sent, rate)
                msgs = [Message(topic, payload, tags=tags, keys=key_list) for _ in range(n)]
                results = producer.send_batch(msgs) if n > 1 else [producer.send(msgs[0])]
                sent += n
                bar(sent)
                if not summary:
                    for r in results:
                        click.echo(json.dumps(r.to_json()) if as_json else _send_line(r))
        except KeyboardInterrupt:
            interrupted = True
    elapsed = time.perf_counter() - started
    if summary or interrupted:
        mb = f", {sent * len(payload) / elapsed / 1e6:.1f} MB/s" if _rate(sent, elapsed) else ""
        line = f"sent {plural(sent, 'message')} to {topic} in {elapsed:.2f} s"
        click.echo(line + _rate(sent, elapsed) + mb, err=interrupted)
    if interrupted:
        click.echo(f"interrupted: sent {sent} of {count}", err=True)
        ctx.exit(INTERRUPTED)


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


@contextlib.contextmanager
def _progress(what: str, total: int | None, show: bool) -> Iterator[Callable[[int], None]]:
    """A rich progress bar on a terminal's stderr while ``show``; yields ``update(done)``."""
    if not show or not sys.stderr.isatty():
        yield lambda _done: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), transient=True) as progress:  # fmt: skip
        task = progress.add_task(what, total=total)
        yield lambda done: progress.update(task, completed=done)


@click.command("consume")
@_topic_option()
@_group_option("shmq-cli-consumer")
@click.option("--tags", default="*", show_default=True, help="Tag expression, e.g. 'A || B'.")
@click.option("--from", "from_where", type=click.Choice(["first", "last"]), default="last",
              show_default=True, help="Where a group with no committed offset starts.")  # fmt: skip
@click.option("--count", type=click.IntRange(1), help="Stop after this many messages.")
@click.option("--timeout", type=float, default=10.0, show_default=True,
              help="Give up after this many seconds without a new message.")  # fmt: skip
@click.option("-n", "--namesrv", default="127.0.0.1:9876", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per message.")
@click.pass_context
def consume(
    ctx: click.Context,
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

    summary = count is not None and count > SHOW_EACH and not as_json
    received = 0
    interrupted = False
    with say_if_slow(LOADING):  # the read kernels: a first run on a host may compile them
        reader = QueueReader(group, namesrv)
    with reader as consumer, _progress("consume", count, summary) as bar:
        queues = consumer.queues(topic)
        started = time.perf_counter()
        last_message = time.monotonic()
        offsets, committed_at = {}, {}
        for mq in queues:
            committed_at[mq] = committed = consumer.committed(mq)
            offsets[mq] = committed if committed >= 0 else (
                0 if from_where == "first" else consumer.max_offset(mq)
            )  # fmt: skip
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
                    bar(received)
                    continue
                idle = time.monotonic() - last_message
                if idle >= timeout:
                    break
                consumer.wait(offsets, min(1.0, timeout - idle))
        except KeyboardInterrupt:
            interrupted = True
        finally:  # every queue's position, read or not: a later run resumes there
            for mq, offset in offsets.items():
                if offset != committed_at[mq]:
                    consumer.commit(mq, offset)
    if summary or interrupted or count is None or received < count:
        # the rate is over the time messages came in, not the final wait for more
        busy = (time.perf_counter() - started) - (time.monotonic() - last_message)
        line = f"received {plural(received, 'message')} from {topic}"
        if received:
            line += f" in {max(busy, 0):.2f} s{_rate(received, busy)}"
        click.echo(line, err=not summary or interrupted)
    if interrupted:
        click.echo("interrupted: offsets committed", err=True)
        ctx.exit(INTERRUPTED)
    if count is not None and received < count:
        raise ShmqError(f"timeout: received {received} of {count} messages in {timeout:g} s "
                        "without a new one")  # fmt: skip


def _message_line(msg) -> str:
    body = msg.body.decode("utf-8", "replace")
    return (
        f"{msg.topic} q{msg.queue_id} #{msg.queue_offset} msgId={msg.msg_id} "
        f"tags={msg.tags or ''} keys={' '.join(msg.keys)} body={body[:200]}"
    )
