"""``shmq admin stats-all`` (mqadmin ``statsAll``): per topic and consumer group, the lag,
the put and get rates of the last minute and the messages put and got over the last day;
registered on the ``admin`` group by ``shmq_cli.admin``."""

from __future__ import annotations

import click

from shmq_cli.admin import admin
from shmq_cli.admin.output import open_admin, options, print_json, show


@admin.command("stats-all")
@click.option("-t", "--topic", help="This topic only.")
@click.option("-a", "--active", "active_only", is_flag=True,
              help="Topics with messages put or got over the last day only.")  # fmt: skip
@options
def stats_all(topic: str | None, active_only: bool, namesrv: str, as_json: bool) -> None:
    """Topic and consumer group TPS: put and get rates and day counts (mqadmin statsAll).
    Counted by the brokers since they started; a group's gets are the messages it read."""
    with open_admin(namesrv) as a:
        rows = a.stats_all(topic, active_only)
    if as_json:
        print_json(rows)
        return
    show(
        ["topic", "consumer group", "accumulation", "in TPS", "out TPS", "in msgs 24 h",
         "out msgs 24 h"],
        [[r["topic"], r["group"] or "", r["accumulation"], f"{r['in_tps']:.2f}",
          "" if r["group"] is None else f"{r['out_tps']:.2f}", r["in_msgs_24h"],
          "NO_CONSUMER" if r["group"] is None else r["out_msgs_24h"]] for r in rows],
    )  # fmt: skip
