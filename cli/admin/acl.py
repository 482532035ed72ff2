"""``shmq admin update-acl-config``, ``delete-acl-config``, ``cluster-acl-config-version``
and ``update-global-white-addr``: mqadmin's ACL 1.0 commands (``updateAclConfig``,
``deleteAclConfig``, ``clusterAclConfigVersion``, ``updateGlobalWhiteAddr``) with their
flags, against one broker (``-b``) or a cluster's masters (``-c``); registered on the
``admin`` group by ``shmq_cli.admin``. The account a command manages is ``-a`` /
``--account-access-key``: ``--access-key`` signs the command itself, as for every admin
command."""

from __future__ import annotations

import click

from shmq_cli.admin import admin
from shmq_cli.admin.output import local_time, open_admin, options, print_json, show


def _targets(f):
    f = click.option("-c", "--cluster", help="Every master of this cluster.")(f)
    return click.option("-b", "--broker", help="One broker (name or address).")(f)


def _done(as_json: bool, what: str, brokers: list[str], **fields: object) -> None:
    if as_json:
        print_json({**fields, "brokers": brokers})
    else:
        click.echo(f"{what} on {', '.join(brokers)}")


def _split(text: str | None) -> list[str] | None:
    return None if text is None else [t.strip() for t in text.split(",") if t.strip()]


@admin.command("update-acl-config")
@click.option("-a", "--account-access-key", "account", required=True,
              help="The account's accessKey (--access-key: the caller's own).")  # fmt: skip
@click.option("-s", "--account-secret-key", "account_secret", required=True, help="Its secretKey.")
@click.option("-w", "--white-remote-address", help="Addresses that skip its checks.")
@click.option("-i", "--default-topic-perm", help="DENY, PUB, SUB or PUB|SUB.")
@click.option("-u", "--default-group-perm", help="DENY, PUB, SUB or PUB|SUB.")
@click.option("-t", "--topic-perms", help="topicA=DENY,topicB=PUB|SUB")
@click.option("-g", "--group-perms", help="groupA=DENY,groupB=SUB")
@click.option("-m", "--admin", "is_admin", type=click.BOOL, default=False, help="true: admin.")
@_targets
@options
def update_acl_config(account: str, account_secret: str, white_remote_address: str | None,
                      default_topic_perm: str | None, default_group_perm: str | None,
                      topic_perms: str | None, group_perms: str | None, is_admin: bool,
                      broker: str | None, cluster: str | None, namesrv: str,
                      as_json: bool) -> None:  # fmt: skip
    """Create or update an ACL account in the brokers' plain_acl.yml (updateAclConfig)."""
    with open_admin(namesrv) as a:
        brokers = a.update_acl_config(
            account, account_secret, white_remote_address=white_remote_address,
            default_topic_perm=default_topic_perm, default_group_perm=default_group_perm,
            topic_perms=_split(topic_perms), group_perms=_split(group_perms), admin=is_admin,
            broker=broker, cluster=cluster,
        )  # fmt: skip
    _done(as_json, f"ACL account {account} updated", brokers, accessKey=account)


@admin.command("delete-acl-config")
@click.option("-a", "--account-access-key", "account", required=True,
              help="The account's accessKey (--access-key: the caller's own).")  # fmt: skip
@_targets
@options
def delete_acl_config(account: str, broker: str | None, cluster: str | None, namesrv: str,
                      as_json: bool) -> None:  # fmt: skip
    """Delete an ACL account from the brokers' plain_acl.yml (deleteAclConfig)."""
    with open_admin(namesrv) as a:
        brokers = a.delete_acl_config(account, broker=broker, cluster=cluster)
    _done(as_json, f"ACL account {account} deleted", brokers, accessKey=account)


@admin.command("update-global-white-addr")
@click.option("-g", "--global-white-remote-addresses", "addresses", required=True,
              help="Comma-separated address patterns (replace the list).")  # fmt: skip
@click.option("-p", "--acl-file-full-path", "acl_file", help="The broker's ACL file.")
@_targets
@options
def update_global_white_addr(addresses: str, acl_file: str | None, broker: str | None,
                             cluster: str | None, namesrv: str, as_json: bool) -> None:  # fmt: skip
    """Replace the brokers' globalWhiteRemoteAddresses (updateGlobalWhiteAddr)."""
    listed = _split(addresses) or []
    with open_admin(namesrv) as a:
        brokers = a.update_global_white_addrs(listed, acl_file=acl_file, broker=broker,
                                              cluster=cluster)  # fmt: skip
    _done(as_json, "global white addresses updated", brokers, globalWhiteRemoteAddresses=listed)


@admin.command("cluster-acl-config-version")
@_targets
@options
def cluster_acl_config_version(broker: str | None, cluster: str | None, namesrv: str,
                               as_json: bool) -> None:  # fmt: skip
    """Each broker's ACL file version (clusterAclConfigVersion / getAclConfigVersion)."""
    with open_admin(namesrv) as a:
        rows = a.acl_config_version(broker, cluster)
    if as_json:
        print_json(rows)
        return
    show(["cluster", "broker", "address", "counter", "timestamp"],
         [[r["clusterName"], r["brokerName"], r["brokerAddr"], r["version"].get("counter"),
           local_time(r["version"].get("timestamp") or 0)] for r in rows])  # fmt: skip
