"""The one ACL check (RocketMQ's ``PlainPermissionManager.validate``): every remoting request
of the broker and every RPC of the gRPC proxy is described as an ``AccessRequest`` and
passes ``PlainAcl.validate`` before anything acts on it.

In RocketMQ's order: a peer matching a global white address passes; a request without an
access key, or with an unknown one, is refused; a peer matching the account's white address
passes; a signature that the account's secret key did not make is refused; a publication to
the trace topic passes; an admin account passes, an admin code from another account is
refused; every resource needs the account's permission for it, or its default one. Groups
are resources named ``%RETRY%<group>``. Refusals are ``AclException`` with RocketMQ's text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from shmq.broker.acl.address import canonical
from shmq.broker.acl.permission import ADMIN_CODES, PUB, check_perm
from shmq.broker.acl.plain_config import AclConfig, PlainAccessConfig
from shmq.broker.acl.plain_file import PlainAclFile
from shmq.names import RETRY_GROUP_TOPIC_PREFIX

TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"


class AclException(Exception):
    """A refusal; ``authentication`` when who sent the request is not established (no,
    unknown or wrongly signed access key), as opposed to an account lacking a permission."""

    def __init__(self, message: str, *, authentication: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.authentication = authentication


@dataclass(frozen=True)
class AccessRequest:
    """What a request asks (RocketMQ's ``PlainAccessResource`` of the request): from which
    host, as which access key, whether a secret key signed it (``signed_by``), the
    resources it needs (name → permission bits; groups as ``%RETRY%<group>``), and its
    remoting code (None for gRPC)."""

    host: str
    access_key: str | None
    signed_by: Callable[[str], bool] = field(repr=False)
    resources: Mapping[str, int] = field(default_factory=dict)
    code: int | None = None


def is_group(resource: str) -> bool:
    return resource.startswith(RETRY_GROUP_TOPIC_PREFIX)


def describe(resource: str) -> str:
    """``topic:<name>`` or ``group:<name>``, as RocketMQ's messages name a resource."""
    if is_group(resource):
        return f"group:{resource[len(RETRY_GROUP_TOPIC_PREFIX) :]}"
    return f"topic:{resource}"


class PlainAcl:
    """The accounts of ``file`` (re-read when it changes) and ``inner``: the gRPC proxy's
    own admin account, which exists only in memory (``shmq.broker.acl.inner``)."""

    def __init__(self, file: PlainAclFile, inner: PlainAccessConfig | None = None) -> None:
        self.file = file
        self.inner = inner

    def validate(self, request: AccessRequest) -> None:
        """Nothing when ``request`` may proceed; ``AclException`` otherwise."""
        config = self.file.current()
        host = canonical(request.host)
        if any(p.matches(host) for p in config.global_white):
            return
        account = self._account(config, request.access_key)
        if account.white.matches(host):
            return
        if not request.signed_by(account.secret_key):
            raise AclException(f"Check signature failed for accessKey={account.access_key}",
                               authentication=True)  # fmt: skip
        if request.resources.get(TRACE_TOPIC) == PUB:
            return
        if account.admin:
            return
        if request.code is not None and request.code in ADMIN_CODES:
            raise AclException(f"Need admin permission for request code={request.code}, "
                               f"but accessKey={account.access_key} is not")  # fmt: skip
        for resource, needed in request.resources.items():
            check_resource(account, resource, needed)

    def _account(self, config: AclConfig, access_key: str | None) -> PlainAccessConfig:
        if not access_key:
            raise AclException("No accessKey is configured", authentication=True)
        if self.inner is not None and access_key == self.inner.access_key:
            return self.inner
        account = config.accounts.get(access_key)
        if account is None:
            raise AclException(f"No acl config for {access_key}", authentication=True)
        return account


def check_resource(account: PlainAccessConfig, resource: str, needed: int) -> None:
    """``AclException`` unless ``account`` holds ``needed`` on ``resource`` (listed, or
    by its default permission)."""
    group = is_group(resource)
    name = resource[len(RETRY_GROUP_TOPIC_PREFIX) :] if group else resource
    owned = account.group_perm(name) if group else account.topic_perm(name)
    if owned is None:
        if not check_perm(needed, account.default_perm(group)):
            raise AclException(f"No default permission for {describe(resource)}")
    elif not check_perm(needed, owned):
        raise AclException(f"No permission for {describe(resource)}")
