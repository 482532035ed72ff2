"""``shmq admin query-cq`` (mqadmin ``queryCq``), ``consume-time-span``, ``system-topics``,
``clean-unused-topic``, ``clean-expired-cq`` and ``delete-expired-commitlog``: a queue's
consume-queue units, a group's consume times per queue, the brokers' system topics, purging
topics no config names, and expired files deleted now; registered on the ``admin`` group by
``shmq_cli.admin``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from shmq_cli.admin import admin
from shmq_cli.admin.output import local_time, open_admin, options, print_json, show


def broker_or_cluster(f: Callable[..., Any]) -> Callable[..., Any]:
    """``-b`` / ``-c``: the brokers a command asks (default: every master)."""
    f = click.option("-c", "--cluster", help="Cluster name.")(f)
    return click.option("-b", "--broker", help="Broker name or address (default: every master).")(f)


@admin.command("query-cq")
@click.option("-t", "--topic", required=True)
@click.option("-q", "--queue", "queue_id", type=click.IntRange(0), required=True, help="Queue id.")
@click.option("-i", "--index", type=click.IntRange(0), required=True, help="First queue offset.")
@click.option("-c", "--count", type=click.IntRange(1, 10_000), default=10, show_default=True)
@click.option("-g", "--group", help="Show this consumer group's subscription and tag match.")
@click.option("-b", "--broker", help="Broker name or address (needed when several serve it).")
@options
def query_cq(
    topic: str, queue_id: int, index: int, count: int, group: str | None,
    broker: str | None, namesrv: str, as_json: bool,
) -> None:  # fmt: skip
    """A queue's consume-queue units: CommitLog offset, size, tags code (mqadmin queryCq)."""
    with open_admin(namesrv) as a:
        body = a.query_consume_queue(topic, queue_id, index, count, group, broker)
    if as_json:
        print_json(body)
        return
    title = f"{topic}:{queue_id} offsets [{body['minQueueIndex']}, {body['maxQueueIndex']})"
    if group is not None:
        click.echo(f"subscription of {group}: {body.get('subscriptionData')}")
        click.echo(f"filter data: {body.get('filterData')}")
    if "remark" in body:
        click.echo(body["remark"])
    rows = [
        [index + i, u["physicOffset"], u["physicSize"], u["tagsCode"], u["eval"]]
        for i, u in enumerate(body.get("queueData", []))
    ]
    show(["queue offset", "CommitLog offset", "size", "tags code", "eval"], rows, title)


@admin.command("consume-time-span")
@click.option("-t", "--topic", required=True)
@click.option("-g", "--group", required=True, help="Consumer group.")
@options
def consume_time_span(topic: str, group: str, namesrv: str, as_json: bool) -> None:
    """Per queue: the store times of the first, last and last consumed message, and how
    long the next one has waited (RocketMQ's queryConsumeTimeSpan)."""
    with open_admin(namesrv) as a:
        rows = a.consume_time_span(topic, group)
    if as_json:
        print_json([{**r, "message_queue": r["message_queue"]._asdict()} for r in rows])
        return
    show(
        ["broker", "queue", "first stored", "last stored", "last consumed", "delay ms"],
        [[r["message_queue"].broker_name, r["message_queue"].queue_id,
          _time(r["min_timestamp"]), _time(r["max_timestamp"]),
          _time(r["consume_timestamp"]), r["delay_ms"]] for r in rows],
        f"group {group} on {topic}",
    )  # fmt: skip


@admin.command("system-topics")
@broker_or_cluster
@options
def system_topics(broker: str | None, cluster: str | None, namesrv: str, as_json: bool) -> None:
    """The brokers' system topics (RocketMQ's, and each broker's cluster and name)."""
    with open_admin(namesrv) as a:
        topics = a.system_topics(broker, cluster)
    if as_json:
        print_json(topics)
        return
    show(["system topic"], [[t] for t in topics])


@admin.command("clean-unused-topic")
@broker_or_cluster
@options
def clean_unused_topic(
    broker: str | None, cluster: str | None, namesrv: str, as_json: bool
) -> None:
    """Purge the stored messages of topics no topic config names (mqadmin cleanUnusedTopic)."""
    with open_admin(namesrv) as a:
        _purged(a.clean_unused_topic(broker, cluster), as_json, "nothing unused")


@admin.command("clean-expired-cq")
@broker_or_cluster
@options
def clean_expired_cq(broker: str | None, cluster: str | None, namesrv: str, as_json: bool) -> None:
    """Purge the consume queues of topics no topic config names whose messages all expired
    (mqadmin cleanExpiredCQ)."""
    with open_admin(namesrv) as a:
        _purged(a.clean_expired_consume_queue(broker, cluster), as_json, "nothing expired")


@admin.command("delete-expired-commitlog")
@broker_or_cluster
@options
def delete_expired_commitlog(
    broker: str | None, cluster: str | None, namesrv: str, as_json: bool
) -> None:
    """Delete expired CommitLog files now, whatever deleteWhen says (mqadmin
    deleteExpiredCommitLog); files newer than fileReservedTime stay."""
    with open_admin(namesrv) as a:
        asked = a.delete_expired_commitlog(broker, cluster)
    if as_json:
        print_json(asked)
        return
    for name in asked:
        click.echo(f"{name}: deleting expired CommitLog files")


def _purged(purged: dict[str, list[str]], as_json: bool, none: str) -> None:
    if as_json:
        print_json(purged)
        return
    for name, topics in purged.items():
        click.echo(f"{name}: purged {', '.join(topics)}" if topics else f"{name}: {none}")


def _time(ms: int) -> str:
    return "-" if ms < 0 else local_time(ms)
