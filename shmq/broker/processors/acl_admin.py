"""The ACL admin codes of RocketMQ 4.9 to 5.3.2 (``AdminBrokerProcessor``'s ACL part):
UPDATE_AND_CREATE_ACL_CONFIG, DELETE_ACL_CONFIG, UPDATE_GLOBAL_WHITE_ADDRS_CONFIG rewrite
``plain_acl.yml`` (``PlainAclFile.update``: next ``dataVersion``, atomic, 0600);
GET_BROKER_CLUSTER_ACL_INFO and the deprecated GET_BROKER_CLUSTER_ACL_CONFIG answer the
file's version in their header, never its accounts. Every code needs an admin account (the
ACL hook checks that before this runs); without ``aclEnable`` each answers "The broker does
not enable acl.". A refused change answers RocketMQ's ``*_FAILED`` code with why, and
changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import ClassVar

from shmq.broker.acl.address import AclConfigError
from shmq.broker.acl.plain_config import AclConfig, PlainAccessConfig, parse_perms
from shmq.broker.acl.plain_file import PlainAclFile
from shmq.broker.context import BrokerContext
from shmq.broker.processors.processor import Processor
from shmq.errors import ResponseError
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode
from shmq.remoting.server import Connection

NOT_ENABLED = "The broker does not enable acl."


class AclAdminProcessor(Processor):
    """The five codes over ``file`` (None: ACL is off)."""

    CODES: ClassVar[Mapping[int, str]] = {
        RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: "update_and_create_acl_config",
        RequestCode.DELETE_ACL_CONFIG: "delete_acl_config",
        RequestCode.GET_BROKER_CLUSTER_ACL_INFO: "get_broker_cluster_acl_info",
        RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: "update_global_white_addrs_config",
        RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG: "get_broker_cluster_acl_config",
    }

    def __init__(self, ctx: BrokerContext, file: PlainAclFile | None) -> None:
        super().__init__(ctx)
        self.file = file

    def _file(self) -> PlainAclFile:
        if self.file is None:
            raise ResponseError(ResponseCode.SYSTEM_ERROR, NOT_ENABLED)
        return self.file

    def _change(
        self, request: RemotingCommand, failed: int, change: Callable[[AclConfig], AclConfig]
    ) -> RemotingCommand:
        """Rewrite the file with ``change``; ``failed`` and the reason when it is refused."""
        file = self._file()
        try:
            file.update(change)
        except (AclConfigError, OSError) as exc:
            return RemotingCommand.response_to(request, failed, str(exc))
        return RemotingCommand.response_to(request)

    def update_and_create_acl_config(
        self, request: RemotingCommand, _conn: Connection
    ) -> RemotingCommand:
        fields = dict(request.ext_fields)

        def update(config: AclConfig) -> AclConfig:
            return config.with_account(_account(config, fields))

        return self._change(request, ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED, update)

    def delete_acl_config(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        access_key = request.ext("accessKey")

        def delete(config: AclConfig) -> AclConfig:
            if access_key not in config.accounts:
                raise AclConfigError(f"The accessKey={access_key} does not exist")
            accounts = {k: a for k, a in config.accounts.items() if k != access_key}
            return replace(config, accounts=accounts)

        return self._change(request, ResponseCode.DELETE_ACL_CONFIG_FAILED, delete)

    def update_global_white_addrs_config(
        self, request: RemotingCommand, _conn: Connection
    ) -> RemotingCommand:
        addresses = tuple(a.strip() for a in request.ext("globalWhiteAddrs").split(",")
                          if a.strip())  # fmt: skip
        path = request.ext_fields.get("aclFileFullPath")
        file = self._file()
        if path and path != file.path:
            return RemotingCommand.response_to(
                request, ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
                f"{path} is not this broker's ACL file ({file.path})",
            )  # fmt: skip

        def update(config: AclConfig) -> AclConfig:
            return replace(config, global_white_addresses=addresses)

        return self._change(request, ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED, update)

    def get_broker_cluster_acl_info(
        self, request: RemotingCommand, _conn: Connection
    ) -> RemotingCommand:
        file = self._file()
        version = json.dumps(file.current().data_version.to_json(), separators=(",", ":"))
        return RemotingCommand.response_to(request, ext_fields={
            "version": version,
            "allAclFileVersion": f'{{{json.dumps(file.path)}:{version}}}',
            **self._broker_fields(),
        })  # fmt: skip

    def get_broker_cluster_acl_config(
        self, request: RemotingCommand, _conn: Connection
    ) -> RemotingCommand:
        file = self._file()
        version = json.dumps(file.current().data_version.to_json(), separators=(",", ":"))
        return RemotingCommand.response_to(request, ext_fields={
            "aclConfigDataVersion": version,
            "allAclConfigDataVersion": f'{{{json.dumps(file.path)}:{version}}}',
            **self._broker_fields(),
        })  # fmt: skip

    def _broker_fields(self) -> dict[str, str]:
        cfg = self.ctx.config
        return {"brokerName": cfg.broker_name, "brokerAddr": self.ctx.address,
                "clusterName": cfg.broker_cluster_name}  # fmt: skip


def _account(config: AclConfig, fields: Mapping[str, str]) -> PlainAccessConfig:
    """The account UPDATE_AND_CREATE_ACL_CONFIG makes: the fields given replace those of
    the account with that access key, if any (``admin`` always: absent is false, as in
    RocketMQ's header); the keys are checked as the file's are."""
    access_key = fields.get("accessKey") or ""
    changes = {
        "secret_key": fields.get("secretKey") or None,
        "white_remote_address": fields.get("whiteRemoteAddress"),
        "default_topic_perm": fields.get("defaultTopicPerm"),
        "default_group_perm": fields.get("defaultGroupPerm"),
        "topic_perms": _perms(fields.get("topicPerms"), "topicPerms"),
        "group_perms": _perms(fields.get("groupPerms"), "groupPerms"),
    }
    changes = {k: v for k, v in changes.items() if v is not None}
    admin = fields.get("admin", "false").strip().lower() == "true"
    old = config.accounts.get(access_key)
    if old is None:
        return PlainAccessConfig(**{"access_key": access_key, "secret_key": "", **changes,
                                    "admin": admin})  # fmt: skip
    return replace(old, **changes, admin=admin)


def _perms(text: str | None, key: str) -> Mapping[str, str] | None:
    """A comma list of ``name=PERM`` (None: not given, the old ones stay)."""
    if text is None:
        return None
    return parse_perms([e for e in text.split(",") if e.strip()], key)
