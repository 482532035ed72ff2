"""Brokers' ACL 1.0 accounts and whitelists (mqadmin's ``updateAclConfig``,
``deleteAclConfig``, ``clusterAclConfigVersion``, ``updateGlobalWhiteAddr``): each call
goes to every target broker's master (``Remote.targets``), which rewrites its
``plain_acl.yml``; the account sending them must be an admin one (or come from a global
white address). ``Admin`` documents the calls.
"""

from __future__ import annotations

import json
from typing import Any

from shmq.client.admin.remote import Remote
from shmq.remoting.protocol import RequestCode


class AclConfigs:
    """The ACL admin codes over ``remote``."""

    def __init__(self, remote: Remote) -> None:
        self._remote = remote

    def update_acl_config(
        self,
        access_key: str,
        secret_key: str,
        *,
        white_remote_address: str | None = None,
        default_topic_perm: str | None = None,
        default_group_perm: str | None = None,
        topic_perms: list[str] | None = None,
        group_perms: list[str] | None = None,
        admin: bool = False,
        broker: str | None = None,
        cluster: str | None = None,
    ) -> list[str]:
        fields = {
            "accessKey": access_key,
            "secretKey": secret_key,
            "whiteRemoteAddress": white_remote_address,
            "defaultTopicPerm": default_topic_perm,
            "defaultGroupPerm": default_group_perm,
            "topicPerms": None if topic_perms is None else ",".join(topic_perms),
            "groupPerms": None if group_perms is None else ",".join(group_perms),
            "admin": "true" if admin else "false",
        }
        return self._each(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, fields, broker, cluster)

    def delete_acl_config(
        self, access_key: str, *, broker: str | None = None, cluster: str | None = None
    ) -> list[str]:
        fields = {"accessKey": access_key}
        return self._each(RequestCode.DELETE_ACL_CONFIG, fields, broker, cluster)

    def update_global_white_addrs(
        self,
        addresses: list[str],
        *,
        acl_file: str | None = None,
        broker: str | None = None,
        cluster: str | None = None,
    ) -> list[str]:
        fields = {"globalWhiteAddrs": ",".join(addresses), "aclFileFullPath": acl_file}
        return self._each(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, fields, broker, cluster)

    def acl_config_version(
        self, broker: str | None = None, cluster: str | None = None
    ) -> list[dict[str, Any]]:
        rows = []
        for target in self._remote.targets(broker, cluster):
            fields = self._remote.invoke(target, RequestCode.GET_BROKER_CLUSTER_ACL_INFO).ext_fields
            version = json.loads(fields.get("version") or "{}")
            rows.append({
                "clusterName": fields.get("clusterName", ""),
                "brokerName": fields.get("brokerName", target[0]),
                "brokerAddr": fields.get("brokerAddr", target[1]),
                "version": version,
                "allAclFileVersion": json.loads(fields.get("allAclFileVersion") or "{}"),
            })  # fmt: skip
        return rows

    def _each(
        self, code: int, fields: dict[str, Any], broker: str | None, cluster: str | None
    ) -> list[str]:
        """Send to every target; the names of the brokers that took it."""
        done = []
        for target in self._remote.targets(broker, cluster):
            self._remote.invoke(target, code, fields)
            done.append(target[0])
        return done
