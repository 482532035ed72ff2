"""``shmq produce`` and ``shmq consume``: send and read messages from the command line.

Both print what they did when they end. Ctrl-C or SIGTERM stops them after the send or the
line under way (consume then commits its offsets) with exit status 128 + the signal's number,
130 or 143, as Unix tools do; a second signal ends them at once. A closed stdout (a reader such
as ``head`` quit) ends them quietly with exit status 0, as tools that handle EPIPE do: consume
commits only the messages whose lines it wrote. Up to ``SHOW_EACH`` messages are printed one
per line, more as a progress bar and a summary (``--json`` prints every one).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from types import FrameType
from typing import Any

import click

from shmq.errors import BodyDecompressionError, ShmqError
from shmq.names import MAX_GROUP_LENGTH, MAX_TOPIC_LENGTH, name_problem
from shmq_cli.connection import client_options, connection_options
from shmq_cli.feedback import plural, say_if_slow

SHOW_EACH = 10  # with --count above this, a summary instead of a line per message
BATCH = 64
LOADING = "loading shmq's read kernels (compiled on a host's first run; cached for next time)"
STOP_CHECK_S = 0.2  # a wait for messages or a paced send notices a stop signal within this
STOPPED_BY = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}


class _StopSignals:
    """SIGINT and SIGTERM set ``signum``: the command stops at its next safe point instead
    of wherever an exception raised by the signal would land. A send or a line under way
    finishes, so what consume commits is exactly what it printed. The first signal puts the
    previous handlers back: a second one ends a stop that hangs (a write to a reader that
    stopped reading). A signal the shell had us ignore stays ignored (``shmq consume ... &``
    in a script)."""

    def __init__(self) -> None:
        self.signum = 0
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _StopSignals:
        for sig in STOPPED_BY:
            if signal.getsignal(sig) is not signal.SIG_IGN:
                self._previous[sig] = signal.signal(sig, self._on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        self._restore()

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.signum = signum
        self._restore()

    def _restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def exit(self, ctx: click.Context, what: str) -> None:
        """Say what was done on stderr and exit with 128 + the signal's number."""
        click.echo(f"{STOPPED_BY[self.signum]}: {what}", err=True)
        ctx.exit(128 + self.signum)


def _echo_out(line: str) -> bool:
    """Print ``line`` on stdout; False when stdout is closed (its reader quit). Stdout then
    goes to /dev/null: the line left in its buffer would fail again when Python flushes it at
    exit ("Exception ignored ... BrokenPipeError")."""
    try:
        click.echo(line)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return False
    return True


def _show(items: Sequence[Any], line: Callable[[Any], str]) -> int:
    """Print a line per item until stdout closes; how many were printed."""
    for i, item in enumerate(items):
        if not _echo_out(line(item)):
            return i
    return len(items)


def _report(line: str, on_stdout: bool) -> None:
    """A closing summary: on stdout when it is the command's output and stdout is open,
    else on stderr."""
    if not (on_stdout and _echo_out(line)):
        click.echo(line, err=True)


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
@connection_options
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
    """Send messages; prints each SendResult, or a summary above 10 messages.

    A closed stdout (`shmq produce ... --json | head -1`) ends the sending after the send
    under way, quietly with exit status 0; what was sent is reported on stderr.
    """
    from shmq.client.producer.producer import Producer
    from shmq.message import Message

    if body is None and size is None:
        raise click.UsageError("give --body TEXT or --size N")
    payload = body.encode() if body is not None else (b"shmq" * (size // 4 + 1))[:size]
    key_list = keys.split() if keys else []
    summary = count > SHOW_EACH and not as_json
    batch = 1 if rate is not None or not summary else BATCH
    result_line = (lambda r: json.dumps(r.to_json())) if as_json else _send_line
    sent = 0
    closed = False  # stdout: its reader quit
    started = time.perf_counter()
    with (
        _StopSignals() as stop,
        Producer(group, namesrv, **client_options()) as producer,
        _progress("produce", count, summary) as bar,
    ):
        while sent < count and not (stop.signum or closed):
            n = min(batch, count - sent)
            if rate is not None:
                _pace(started, sent, rate, stop)
                if stop.signum:
                    break
            msgs = [Message(topic, payload, tags=tags, keys=key_list) for _ in range(n)]
            results = producer.send_batch(msgs) if n > 1 else [producer.send(msgs[0])]
            sent += n
            bar(sent)
            if not summary:
                closed = _show(results, result_line) < len(results)
    elapsed = time.perf_counter() - started
    if summary or stop.signum or closed:
        mb = f", {sent * len(payload) / elapsed / 1e6:.1f} MB/s" if _rate(sent, elapsed) else ""
        done = f"sent {plural(sent, 'message')} to {topic} in {elapsed:.2f} s"
        _report(done + _rate(sent, elapsed) + mb, on_stdout=not (stop.signum or closed))
    if stop.signum:
        stop.exit(ctx, f"sent {sent} of {count}")
    if closed:
        click.echo(f"stdout closed: sent {sent} of {count}", err=True)


def _send_line(r) -> str:
    return (
        f"SendResult [sendStatus={r.send_status.value}, msgId={r.msg_id}, "
        f"offsetMsgId={r.offset_msg_id}, messageQueue={r.message_queue}, "
        f"queueOffset={r.queue_offset}]"
    )


def _pace(started: float, sent: int, rate: float, stop: _StopSignals) -> None:
    """Sleep until message ``sent`` is due at ``rate``, in steps (a signal that only sets
    ``stop.signum`` does not cut a sleep short)."""
    due = started + sent / rate
    while not stop.signum:
        delay = due - time.perf_counter()
        if delay <= 0:
            return
        time.sleep(min(delay, STOP_CHECK_S))


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
@click.option("--sql", metavar="EXPR",
              help="A SQL92 property filter instead of tags, e.g. \"a > 5 AND b IN ('x')\" "
                   "(the broker needs enablePropertyFilter=true).")  # fmt: skip
@click.option("--from", "from_where", type=click.Choice(["first", "last"]), default="last",
              show_default=True, help="Where a group with no committed offset starts.")  # fmt: skip
@click.option("--count", type=click.IntRange(1), help="Stop after this many messages.")
@click.option("--timeout", type=float, default=10.0, show_default=True,
              help="Give up after this many seconds without a new message.")  # fmt: skip
@click.option("--persist-consumer-offset-interval", "persist_interval", metavar="SECONDS",
              type=click.FloatRange(min=0, min_open=True),
              help="Commit offsets this often while consuming (persistConsumerOffsetInterval)"
                   "  [default: 5, a PushConsumer's]")  # fmt: skip
@click.option(
    "--pop",
    is_flag=True,
    help="Consume as RocketMQ 5's SimpleConsumer: POP, then ack each message printed.",
)
@click.option(
    "--invisible-duration",
    metavar="SECONDS",
    type=click.FloatRange(min=0.001),
    default=60.0,
    show_default=True,
    help="--pop: how long a received message stays invisible unless acked.",
)
@click.option(
    "--await-duration",
    metavar="SECONDS",
    type=click.FloatRange(min=0),
    default=STOP_CHECK_S,
    show_default=True,
    help="--pop: how long one receive long-polls the broker.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(1, 32),
    default=32,
    show_default=True,
    help="--pop: messages per receive.",
)
@click.option("-n", "--namesrv", default="127.0.0.1:9876", show_default=True)
@connection_options
@click.option("--json", "as_json", is_flag=True, help="One JSON object per message.")
@click.pass_context
def consume(
    ctx: click.Context,
    topic: str,
    group: str,
    tags: str,
    sql: str | None,
    from_where: str,
    count: int | None,
    timeout: float,
    persist_interval: float | None,
    pop: bool,
    invisible_duration: float,
    await_duration: float,
    batch_size: int,
    namesrv: str,
    as_json: bool,
) -> None:
    """Read messages of a topic from every queue, committing offsets for the group.

    Offsets are committed every --persist-consumer-offset-interval seconds and at the end,
    also after Ctrl-C or SIGTERM (exit status 130 or 143). A closed stdout (`shmq consume ...
    | head -3`) ends it quietly with exit status 0, committing only the messages whose lines
    were written: the group's next run starts at the first message that was not.

    With --pop the group consumes by POP (a SimpleConsumer): the broker keeps its offsets,
    each message printed is acked, and one received but not printed (stdout closed, a stop)
    comes back to the group after --invisible-duration.

    With --sql only the messages whose properties (and TAGS) match the SQL92 expression are
    printed; the group's offsets move past the others.
    """
    expression = tags
    if sql is not None:
        from shmq.client.selector import MessageSelector
        from shmq.errors import FilterExpressionError

        if pop or tags != "*":
            raise click.UsageError("--sql takes neither --tags nor --pop")
        try:
            expression = MessageSelector.by_sql(sql)
        except FilterExpressionError as exc:
            raise click.BadParameter(str(exc), param_hint="--sql") from None
    if pop:
        _consume_pop(ctx, topic, group, tags, from_where, count, timeout, invisible_duration,
                     await_duration, batch_size, namesrv, as_json)  # fmt: skip
        return
    from shmq.client.consumer.base import PERSIST_CONSUMER_OFFSET_INTERVAL
    from shmq.client.transport.queue_reader import QueueReader

    if persist_interval is None:
        persist_interval = PERSIST_CONSUMER_OFFSET_INTERVAL
    message_line = _json_line if as_json else _message_line
    summary = count is not None and count > SHOW_EACH and not as_json
    received = 0
    closed = False  # stdout: its reader quit
    failure: ShmqError | None = None  # what ended the run early, raised after the summary
    on_slave: set[str] = set()  # broker names whose offsets went to a slave (no master)
    with _StopSignals() as stop:
        with say_if_slow(LOADING):  # the read kernels: a first run on a host may compile them
            reader = QueueReader(group, namesrv, **client_options())
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

            def commit() -> None:
                """Every queue's position, read or not: a later run resumes there. A broker
                whose master is gone gets them on its slave, as RocketMQ 4.9's clients do:
                this process may end before the master is back."""
                for mq, offset in offsets.items():
                    if offset != committed_at[mq]:
                        if not consumer.commit(mq, offset, slave_if_no_master=True):
                            on_slave.add(mq.broker_name)
                        committed_at[mq] = offset

            persist_due = last_message + persist_interval
            try:
                while not (stop.signum or closed) and (count is None or received < count):
                    got = 0
                    for mq in queues:
                        want = 32 if count is None else min(1024, count - received)
                        if want <= 0:
                            break
                        result = consumer.pull(mq, offsets[mq], want, expression)
                        offsets[mq] = result.next_begin_offset
                        msgs = result.messages
                        shown = len(msgs) if summary else _show(msgs, message_line)
                        got += shown
                        received += shown
                        if shown < len(msgs):  # not printed: the next run reads it first
                            offsets[mq] = msgs[shown].queue_offset
                            closed = True
                            break
                    now = time.monotonic()
                    if now >= persist_due:
                        commit()
                        persist_due = now + persist_interval
                    if got:
                        last_message = now
                        bar(received)
                        continue
                    idle = now - last_message
                    if closed or idle >= timeout:
                        break
                    consumer.wait(offsets, min(STOP_CHECK_S, timeout - idle))
            except ShmqError as exc:
                failure = exc
            try:
                commit()
            except ShmqError as exc:
                failure = failure or exc
    if summary or failure or stop.signum or closed or count is None or received < count:
        # the rate is over the time messages came in, not the final wait for more
        busy = (time.perf_counter() - started) - (time.monotonic() - last_message)
        line = f"received {plural(received, 'message')} from {topic}"
        if received:
            line += f" in {max(busy, 0):.2f} s{_rate(received, busy)}"
        _report(line, on_stdout=summary and not (failure or stop.signum or closed))
    if on_slave:
        click.echo(f"{', '.join(sorted(on_slave))}: no master in the route, so the offsets were"
                   " committed to the slave; the master's replace them once it is back",
                   err=True)  # fmt: skip
    if failure is not None:
        raise failure
    if stop.signum:
        stop.exit(ctx, "offsets committed")
    if count is not None and received < count and not closed:
        raise ShmqError(f"timeout: received {received} of {count} messages in {timeout:g} s "
                        "without a new one")  # fmt: skip


def _consume_pop(
    ctx: click.Context, topic: str, group: str, tags: str, from_where: str, count: int | None,
    timeout: float, invisible_duration: float, await_duration: float, batch_size: int,
    namesrv: str, as_json: bool,
) -> None:  # fmt: skip
    """``consume --pop``: receive, print, ack what was printed."""
    from shmq.client.consumer.pop.simple import SimpleConsumer

    message_line = _json_line if as_json else _message_line
    summary = count is not None and count > SHOW_EACH and not as_json
    received = 0
    closed = False  # stdout: its reader quit
    with _StopSignals() as stop:
        with say_if_slow(LOADING):
            consumer = SimpleConsumer(
                group, namesrv, subscriptions={topic: tags},
                await_duration=min(await_duration, timeout),
                invisible_duration=invisible_duration,
                consume_from_where="FIRST_OFFSET" if from_where == "first" else "LAST_OFFSET",
                **client_options(),
            )  # fmt: skip
            consumer.start()
        with consumer, _progress("consume", count, summary) as bar:
            started = time.perf_counter()
            last_message = time.monotonic()
            while not (stop.signum or closed) and (count is None or received < count):
                want = batch_size if count is None else min(batch_size, count - received)
                msgs = consumer.receive(want, invisible_duration)
                shown = len(msgs) if summary else _show(msgs, message_line)
                if shown:
                    consumer.ack_batch(msgs[:shown])
                closed = shown < len(msgs)
                received += shown
                now = time.monotonic()
                if shown:
                    last_message = now
                    bar(received)
                elif now - last_message >= timeout:
                    break
    if summary or stop.signum or closed or count is None or received < count:
        busy = (time.perf_counter() - started) - (time.monotonic() - last_message)
        line = f"received {plural(received, 'message')} from {topic}"
        if received:
            line += f" in {max(busy, 0):.2f} s{_rate(received, busy)}"
        _report(line, on_stdout=summary and not (stop.signum or closed))
    if stop.signum:
        stop.exit(ctx, "printed messages acked")
    if count is not None and received < count and not closed:
        raise ShmqError(f"timeout: received {received} of {count} messages in {timeout:g} s "
                        "without a new one")  # fmt: skip


def _json_line(msg) -> str:
    """A message as one JSON line: its body decompressed (``bodyError`` when it does not
    decompress, the body then as stored)."""
    from shmq.client.admin.message.queries import plain_body
    from shmq.message import message_to_json

    return json.dumps(plain_body(message_to_json(msg)))


def _message_line(msg) -> str:
    try:
        body = msg.body.decode("utf-8", "replace")
    except BodyDecompressionError as exc:
        body = f"<{exc}>"
    return (
        f"{msg.topic} q{msg.queue_id} #{msg.queue_offset} msgId={msg.msg_id} "
        f"tags={msg.tags or ''} keys={' '.join(msg.keys)} body={body[:200]}"
    )
