"""``shmq admin get-broker-config`` and ``update-broker-config`` (mqadmin ``getBrokerConfig``
and ``updateBrokerConfig``), registered on the ``admin`` group by ``shmq_cli.admin``."""

from __future__ import annotations

import click

from shmq_cli.admin import admin
from shmq_cli.admin.output import open_admin, options, print_json, show_configs


@admin.command("get-broker-config")
@click.option("-b", "--broker", help="Broker name or address (default: every master).")
@click.option("-c", "--cluster", help="Cluster name.")
@options
def get_broker_config(broker: str | None, cluster: str | None, namesrv: str, as_json: bool) -> None:
    """Every broker and store key with its value, as the broker runs (mqadmin
    getBrokerConfig)."""
    with open_admin(namesrv) as a:
        configs = a.broker_config(broker, cluster)
    if as_json:
        print_json(configs)
        return
    show_configs(configs, "broker")


@admin.command("update-broker-config")
@click.option("-k", "--key", required=True, help="Config key, e.g. brokerPermission.")
@click.option("-v", "--value", required=True, help="Its new value.")
@click.option("-b", "--broker", help="Broker name or address (default: every master).")
@click.option("-c", "--cluster", help="Cluster name.")
@options
def update_broker_config(
    key: str, value: str, broker: str | None, cluster: str | None, namesrv: str, as_json: bool
) -> None:
    """Change one key on each master (mqadmin updateBrokerConfig). brokerPermission,
    longPollingEnable, shortPollingTimeMills, slaveReadEnable and autoCreateSubscriptionGroup
    act at once; any other key is written to the broker's config file and acts when the
    broker restarts."""
    with open_admin(namesrv) as a:
        remarks = a.update_broker_config(key, value, broker, cluster)
    if as_json:
        print_json({name: {"key": key, "value": value, "remark": r} for name, r in remarks.items()})
        return
    for name, remark in remarks.items():
        click.echo(f"broker {name}: {key}={value} " + (f"({remark})" if remark else "applied"))
