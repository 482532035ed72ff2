"""``shmq admin print-msg``, ``print-msg-by-queue`` and ``query-msg-by-offset`` (mqadmin
``printMsg``, ``printMsgByQueue`` and ``queryMsgByOffset``): a topic's or a queue's
messages read in queue order with pulls, over their whole offsets or a time range, bodies
decoded in a charset; registered on the ``admin`` group by ``shmq_cli.admin``."""

from __future__ import annotations

import codecs
from collections import Counter
from collections.abc import Iterable
from typing import Any

import click

from shmq_cli.admin import admin
from shmq_cli.admin.output import (
    TIMESTAMP,
    body_preview,
    local_time,
    open_admin,
    options,
    print_json,
    show_message,
)

NOT_PRINTED = "NOT PRINT BODY"  # mqadmin's cell for a body left out


def _charset(_ctx: Any, _param: Any, value: str) -> str:
    """A charset Python knows (mqadmin's ``-c``: UTF-8, GBK, ...), by its canonical name."""
    try:
        return codecs.lookup(value).name
    except LookupError:
        raise click.BadParameter(f"unknown charset {value!r} (e.g. UTF-8, GBK)") from None


def _range_options(f: Any) -> Any:
    """``-c`` charset, ``-s`` tag expression, ``-b`` / ``-e`` time range: what printMsg and
    printMsgByQueue share."""
    for option in reversed([
        click.option("-c", "--charset-name", "charset", default="UTF-8", show_default=True,
                     callback=_charset, help="Charset of the bodies (UTF-8, GBK, ...)."),
        click.option("-s", "--sub-expression", default="*", show_default=True,
                     help="Tag expression, e.g. 'TagA || TagB'."),
        click.option("-b", "--begin-timestamp", "begin", type=TIMESTAMP,
                     help="From the first message stored at or after this (ms, "
                          "yyyy-MM-dd#HH:mm:ss:SSS, ...); default: the queue's first."),
        click.option("-e", "--end-timestamp", "end", type=TIMESTAMP,
                     help="To the first message stored at or after this; default: the end."),
    ]):  # fmt: skip
        f = option(f)
    return f


def _read(a: Any, queue: dict[str, Any], expression: str) -> Iterable[dict[str, Any]]:
    return a.browse_queue(queue["topic"], queue["brokerName"], queue["queueId"],
                          queue["minOffset"], queue["maxOffset"], expression)  # fmt: skip


def _with_text(msgs: Iterable[dict[str, Any]], charset: str, print_body: bool) -> list[dict]:
    """The messages, each with ``bodyText`` (the body in ``charset``) when bodies print."""
    if not print_body:
        return list(msgs)
    return [{**m, "bodyText": body_preview(m, charset, full=True)} for m in msgs]


def _show_queue(queue: dict[str, Any], msgs: list[dict[str, Any]], charset: str,
                print_body: bool) -> None:  # fmt: skip
    """mqadmin's lines: the offsets read, then ``MSGID: … BODY: …`` per message."""
    click.echo(_summary(queue, msgs))
    for m in msgs:
        body = body_preview(m, charset, full=True) if print_body else NOT_PRINTED
        click.echo(f"MSGID: {m['msgId']} queueOffset={m['queueOffset']}, tags={m.get('tags') or ''}"
                   f", keys={' '.join(m.get('keys', []))}, storeTime="
                   f"{local_time(m['storeTimestamp'])}, reconsumeTimes={m.get('reconsumeTimes', 0)}"
                   f" BODY: {body}")  # fmt: skip


def _summary(queue: dict[str, Any], msgs: list[dict[str, Any]]) -> str:
    """The offsets read, as mqadmin's line, and the messages found."""
    return (
        f"minOffset={queue['minOffset']}, maxOffset={queue['maxOffset']}, MessageQueue [topic="
        f"{queue['topic']}, brokerName={queue['brokerName']}, queueId={queue['queueId']}]:"
        f" {len(msgs)} message(s)"
    )


@admin.command("print-msg")
@click.option("-t", "--topic", required=True)
@_range_options
@click.option("-d", "--print-body", type=click.BOOL, default=True, show_default=True,
              help="true/false: print the bodies.")  # fmt: skip
@options
def print_msg(
    topic: str, charset: str, sub_expression: str, begin: int | None, end: int | None,
    print_body: bool, namesrv: str, as_json: bool,
) -> None:  # fmt: skip
    """Every message of a topic, queue by queue, in a time range (mqadmin printMsg)."""
    out = []
    with open_admin(namesrv) as a:
        for queue in a.queue_ranges(topic, begin, end):
            msgs = _with_text(_read(a, queue, sub_expression), charset, print_body)
            if as_json:
                out.append({**queue, "messages": msgs})
            else:
                _show_queue(queue, msgs, charset, print_body)
                click.echo("-" * 56)
    if as_json:
        print_json(out)


@admin.command("print-msg-by-queue")
@click.option("-t", "--topic", required=True)
@click.option("-a", "--broker-name", required=True)
@click.option("-i", "--queue-id", type=click.IntRange(0), required=True)
@_range_options
@click.option("-p", "--print-msg", "print_messages", type=click.BOOL, default=False,
              show_default=True, help="true/false: list the messages.")  # fmt: skip
@click.option("-d", "--print-body", type=click.BOOL, default=False, show_default=True,
              help="true/false: with -p, print the bodies.")  # fmt: skip
@click.option("-f", "--calculate", "by_tag", type=click.BOOL, default=False, show_default=True,
              help="true/false: count the messages by tag.")  # fmt: skip
@options
def print_msg_by_queue(
    topic: str, broker_name: str, queue_id: int, charset: str, sub_expression: str,
    begin: int | None, end: int | None, print_messages: bool, print_body: bool, by_tag: bool,
    namesrv: str, as_json: bool,
) -> None:  # fmt: skip
    """One queue's messages in a time range, listed and/or counted by tag (mqadmin
    printMsgByQueue)."""
    with open_admin(namesrv) as a:
        (queue,) = a.queue_ranges(topic, begin, end, broker_name, queue_id)
        msgs = _with_text(_read(a, queue, sub_expression), charset, print_body)
    tags = Counter(m["tags"] for m in msgs if m.get("tags"))
    ranked = sorted(tags.items(), key=lambda kv: (-kv[1], kv[0]))  # most first, as mqadmin
    if as_json:
        result: dict[str, Any] = {**queue, "count": len(msgs)}
        if print_messages:
            result["messages"] = msgs
        if by_tag:
            result["tagCounts"] = dict(ranked)
        print_json(result)
        return
    if print_messages:
        _show_queue(queue, msgs, charset, print_body)
    else:
        click.echo(_summary(queue, msgs))
    if by_tag:
        for tag, count in ranked:
            click.echo(f"Tag: {tag:<30} Count: {count}")


@admin.command("query-msg-by-offset")
@click.option("-t", "--topic", required=True)
@click.option("-b", "--broker-name", required=True)
@click.option("-i", "--queue-id", type=click.IntRange(0), required=True)
@click.option("-o", "--offset", type=click.IntRange(0), required=True, help="Queue offset.")
@click.option("-f", "--body-format", "charset", default="UTF-8", show_default=True,
              callback=_charset, help="Charset to print the body in.")  # fmt: skip
@options
def query_msg_by_offset(
    topic: str, broker_name: str, queue_id: int, offset: int, charset: str, namesrv: str,
    as_json: bool,
) -> None:  # fmt: skip
    """The message at a queue offset (mqadmin queryMsgByOffset), shown as query-msg-by-id
    shows one."""
    with open_admin(namesrv) as a:
        msg = a.query_msg_by_offset(topic, broker_name, queue_id, offset)
    if as_json:
        print_json({**msg, "bodyText": body_preview(msg, charset, full=True)})
    else:
        show_message(msg, charset)
