"""``shmq admin get-controller-meta-data``, ``elect-master``, ``clean-broker-metadata`` and
``get-broker-epoch`` (RocketMQ 5's mqadmin ``getControllerMetaData``, ``electMaster``,
``cleanBrokerMetadata`` and ``getBrokerEpoch``): a controller's group and its elections,
and the brokers' epochs. They need controller mode; where it is not enabled they fail
saying so, as RocketMQ's answer; registered on the ``admin`` group by ``shmq_cli.admin``."""

from __future__ import annotations

import click

from shmq_cli.admin import admin
from shmq_cli.admin.output import open_admin, options, print_json

_CONTROLLER = click.option("-a", "--controller-address", "controller", required=True,
                           help="The controller's address (host:port).")  # fmt: skip


@admin.command("get-controller-meta-data")
@_CONTROLLER
@options
def get_controller_meta_data(controller: str, namesrv: str, as_json: bool) -> None:
    """The controller group: its leader and peers (mqadmin getControllerMetaData)."""
    with open_admin(namesrv) as a:
        meta = a.controller_meta_data(controller)
    if as_json:
        print_json(meta)
        return
    click.echo(f"#ControllerGroup\t{meta.get('group')}")
    click.echo(f"#ControllerLeaderId\t{meta.get('controllerLeaderId')}")
    click.echo(f"#ControllerLeaderAddress\t{meta.get('controllerLeaderAddress')}")
    for peer in filter(None, (meta.get("peers") or "").split(";")):
        click.echo(f"#Peer:\t{peer}")


@admin.command("elect-master")
@_CONTROLLER
@click.option("-c", "--cluster-name", required=True)
@click.option("-bn", "--broker-name", required=True)
@click.option("-b", "--broker-id", type=click.IntRange(0), required=True,
              help="The broker id to make master.")  # fmt: skip
@options
def elect_master(
    controller: str, cluster_name: str, broker_name: str, broker_id: int, namesrv: str,
    as_json: bool,
) -> None:  # fmt: skip
    """Make a broker of a group its master (mqadmin electMaster)."""
    with open_admin(namesrv) as a:
        result = a.elect_master(controller, cluster_name, broker_name, broker_id)
    if as_json:
        print_json(result)
        return
    click.echo(f"#ClusterName\t{cluster_name}")
    click.echo(f"#BrokerName\t{broker_name}")
    click.echo(f"#BrokerMasterAddr\t{result.get('masterAddress')}")
    click.echo(f"#MasterEpoch\t{result.get('masterEpoch')}")
    click.echo(f"#SyncStateSetEpoch\t{result.get('syncStateSetEpoch')}")
    members = (result.get("brokerMemberGroup") or {}).get("brokerAddrs") or {}
    for member_id, addr in members.items():
        click.echo(f"\t#Broker\t{member_id}\t{addr}")


@admin.command("clean-broker-metadata")
@_CONTROLLER
@click.option("-bn", "--broker-name", required=True)
@click.option("-b", "--broker-controller-ids-to-clean", "broker_ids",
              help="Broker ids to forget, '1;2;3' (default: all).")  # fmt: skip
@click.option("-c", "--cluster-name")
@click.option("-l", "--clean-living-broker", is_flag=True, help="Also brokers still alive.")
@options
def clean_broker_metadata(
    controller: str, broker_name: str, broker_ids: str | None, cluster_name: str | None,
    clean_living_broker: bool, namesrv: str, as_json: bool,
) -> None:  # fmt: skip
    """Have the controller forget a broker group's members (mqadmin cleanBrokerMetadata)."""
    with open_admin(namesrv) as a:
        a.clean_broker_metadata(controller, broker_name, broker_ids, cluster_name,
                                clean_living_broker)  # fmt: skip
    if as_json:
        print_json({"brokerName": broker_name, "cleaned": True})
    else:
        click.echo(f"clear broker {broker_name} metadata from controller success!")


@admin.command("get-broker-epoch")
@click.option("-b", "--broker-name", help="This broker group only.")
@click.option("-c", "--cluster-name", help="The brokers of this cluster (default: all).")
@options
def get_broker_epoch(
    broker_name: str | None, cluster_name: str | None, namesrv: str, as_json: bool
) -> None:
    """Each broker's epochs: the masters it held data of, from which CommitLog offset
    (mqadmin getBrokerEpoch)."""
    with open_admin(namesrv) as a:
        rows = a.broker_epoch(broker_name, cluster_name)
    if as_json:
        print_json(rows)
        return
    for r in rows:
        click.echo(f"#clusterName\t{r['clusterName']}\n#brokerName\t{r['brokerName']}\n"
                   f"#brokerAddr\t{r['brokerAddr']}\n#brokerId\t{r['brokerId']}")  # fmt: skip
        for e in r["epochList"]:
            click.echo(f"#Epoch: EpochEntry{{epoch={e['epoch']}, startOffset={e['startOffset']},"
                       f" endOffset={e['endOffset']}}}")  # fmt: skip
