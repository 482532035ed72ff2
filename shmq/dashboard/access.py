"""Who is looking: the account the dashboard's requests are signed with, and whether it may
change anything.

With ACL off, the dashboard needs no account and offers every action (as ``shmq admin``
does to anyone on the host; the dashboard listens on loopback by default). With ACL on,
each visitor logs in with an ACL account: the brokers check its signature on every request
the dashboard sends for it, and only an ``admin: true`` account gets the actions; any other
account sees a read-only dashboard. ``--access-key`` / ``--secret-key`` give every visitor
one account instead. Whether an account is an admin one is asked of the brokers themselves:
GET_BROKER_CLUSTER_ACL_INFO is an admin-only request code.
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass
from typing import Any

from shmq.client.admin.admin import Admin
from shmq.errors import ClientError, ResponseError, ShmqError
from shmq.remoting.security.credentials import Credentials
from shmq.remoting.security.tls import TlsOptions

ACL_REFUSAL = "AclException"  # in the remark of every request a broker's ACL refuses


class LoginError(ShmqError):
    """The brokers refused the account (unknown access key, wrong secret key)."""


@dataclass(frozen=True)
class Account:
    """A viewer: ``credentials`` to sign with (None: ACL is off) and whether the brokers
    take admin requests from it."""

    credentials: Credentials | None
    admin: bool

    @property
    def name(self) -> str:
        return self.credentials.access_key if self.credentials is not None else ""


def _acl_refusals(namesrv: str, credentials: Credentials | None, tls: TlsOptions | None) -> list:
    """The errors of the registered brokers that refused ``credentials`` by ACL."""
    with Admin(namesrv, credentials=credentials, tls=tls) as admin:
        return [row["error"] for row in admin.cluster_list()
                if ACL_REFUSAL in (row.get("error") or "")]  # fmt: skip


def acl_enabled(namesrv: str, tls: TlsOptions | None) -> bool:
    """Whether a registered broker refuses unsigned requests (its ``aclEnable``)."""
    return bool(_acl_refusals(namesrv, None, tls))


def check_account(namesrv: str, credentials: Credentials, tls: TlsOptions | None) -> Account:
    """``credentials`` as an ``Account`` once every broker took them; ``LoginError`` with
    a broker's reason otherwise."""
    refused = _acl_refusals(namesrv, credentials, tls)
    if refused:
        raise LoginError(refused[0].split(f"{ACL_REFUSAL}: ", 1)[-1])
    with Admin(namesrv, credentials=credentials, tls=tls) as admin:
        try:
            admin.acl_config_version()
        except (ResponseError, ClientError):
            return Account(credentials, admin=False)
    return Account(credentials, admin=True)


class Sessions:
    """Logged-in accounts by an unguessable token (the only thing the session cookie
    holds: secret keys never leave the dashboard's process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._accounts: dict[str, Account] = {}

    def add(self, account: Account) -> str:
        token = secrets.token_urlsafe(32)
        with self._lock:
            self._accounts[token] = account
        return token

    def get(self, token: Any) -> Account | None:
        with self._lock:
            return self._accounts.get(token) if isinstance(token, str) else None

    def remove(self, token: Any) -> None:
        with self._lock:
            self._accounts.pop(token, None)
