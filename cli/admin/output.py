"""What the ``shmq admin`` commands share: the ``-n``/``--json`` options and the
connection's (``connection``: credentials, TLS), an ``Admin`` for the command, and the output
(JSON, or rich tables with mqadmin's time format and message layout), plus mqadmin's
timestamp forms as a click parameter type."""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import click

from shmq_cli.connection import client_options, connection_options

DEFAULT_NAMESRV = "127.0.0.1:9876"
BODY_PREVIEW = 200  # characters of a body shown in tables


def options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = connection_options(f)
    f = click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts).")(f)
    return click.option(
        "-n", "--namesrv", default=DEFAULT_NAMESRV, show_default=True,
        help="Namesrv address(es), ';'-separated.",
    )(f)  # fmt: skip


@contextlib.contextmanager
def open_admin(namesrv: str) -> Iterator[Any]:
    from shmq.client.admin.admin import Admin

    with Admin(namesrv, **client_options()) as admin:
        yield admin


def print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


def console():
    from rich.console import Console

    return Console()


def table(columns: list[str], rows: list[list[Any]], title: str | None = None):
    from rich.table import Table

    table = Table(*columns, title=title)
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row))
    return table


def show(columns: list[str], rows: list[list[Any]], title: str | None = None) -> None:
    console().print(table(columns, rows, title))


def show_configs(configs: dict[str, dict[str, str]], kind: str) -> None:
    """One key/value table per server (a broker's or a namesrv's config)."""
    for name, config in configs.items():
        show(["key", "value"], [[k, v] for k, v in sorted(config.items())], f"{kind} {name}")


def show_pairs(pairs: dict[str, Any], title: str | None = None) -> None:
    show(["field", "value"], [[k, v] for k, v in pairs.items()], title)


def local_time(ms: int) -> str:
    """Local time with milliseconds, as mqadmin prints it; '-' for 0."""
    if not ms:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def parse_timestamp(text: str) -> int:
    """A timestamp option: ms since the epoch (-1: the end of the queues), ``now``,
    ``yyyyMMddHHmmss``, mqadmin's ``yyyy-MM-dd#HH:mm:ss:SSS`` or ISO 8601; local time
    unless a zone is given."""
    text = text.strip()
    if text.lower() == "now":
        return int(time.time() * 1000)
    try:
        if re.fullmatch(r"\d{14}", text):
            return epoch_ms(dt.datetime.strptime(text, "%Y%m%d%H%M%S"))
        if re.fullmatch(r"-?\d+", text):
            return int(text)
        if "#" in text:
            return epoch_ms(dt.datetime.strptime(text, "%Y-%m-%d#%H:%M:%S:%f"))
        return epoch_ms(dt.datetime.fromisoformat(text))
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is not a timestamp: give milliseconds, 'now', yyyyMMddHHmmss,"
            " yyyy-MM-dd#HH:mm:ss:SSS or ISO 8601 (2024-05-01T12:00:00)"
        ) from None


def epoch_ms(when: dt.datetime) -> int:
    return int(when.timestamp() * 1000)  # a naive time is local, as mqadmin's


class TimestampType(click.ParamType):
    name = "TIMESTAMP"

    def convert(self, value: Any, param: Any, ctx: Any) -> int:
        return value if isinstance(value, int) else parse_timestamp(str(value))


TIMESTAMP = TimestampType()


def body_preview(msg: dict[str, Any], charset: str = "utf-8", full: bool = False) -> str:
    """The body decoded in ``charset`` (bytes that do not decode replaced), cut for a
    table unless ``full``."""
    text = base64.b64decode(msg.get("body", "")).decode(charset, "replace")
    return text if full or len(text) <= BODY_PREVIEW else text[: BODY_PREVIEW - 3] + "..."


def show_messages(messages: list[dict[str, Any]]) -> None:
    columns = ["msgId", "queue", "offset", "tags", "keys", "store time", "body"]
    rows = [
        [
            m["msgId"],
            m["queueId"],
            m["queueOffset"],
            m.get("tags") or "",
            " ".join(m.get("keys", [])),
            local_time(m["storeTimestamp"]),
            body_preview(m),
        ]
        for m in messages
    ]
    show(columns, rows, f"{len(messages)} message(s)")


def show_message(m: dict[str, Any], charset: str = "utf-8") -> None:
    props = {k: v for k, v in m.get("properties", {}).items() if k not in ("TAGS", "KEYS")}
    show_pairs(
        {
            "OffsetID": m["offsetMsgId"],
            "Topic": m["topic"],
            "Tags": m.get("tags") or "",
            "Keys": " ".join(m.get("keys", [])),
            "Queue ID": m["queueId"],
            "Queue Offset": m["queueOffset"],
            "CommitLog Offset": m["commitLogOffset"],
            "Reconsume Times": m.get("reconsumeTimes", 0),
            "Born Timestamp": local_time(m["bornTimestamp"]),
            "Store Timestamp": local_time(m["storeTimestamp"]),
            "Born Host": m["bornHost"],
            "Store Host": m["storeHost"],
            "Properties": json.dumps(props, ensure_ascii=False),
            "Message Body": body_preview(m, charset),
        },
        f"message {m['msgId']}",
    )
