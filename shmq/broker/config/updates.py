"""UPDATE_BROKER_CONFIG (mqadmin ``updateBrokerConfig``): broker keys changed at run time.

RocketMQ sets the new values on its config objects and writes the whole config to
``brokerConfigPath``, the file the broker was started from (``-c``); a few of its keys act
at once, the rest at the next start. shmq's agents are separate processes that read their
config when they start, so shmq says which is which instead of taking every key silently:

- ``LIVE_KEYS`` are read by the control plane on each request; they act at once (and a
  ``brokerPermission`` change is registered with the namesrvs at once, as RocketMQ does).
- Every other key acts at the next start. The change is written to the broker's config
  file (``brokerConfigPath``, set when the broker was started from one; only the key's
  value changes, every other line and comment is kept); a broker started without a file
  refuses such a key, since the change could never act.
- ``BLACK_LIST`` keys are refused as RocketMQ's ``configBlackList`` refuses them, and with
  them the store's layout, which a restart on the same store cannot change.

A key shmq does not know is refused by name with the nearest key, as the config loader
refuses it (RocketMQ ignores it), so a typo is not taken for a change. One of RocketMQ's
keys that shmq ignores (``rocketmq_keys``) is refused with the reason the loader logs for
it: a success would tell the caller that something changed.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import MutableMapping
from typing import Any

import tomlkit
from tomlkit.exceptions import ParseError

from shmq import json_file
from shmq.broker.config.broker_config import BrokerConfig, camel_case, did_you_mean
from shmq.broker.config.rocketmq_keys import ignored_reason
from shmq.config import MessageStoreConfig, snake_case
from shmq.errors import ConfigError
from shmq.java_properties import escape, parse_properties

LIVE_KEYS = frozenset((
    "broker_permission", "long_polling_enable", "short_polling_time_mills",
    "slave_read_enable", "auto_create_subscription_group", "recall_message_enable",
    "allow_recall_when_broker_not_writeable",
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
        refused = [_refusal(k) for k in sorted(values) if snake_case(k) not in _KEYS]
        if refused:
            raise ConfigError("; ".join(refused))
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


_STORE_KEYS = {f.name for f in dataclasses.fields(MessageStoreConfig)}
_KEYS = {f.name for f in dataclasses.fields(BrokerConfig) if f.name not in ("store", "tuning")}
_KEYS |= _STORE_KEYS


def _refusal(key: str) -> str:
    """Why ``key`` is not taken, in the words of ``load_broker_config``: one of RocketMQ's
    keys that shmq ignores, with the reason, or a name it does not know, with the nearest
    key, so the caller can tell a key that does nothing here from a typo."""
    reason = ignored_reason(key)
    if reason is not None:
        return f"{key} is a RocketMQ key that shmq ignores: {reason}"
    return f"unknown broker config key {key!r}{did_you_mean(key)}"


def _value_text(config: BrokerConfig, name: str) -> Any:
    return getattr(config, name) if hasattr(config, name) else getattr(config.store, name)


def persist(path: str, changes: dict[str, Any]) -> None:
    """Write ``changes`` (camelCase key → value) into the config file at ``path``, a TOML
    file or Java properties as ``load_broker_config`` reads them: each key's value replaced
    where the file has it (under either spelling), else the key added; atomically.
    ``ConfigError`` when the file no longer parses."""
    with open(path, "rb") as f:  # as written: CRLF is kept
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        if path.endswith(".toml"):
            raise ConfigError(f"broker config {path} is not valid TOML: not UTF-8") from None
        text = raw.decode("latin-1")  # as load_broker_config reads Java properties
    if path.endswith(".toml"):
        try:
            edited = _edit_toml(text, changes)
        except ParseError as exc:
            raise ConfigError(f"broker config {path} is not valid TOML: {exc}") from None
    else:
        edited = _edit_properties(text, changes)
    json_file.persist(path, edited)


def _edit_properties(text: str, changes: dict[str, Any]) -> str:
    wanted = {snake_case(k): k for k in changes}
    out: list[str] = []
    logical: list[str] = []  # the physical lines of one key, its value continued
    found: set[str | None] = set()
    # the line ends Java's Properties.load knows, not str.splitlines' (which also splits at
    # U+2028 or a form feed inside a comment, making the rest of it a key)
    lines = re.split(r"\r\n|\r|\n", text.removesuffix("\r\n").removesuffix("\n"))
    for line in [*lines, None]:  # None: the end, which ends a continued line
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
    newline = "\r\n" if "\r\n" in text else "\n"
    return newline.join(out) + newline


def _property(key: str, value: Any) -> str:
    return f"{key}={escape(str(value).lower() if isinstance(value, bool) else str(value))}"


def _edit_toml(text: str, changes: dict[str, Any]) -> str:
    """``text`` with each key of ``changes`` set in every place ``load_broker_config`` reads
    it, under any spelling (quoted, dotted, in an inline table); a key the file lacks is
    added to the table its kind is kept in. tomlkit keeps every other line, comment and the
    layout as they were, so the file stays the one its owner wrote (but for a blank line
    it puts between an added key and a table header right after it)."""
    doc = tomlkit.parse(text)
    for key, value in changes.items():
        name = snake_case(key)
        tables = _tables(doc, store_key=name in _STORE_KEYS)
        found = [(table, k) for table in tables for k in table if snake_case(k) == name]
        for table, k in found:
            table[k] = value  # tomlkit keeps the key's spelling, indent and comment
        if not found:
            tables[-1][key] = value
    return tomlkit.dumps(doc)


def _tables(doc: tomlkit.TOMLDocument, *, store_key: bool) -> list[MutableMapping[str, Any]]:
    """Where the loader reads a key: the top level and a ``broker`` table (any key), and a
    ``store`` table (store keys only), in that order, so the last is where a key the file
    lacks belongs: with the file's other store keys, else its broker keys."""
    names = ("broker", "store") if store_key else ("broker",)
    return [doc, *(doc[n] for n in names if isinstance(doc.get(n), dict))]
