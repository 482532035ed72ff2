"""``shmq admin`` commands served by the namesrvs: the KV config (mqadmin ``updateKvConfig``,
``deleteKvConfig``, plus ``get-kv-config`` and ``kv-list`` to read it), ordered topics
(``updateOrderConf``), a cluster's topics and a broker's write permission in the routes
(``wipeWritePerm``, ``addWritePerm``) and their own settings (``getNamesrvConfig``,
``updateNamesrvConfig``). Registered on the ``admin`` group by
``shmq_cli.admin``; the client is imported inside the commands (``open_admin``)."""

from __future__ import annotations

import click

from shmq.errors import ClientError
from shmq.names import NAMESPACE_ORDER_TOPIC_CONFIG
from shmq_cli.admin import admin
from shmq_cli.admin.output import open_admin, options, print_json, show, show_configs

_NAMESPACE = click.option("-s", "--namespace", required=True, help="KV config namespace.")
_KEY = click.option("-k", "--key", required=True, help="Key name.")
_BROKER_NAME = click.option("-b", "--broker-name", required=True, help="Broker name.")


@admin.command("update-kv-config")
@_NAMESPACE
@_KEY
@click.option("-v", "--value", required=True, help="Its value.")
@options
def update_kv_config(namespace: str, key: str, value: str, namesrv: str, as_json: bool) -> None:
    """Create or update a KV config entry on every namesrv (mqadmin updateKvConfig)."""
    with open_admin(namesrv) as a:
        a.update_kv_config(namespace, key, value)
    if as_json:
        print_json({"namespace": namespace, "key": key, "value": value})
    else:
        click.echo("create or update kv config to namespace success.")


@admin.command("delete-kv-config")
@_NAMESPACE
@_KEY
@options
def delete_kv_config(namespace: str, key: str, namesrv: str, as_json: bool) -> None:
    """Delete a KV config entry from every namesrv (mqadmin deleteKvConfig)."""
    with open_admin(namesrv) as a:
        a.delete_kv_config(namespace, key)
    if as_json:
        print_json({"namespace": namespace, "key": key})
    else:
        click.echo("delete kv config from namespace success.")


@admin.command("get-kv-config")
@_NAMESPACE
@_KEY
@options
def get_kv_config(namespace: str, key: str, namesrv: str, as_json: bool) -> None:
    """A KV config value (no mqadmin twin; its GET_KV_CONFIG); a missing one is an error."""
    with open_admin(namesrv) as a:
        value = a.get_kv_config(namespace, key)
    if value is None:
        raise ClientError(f"No config item, Namespace: {namespace} Key: {key}")
    if as_json:
        print_json({"namespace": namespace, "key": key, "value": value})
    else:
        click.echo(value)


@admin.command("kv-list")
@_NAMESPACE
@options
def kv_list(namespace: str, namesrv: str, as_json: bool) -> None:
    """Every key and value of a KV config namespace (no mqadmin twin; its
    GET_KVLIST_BY_NAMESPACE)."""
    with open_admin(namesrv) as a:
        table = a.kv_list(namespace)
    if as_json:
        print_json(table)
    else:
        show(["key", "value"], [[k, v] for k, v in sorted(table.items())], namespace)


@admin.command("update-order-conf")
@click.option("-t", "--topic", required=True)
@click.option("-m", "--method", type=click.Choice(["put", "get", "delete"]), required=True)
@click.option("-v", "--order-conf", help="With put: brokerName1:num;brokerName2:num.")
@options
def update_order_conf(
    topic: str, method: str, order_conf: str | None, namesrv: str, as_json: bool
) -> None:
    """Create, read or delete a topic's order conf: the fixed queue list producers use for
    it, once the namesrvs run with --order-message-enable (mqadmin updateOrderConf)."""
    order_conf = (order_conf or "").strip()
    if method == "put" and not order_conf:
        raise click.UsageError("please set orderConf with option -v.")
    with open_admin(namesrv) as a:
        if method == "put":
            a.update_order_conf(topic, order_conf)
            done = f"update orderConf success. topic=[{topic}], orderConf=[{order_conf}]"
        elif method == "get":
            order_conf = a.order_conf(topic)
            if order_conf is None:  # mqadmin fails on GET_KV_CONFIG's QUERY_NOT_FOUND too
                raise ClientError(
                    f"No config item, Namespace: {NAMESPACE_ORDER_TOPIC_CONFIG} Key: {topic}"
                )
            done = f"get orderConf success. topic=[{topic}], orderConf=[{order_conf}]"
        else:
            a.delete_order_conf(topic)
            order_conf, done = None, f"delete orderConf success. topic=[{topic}]"
    if as_json:
        print_json({"topic": topic, "orderConf": order_conf})
    else:
        click.echo(done)


@admin.command("topics-by-cluster")
@click.option("-c", "--cluster", required=True, help="Cluster name.")
@options
def topics_by_cluster(cluster: str, namesrv: str, as_json: bool) -> None:
    """The topics the brokers of a cluster serve (the namesrv's GET_TOPICS_BY_CLUSTER)."""
    with open_admin(namesrv) as a:
        topics = a.topics_by_cluster(cluster)
    if as_json:
        print_json(topics)
    else:
        for topic in topics:
            click.echo(topic)


@admin.command("wipe-write-perm")
@_BROKER_NAME
@options
def wipe_write_perm(broker_name: str, namesrv: str, as_json: bool) -> None:
    """Make a broker read-only in every namesrv's routes, so producers leave it (mqadmin
    wipeWritePerm); its next registration with changed topics, or add-write-perm, undoes
    it."""
    with open_admin(namesrv) as a:
        counts = a.wipe_write_perm(broker_name)
    _show_counts("wipe", broker_name, counts, as_json)


@admin.command("add-write-perm")
@_BROKER_NAME
@options
def add_write_perm(broker_name: str, namesrv: str, as_json: bool) -> None:
    """Make a broker read-write again in every namesrv's routes (mqadmin addWritePerm)."""
    with open_admin(namesrv) as a:
        counts = a.add_write_perm(broker_name)
    _show_counts("add", broker_name, counts, as_json)


def _show_counts(verb: str, broker_name: str, counts: dict[str, int], as_json: bool) -> None:
    """Topics changed per namesrv, in mqadmin's words."""
    if as_json:
        print_json(counts)
        return
    for addr, count in counts.items():
        click.echo(f"{verb} write perm of broker[{broker_name}] in name server[{addr}] OK, {count}")


@admin.command("get-namesrv-config")
@options
def get_namesrv_config(namesrv: str, as_json: bool) -> None:
    """Each namesrv's settings (mqadmin getNamesrvConfig)."""
    with open_admin(namesrv) as a:
        configs = a.namesrv_config()
    if as_json:
        print_json(configs)
        return
    show_configs(configs, "namesrv")


@admin.command("update-namesrv-config")
@_KEY
@click.option("-v", "--value", required=True, help="Its new value.")
@options
def update_namesrv_config(key: str, value: str, namesrv: str, as_json: bool) -> None:
    """Change a setting of every running namesrv (mqadmin updateNamesrvConfig): only
    orderMessageEnable changes at run time; the rest are shmq namesrv options."""
    with open_admin(namesrv) as a:
        a.update_namesrv_config(key, value)
    if as_json:
        print_json({"key": key, "value": value})
    else:
        click.echo(f"update name server config success![{namesrv}]\n{key} : {value}")
