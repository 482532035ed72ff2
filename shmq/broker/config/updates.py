"""UPDATE_BROKER_CONFIG (mqadmin ``updateBrokerConfig``): broker keys changed at run time.

RocketMQ sets the new values on its config objects and writes the whole config to
``brokerConfigPath``, the file the broker was started from (``-c``); a few of its keys act
at once, the rest at the next start. shmq's agents are separate processes that read their
config when they start, so shmq says which is which instead of taking every key silently:

- ``LIVE_KEYS`` are read by the control plane on each request; they act at once (and a
  ``brokerPermission`` change is registered with the namesrvs at once, as RocketMQ does).
- Every other key acts at the next start. The change is written to the broker's config
  file (``brokerConfigPath``, set when the broker was started from one; the key's line is
  replaced in place, comments and other lines kept); a broker started without a file
  refuses such a key, since the change could never act.
- ``BLACK_LIST`` keys are refused as RocketMQ's ``configBlackList`` refuses them, and with
  them the store's layout, which a restart on the same store cannot change.

A key shmq does not know is refused by name (RocketMQ ignores it), so a typo is not taken
for a change.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from shmq import json_file
from shmq.broker.config.broker_config import BrokerConfig, camel_case
from shmq.config import MessageStoreConfig, snake_case
from shmq.errors import ConfigError
from shmq.java_properties import escape, parse_properties

LIVE_KEYS = frozenset((
    "broker_permission", "long_polling_enable", "short_polling_time_mills",
    "slave_read_enable", "auto_create_subscription_group",
))  # fmt: skip
# RocketMQ's configBlackList default, then what a restart on the same store cannot change
BLACK_LIST = frozenset((
    "config_black_list", "broker_config_path", "store_path_root_dir", "store_path_commit_log",
    "mapped_file_size_commit_log", "mapped_file_size_consume_queue",
))  # fmt: skip
BLACK_LIST_REMARK = "Can not update config in black list."


class ConfigUpdate:
    """One request's keys, checked against the running ``config``: ``live`` (snake name →
    value, applied to ``config`` now) and ``later`` (the other keys, camelCase → their text
    as a config file holds it). The whole change was validated, so a restart with the
    config file written is valid too."""

    def __init__(self, config: BrokerConfig, text: str) -> None:
        values = parse_properties(text)
        self.black_listed = sorted(k for k in values if snake_case(k) in BLACK_LIST)
        unknown = sorted(k for k in values if snake_case(k) not in _KEYS)
        if unknown:
            raise ConfigError(f"unknown broker config key {', '.join(unknown)}")
        changed = config.replace(**values)  # ConfigError naming a bad value
        self.live = {snake_case(k): v for k, v in values.items() if snake_case(k) in LIVE_KEYS}
        self.later = {camel_case(snake_case(k)): _value_text(changed, snake_case(k))
                      for k in values if snake_case(k) not in LIVE_KEYS}  # fmt: skip
        self.config = config.replace(**self.live) if self.live else config

    def remark(self, persisted_to: str) -> str | None:
        """What the answer tells the caller when not every key acts at once."""
        if not self.later:
            return None
        return (f"{', '.join(sorted(self.later))} written to {persisted_to}: "
                "they take effect when the broker restarts")  # fmt: skip


_KEYS = {f.name for f in dataclasses.fields(BrokerConfig) if f.name not in ("store", "tuning")}
_KEYS |= {f.name for f in dataclasses.fields(MessageStoreConfig)}


def _value_text(config: BrokerConfig, name: str) -> Any:
    return getattr(config, name) if hasattr(config, name) else getattr(config.store, name)


def persist(path: str, changes: dict[str, Any]) -> None:
    """Write ``changes`` (camelCase key → value) into the config file at ``path``, a TOML
    file or Java properties as ``load_broker_config`` reads them: each key's line replaced
    where the file has it (under either spelling), else added; atomically."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    edit = _edit_toml if path.endswith(".toml") else _edit_properties
    json_file.persist(path, edit(text, changes))


def _edit_properties(text: str, changes: dict[str, Any]) -> str:
    wanted = {snake_case(k): k for k in changes}
    out: list[str] = []
    logical: list[str] = []  # the physical lines of one key, its value continued
    found: set[str | None] = set()
    for line in [*text.splitlines(), None]:  # None: the end, which ends a continued line
        stripped = "" if line is None else line.lstrip(" \t\f")
        if line is not None and not logical and (not stripped or stripped[0] in "#!"):
            out.append(line)
            continue
        if line is not None:
            logical.append(line)
            if (len(stripped) - len(stripped.rstrip("\\"))) % 2:
                continue
        elif logical:  # the file ended inside a continued line: the backslash ends nothing
            logical[-1] = logical[-1][:-1]
        else:
            break
        key = next(iter(parse_properties("\n".join(logical))), "")
        name = wanted.get(snake_case(key)) if key else None  # every line of it: the last wins
        out.extend([_property(name, changes[name])] if name else logical)
        found.add(name)
        logical = []
    out.extend(_property(name, changes[name]) for name in wanted.values() if name not in found)
    return "\n".join(out) + "\n"


def _property(key: str, value: Any) -> str:
    return f"{key}={escape(str(value).lower() if isinstance(value, bool) else str(value))}"


_TOML_KEY = re.compile(r"\s*([A-Za-z0-9_]+)\s*=")


def _edit_toml(text: str, changes: dict[str, Any]) -> str:
    wanted = {snake_case(k): k for k in changes}
    lines = text.splitlines()
    table = ""
    found: set[str] = set()
    first_table = len(lines)
    for i, line in enumerate(lines):
        if line.lstrip().startswith("["):
            table = line.strip().strip("[]").strip()
            first_table = min(first_table, i)
            continue
        m = _TOML_KEY.match(line)
        if m and table in ("", "broker", "store") and snake_case(m.group(1)) in wanted:
            name = wanted[snake_case(m.group(1))]
            lines[i] = f"{m.group(1)} = {_toml(changes[name])}"
            found.add(name)
    added = [f"{name} = {_toml(changes[name])}" for name in wanted.values() if name not in found]
    lines[first_table:first_table] = added  # top-level keys go before the first table
    return "\n".join(lines) + "\n"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(str(value), ensure_ascii=False)
