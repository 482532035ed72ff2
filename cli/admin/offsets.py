"""``shmq admin reset-offset-by-time``, ``skip-accumulated-message``, ``clone-group-offset``,
``get-consumer-status`` and ``broker-consume-stats`` (mqadmin ``resetOffsetByTime``,
``skipAccumulatedMessage``, ``cloneGroupOffset``, ``getConsumerStatus`` and
``brokerConsumeStats``): consumer groups' offsets, moved, skipped to the end, copied, asked
of the members or shown for a whole broker; registered on the ``admin`` group by
``shmq_cli.admin``."""

from __future__ import annotations

import click

from shmq_cli.admin import admin
from shmq_cli.admin.output import TIMESTAMP, local_time, open_admin, options, print_json, show


@admin.command("reset-offset-by-time")
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-t", "--topic", required=True)
@click.option("-s", "--timestamp", type=TIMESTAMP, required=True,
              help="ms, now, -1 (end), yyyyMMddHHmmss, yyyy-MM-dd#HH:mm:ss:SSS, ISO.")  # fmt: skip
@click.option("-f", "--force/--no-force", default=True,
              help="Also move offsets forward (default), or only back.")  # fmt: skip
@options
def reset_offset_by_time(
    group: str, topic: str, timestamp: int, force: bool, namesrv: str, as_json: bool
) -> None:
    """Move a group's offsets to a point in time (mqadmin resetOffsetByTime)."""
    with open_admin(namesrv) as a:
        table = a.reset_offset(group, topic, timestamp, force)
    _show_offsets(table, as_json, f"group {group} on {topic} reset to {timestamp}")


@admin.command("skip-accumulated-message")
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-t", "--topic", required=True)
@click.option("-f", "--force", type=click.BOOL, default=True, show_default=True,
              help="true/false: also move offsets that are past the end.")  # fmt: skip
@click.option("-c", "--cluster", help="Only the brokers of this cluster.")
@options
def skip_accumulated_message(
    group: str, topic: str, force: bool, cluster: str | None, namesrv: str, as_json: bool
) -> None:
    """Skip a group's backlog: its offsets moved to the end of every queue of the topic
    (mqadmin skipAccumulatedMessage)."""
    with open_admin(namesrv) as a:
        table = a.skip_accumulated_message(group, topic, force, cluster)
    _show_offsets(table, as_json, f"group {group} on {topic} skipped to the end")


def _show_offsets(table: dict, as_json: bool, title: str) -> None:
    """A reset's resulting offset per queue (``brokerName``, ``queueId``, ``offset``)."""
    entries = [
        {"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": off}
        for mq, off in table.items()
    ]
    if as_json:
        print_json(entries)
        return
    rows = [[e["brokerName"], e["queueId"], e["offset"]] for e in entries]
    show(["broker", "queue", "offset"], rows, title)


@admin.command("clone-group-offset")
@click.option("-s", "--src-group", required=True, help="The group whose offsets are copied.")
@click.option("-d", "--dest-group", required=True, help="The group that gets them.")
@click.option("-t", "--topic", required=True)
@click.option("-o", "--offline", is_flag=True,
              help="Copy even where the source group is online without this topic.")  # fmt: skip
@options
def clone_group_offset(
    src_group: str, dest_group: str, topic: str, offline: bool, namesrv: str, as_json: bool
) -> None:
    """Give a group a copy of another group's committed offsets on a topic (mqadmin
    cloneGroupOffset): the new group starts where the old one stands."""
    with open_admin(namesrv) as a:
        brokers = a.clone_group_offset(src_group, dest_group, topic, offline)
    if as_json:
        print_json({"srcGroup": src_group, "destGroup": dest_group, "topic": topic,
                    "brokers": brokers})  # fmt: skip
    else:
        click.echo(f"offsets of {src_group} on {topic} cloned to {dest_group} on "
                   f"{', '.join(brokers)}")  # fmt: skip


@admin.command("get-consumer-status")
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-t", "--topic", required=True)
@click.option("-i", "--client-id", help="Only this member (default: every online member).")
@options
def get_consumer_status(
    group: str, topic: str, client_id: str | None, namesrv: str, as_json: bool
) -> None:
    """The offsets each online member of a group holds on a topic (mqadmin
    getConsumerStatus)."""
    with open_admin(namesrv) as a:
        members = a.consumer_offsets(group, topic, client_id)
    if as_json:
        print_json({member: [{"topic": mq.topic, "brokerName": mq.broker_name,
                              "queueId": mq.queue_id, "offset": offset}
                             for mq, offset in table.items()]
                    for member, table in members.items()})  # fmt: skip
        return
    rows = [[member, mq.broker_name, mq.queue_id, offset]
            for member, table in members.items() for mq, offset in table.items()]  # fmt: skip
    show(["client id", "broker", "queue", "offset"], rows, f"group {group} on {topic}")


@admin.command("broker-consume-stats")
@click.option("-b", "--broker", help="Broker name or address (default: every master).")
@click.option("-c", "--cluster", help="Cluster name.")
@click.option("-o", "--order", "order_only", is_flag=True, help="Ordered topics only.")
@click.option("-l", "--level", type=int, default=0, show_default=True,
              help="Show the queues whose diff is at least this.")  # fmt: skip
@options
def broker_consume_stats(
    broker: str | None, cluster: str | None, order_only: bool, level: int, namesrv: str,
    as_json: bool,
) -> None:  # fmt: skip
    """Every subscription group's progress on a broker: per queue its broker and consumer
    offsets and diff (mqadmin brokerConsumeStats)."""
    with open_admin(namesrv) as a:
        stats = a.broker_consume_stats(broker, cluster, order_only)
    if as_json:
        print_json({name: {**s, "groups": {g: [q.to_json() for q in qs]
                                           for g, qs in s["groups"].items()}}
                    for name, s in stats.items()})  # fmt: skip
        return
    for name, s in stats.items():
        rows = [
            [q.topic, group, q.broker_name, q.queue_id, q.broker_offset, q.consumer_offset,
             q.diff, local_time(q.last_timestamp)]
            for group, queues in s["groups"].items()
            for q in queues
            if q.diff >= level
        ]  # fmt: skip
        columns = ["topic", "group", "broker", "queue", "broker offset", "consumer offset",
                   "diff", "last time"]  # fmt: skip
        show(columns, rows, f"broker {name} ({s['brokerAddr']})")
        click.echo(f"Diff Total: {s['totalDiff']}")
