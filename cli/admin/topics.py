"""``shmq admin update-topic-perm``, ``topic-cluster-list`` and ``allocate-mq`` (mqadmin
``updateTopicPerm``, ``topicClusterList`` and ``allocateMQ``): a topic's permission changed
with its queue counts kept, the clusters serving it, and how consumers would share its
queues; registered on the ``admin`` group by ``shmq_cli.admin``."""

from __future__ import annotations

import click

from shmq_cli.admin import admin
from shmq_cli.admin.output import open_admin, options, print_json, show


@admin.command("update-topic-perm")
@click.option("-t", "--topic", required=True)
@click.option("-p", "--perm", type=click.Choice(["2", "4", "6"]), required=True,
              help="2 write only, 4 read only, 6 read and write.")  # fmt: skip
@click.option("-b", "--broker", help="Broker name or address (default: the whole cluster).")
@click.option("-c", "--cluster", help="Cluster name (default: the only cluster).")
@options
def update_topic_perm(
    topic: str, perm: str, broker: str | None, cluster: str | None, namesrv: str, as_json: bool
) -> None:
    """Change a topic's permission on its brokers, keeping their queue counts (mqadmin
    updateTopicPerm)."""
    with open_admin(namesrv) as a:
        rows = a.update_topic_perm(topic, int(perm), broker, cluster)
    if as_json:
        print_json(rows)
        return
    for r in rows:
        if r["changed"]:
            click.echo(f"update topic perm from {r['oldPerm']} to {r['perm']} in"
                       f" {r['brokerName']} ({r['brokerAddr']}) success: {r['readQueueNums']}"
                       f" read / {r['writeQueueNums']} write queues")  # fmt: skip
        else:
            click.echo(f"{r['brokerName']} ({r['brokerAddr']}): new perm equals to the old one!")


@admin.command("topic-cluster-list")
@click.option("-t", "--topic", required=True)
@options
def topic_cluster_list(topic: str, namesrv: str, as_json: bool) -> None:
    """The clusters whose brokers serve a topic (mqadmin topicClusterList)."""
    with open_admin(namesrv) as a:
        clusters = a.topic_cluster_list(topic)
    if as_json:
        print_json(clusters)
    else:
        for cluster in clusters:
            click.echo(cluster)


@admin.command("allocate-mq")
@click.option("-t", "--topic", required=True)
@click.option("-i", "--ip-list", required=True,
              help="Comma-separated client ids (or IPs) of the consumers.")  # fmt: skip
@options
def allocate_mq(topic: str, ip_list: str, namesrv: str, as_json: bool) -> None:
    """How a group of these consumers would share a topic's queues by the default
    strategy, AllocateMessageQueueAveragely (mqadmin allocateMQ)."""
    clients = [c.strip() for c in ip_list.split(",") if c.strip()]
    if not clients:
        raise click.BadParameter("give at least one client id", param_hint="-i")
    with open_admin(namesrv) as a:
        result = a.allocate_mq(topic, clients)
    if as_json:
        print_json({"result": result})
        return
    rows = [[cid, q["brokerName"], q["queueId"]] for cid, qs in result.items() for q in qs]
    show(["client", "broker", "queue"], rows, f"{topic} shared by {len(clients)} consumer(s)")
