"""``shmq admin pop-status``: per POP consumer group and topic, the messages in flight
(popped, still invisible), the revive backlog, the POP retry topic's backlog and what was
acked, revived and dead-lettered; registered on the ``admin`` group by ``shmq_cli.admin``."""

from __future__ import annotations

import click

from shmq_cli.admin import admin
from shmq_cli.admin.output import open_admin, options, print_json, show


@admin.command("pop-status")
@click.option("-g", "--group", help="Only this consumer group.")
@click.option("-b", "--broker", help="Broker name or address (default: every master).")
@click.option("-c", "--cluster", help="Cluster name.")
@options
def pop_status(
    group: str | None, broker: str | None, cluster: str | None, namesrv: str, as_json: bool
) -> None:
    """POP consumption (SimpleConsumer, RocketMQ 5 clients) per group and topic: in-flight
    messages, revive backlog, retries, and where each queue's next pop begins."""
    with open_admin(namesrv) as a:
        rows = a.pop_status(group, broker, cluster)
    if as_json:
        print_json(rows)
        return
    table = [[r["group"], r["topic"], r["brokerName"], r["inFlight"], r["reviveBacklog"],
              r["retryBacklog"], r["acked"], r["revived"], r["dlq"],
              " ".join(f"{q}:{o}" for q, o in sorted(r["popOffsets"].items(),
                                                     key=lambda i: int(i[0])))]
             for r in rows]  # fmt: skip
    columns = ["group", "topic", "broker", "in flight", "revive backlog", "retry backlog",
               "acked", "revived", "dlq", "pop offsets"]  # fmt: skip
    show(columns, table, f"{len({r['group'] for r in rows})} POP group(s)")
