"""``plain_acl.yml``'s content (RocketMQ's ``PlainAccessConfig`` and ``AclConfig``): parsed
from YAML with every check RocketMQ makes when it loads the file, and rendered back for the
ACL admin codes.

The keys are RocketMQ's: ``globalWhiteRemoteAddresses``, ``accounts`` (``accessKey`` and
``secretKey`` longer than 6 characters, ``whiteRemoteAddress``, ``admin``,
``defaultTopicPerm``, ``defaultGroupPerm``, ``topicPerms`` and ``groupPerms`` as
``name=PERM``) and ``dataVersion``. Messages never hold a secret key.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

from shmq.broker.acl.address import AclConfigError, AddressPattern, parse_pattern
from shmq.broker.acl.permission import DENY, parse_perm

MIN_KEY_LENGTH = 7  # RocketMQ: the access and secret keys must be longer than 6


@dataclass(frozen=True)
class DataVersion:
    """RocketMQ's ``DataVersion``: bumped on every change the broker writes."""

    counter: int = 0
    timestamp: int = 0

    def next(self) -> DataVersion:
        return DataVersion(self.counter + 1, int(time.time() * 1000))

    def to_json(self) -> dict[str, int]:
        return {"counter": self.counter, "stateVersion": 0, "timestamp": self.timestamp}


@dataclass(frozen=True)
class PlainAccessConfig:
    """One account (``accounts[]``); perms as written (``topic_perms``: name → word)."""

    access_key: str
    secret_key: str = field(repr=False)
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: Mapping[str, str] = field(default_factory=dict)
    group_perms: Mapping[str, str] = field(default_factory=dict)
    white: AddressPattern = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        check_keys(self.access_key, self.secret_key)
        object.__setattr__(self, "white", parse_pattern(self.white_remote_address))

    def topic_perm(self, topic: str) -> int | None:
        word = self.topic_perms.get(topic)
        return None if word is None else parse_perm(word)

    def group_perm(self, group: str) -> int | None:
        word = self.group_perms.get(group)
        return None if word is None else parse_perm(word)

    def default_perm(self, group: bool) -> int:
        word = self.default_group_perm if group else self.default_topic_perm
        return parse_perm(word) if word is not None else DENY

    def to_yaml(self) -> dict[str, Any]:
        out: dict[str, Any] = {"accessKey": self.access_key, "secretKey": self.secret_key,
                               "whiteRemoteAddress": self.white_remote_address,
                               "admin": self.admin}  # fmt: skip
        if self.default_topic_perm is not None:
            out["defaultTopicPerm"] = self.default_topic_perm
        if self.default_group_perm is not None:
            out["defaultGroupPerm"] = self.default_group_perm
        if self.topic_perms:
            out["topicPerms"] = [f"{k}={v}" for k, v in self.topic_perms.items()]
        if self.group_perms:
            out["groupPerms"] = [f"{k}={v}" for k, v in self.group_perms.items()]
        return out


@dataclass(frozen=True)
class AclConfig:
    """The whole file."""

    global_white_addresses: tuple[str, ...] = ()
    accounts: Mapping[str, PlainAccessConfig] = field(default_factory=dict)
    data_version: DataVersion = DataVersion()
    global_white: tuple[AddressPattern, ...] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        patterns = tuple(parse_pattern(p) for p in self.global_white_addresses)
        object.__setattr__(self, "global_white", patterns)

    def with_account(self, account: PlainAccessConfig) -> AclConfig:
        return replace(self, accounts={**self.accounts, account.access_key: account})

    def to_yaml(self) -> str:
        data = {
            "globalWhiteRemoteAddresses": list(self.global_white_addresses),
            "accounts": [a.to_yaml() for a in self.accounts.values()],
            "dataVersion": [{"counter": self.data_version.counter,
                             "timestamp": self.data_version.timestamp}],
        }  # fmt: skip
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def check_keys(access_key: object, secret_key: object) -> None:
    """RocketMQ's rule for a key pair (the secret is never named)."""
    if not isinstance(access_key, str) or not isinstance(secret_key, str):
        raise AclConfigError("The accessKey or secretKey config can't be null")
    if len(access_key) < MIN_KEY_LENGTH:
        raise AclConfigError(f"The accessKey={access_key} cannot be less than 6 characters")
    if len(secret_key) < MIN_KEY_LENGTH:
        raise AclConfigError(f"The secretKey of accessKey={access_key} cannot be less than "
                             "6 characters")  # fmt: skip


def parse_perms(entries: object, kind: str) -> dict[str, str]:
    """``topicPerms`` / ``groupPerms``: a list of ``name=PERM`` (one name, one ``=``)."""
    if entries is None:
        return {}
    if not isinstance(entries, list):
        raise AclConfigError(f"{kind} is not a list of name=PERM")
    out: dict[str, str] = {}
    for entry in entries:
        name, sep, word = _text(entry, kind).partition("=")
        if not sep or not name.strip() or "=" in word:
            raise AclConfigError(f"Parse resource permission error for {kind} entry {entry!r}")
        out[name.strip()] = word.strip()
    return out


def _text(value: object, key: str) -> str:
    """A scalar as RocketMQ's YAML-to-bean mapping reads it: numbers become their text."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise AclConfigError(f"{key} is not a string: {type(value).__name__}")
    return str(value)


def _optional_text(value: object, key: str) -> str | None:
    return None if value is None else _text(value, key)


def _bool(value: object, key: str) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise AclConfigError(f"{key} is not true or false: {value!r}")


def parse_account(data: object) -> PlainAccessConfig:
    if not isinstance(data, dict):
        raise AclConfigError("an entry of accounts is not a mapping")
    if data.get("accessKey") is None or data.get("secretKey") is None:
        raise AclConfigError("The accessKey or secretKey config can't be null")
    access_key = _text(data["accessKey"], "accessKey")
    where = f"of account {access_key}"
    return PlainAccessConfig(
        access_key=access_key,
        secret_key=_text(data["secretKey"], f"secretKey {where}"),
        white_remote_address=_optional_text(
            data.get("whiteRemoteAddress"), f"whiteRemoteAddress {where}"
        ),
        admin=_bool(data.get("admin"), f"admin {where}"),
        default_topic_perm=_optional_text(
            data.get("defaultTopicPerm"), f"defaultTopicPerm {where}"
        ),
        default_group_perm=_optional_text(
            data.get("defaultGroupPerm"), f"defaultGroupPerm {where}"
        ),
        topic_perms=parse_perms(data.get("topicPerms"), f"topicPerms {where}"),
        group_perms=parse_perms(data.get("groupPerms"), f"groupPerms {where}"),
    )


def parse_data_version(data: object) -> DataVersion:
    """``dataVersion``: RocketMQ writes a one-element list of {counter, timestamp}."""
    if data is None:
        return DataVersion()
    entry = data[0] if isinstance(data, list) and data else data
    if not isinstance(entry, dict):
        raise AclConfigError("dataVersion is not a list of {counter, timestamp}")
    try:
        return DataVersion(int(entry.get("counter") or 0), int(entry.get("timestamp") or 0))
    except (TypeError, ValueError, OverflowError):
        raise AclConfigError("dataVersion's counter or timestamp is not a number") from None


def _yaml_problem(exc: BaseException) -> str:
    """What is wrong and where, without PyYAML's snippet of the line (it may hold a key)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or type(exc).__name__
    if mark is None:
        return problem
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}"


def parse_acl_config(text: str) -> AclConfig:
    """``plain_acl.yml``'s text; ``AclConfigError`` naming the first problem."""
    try:
        data = yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError) as exc:
        raise AclConfigError(f"not YAML: {_yaml_problem(exc)}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise AclConfigError("the file is not a mapping of RocketMQ's keys")
    white = data.get("globalWhiteRemoteAddresses") or []
    if not isinstance(white, list):
        raise AclConfigError("globalWhiteRemoteAddresses is not a list")
    accounts_data = data.get("accounts") or []
    if not isinstance(accounts_data, list):
        raise AclConfigError("accounts is not a list")
    accounts: dict[str, PlainAccessConfig] = {}
    for entry in accounts_data:
        account = parse_account(entry)
        if account.access_key in accounts:
            raise AclConfigError(f"The accessKey={account.access_key} is repeated")
        accounts[account.access_key] = account
    return AclConfig(
        global_white_addresses=tuple(_text(w, "globalWhiteRemoteAddresses") for w in white),
        accounts=accounts,
        data_version=parse_data_version(data.get("dataVersion")),
    )
