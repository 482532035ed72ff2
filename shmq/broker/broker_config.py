"""Broker settings: RocketMQ ``BrokerConfig`` keys (and shmq's own), plus the store's.

A ``broker.conf`` is RocketMQ's Java properties file; TOML is accepted too (flat keys, or
``[broker]`` and ``[store]`` tables; a ``[tuning]`` table is kept for the tuning issue).
Keys may be camelCase (as in RocketMQ) or snake_case; store keys go to ``store``.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shmq.config import MessageStoreConfig, _coerce, parse_host, snake_case
from shmq.errors import ConfigError

BROKER_ROLES = ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE")


@dataclass(frozen=True)
class BrokerConfig:
    """Broker settings with RocketMQ 4.9 defaults (intervals in ms).

    RocketMQ clamps ``registerNameServerPeriod`` to 10-60 s; shmq does not, so tests can
    use short periods.
    """

    broker_cluster_name: str = "DefaultCluster"
    broker_name: str = "broker-a"
    broker_id: int = 0
    namesrv_addr: str = ""
    listen_port: int = 10911
    broker_ip1: str = "127.0.0.1"
    broker_role: str = "ASYNC_MASTER"
    broker_permission: int = 6
    auto_create_topic_enable: bool = True
    default_topic_queue_nums: int = 8
    register_name_server_period: int = 30_000
    flush_consumer_offset_interval: int = 5_000
    client_channel_max_idle_time_seconds: int = 120
    # shmq's own
    ring_size: int = 4 << 20
    ring_slots: int = 65536
    max_producers: int = 64
    max_consumers: int = 256
    max_queue_slots: int = 4096
    idle_spin: int = 20
    idle_yield: int = 0
    idle_park_us: int = 1000
    agent_restart_max: int = 5
    store: MessageStoreConfig = field(default_factory=MessageStoreConfig)
    tuning: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.broker_role not in BROKER_ROLES:
            raise ConfigError(f"brokerRole {self.broker_role!r} is not one of {BROKER_ROLES}")
        if not 0 <= self.listen_port <= 65535:
            raise ConfigError(f"listenPort {self.listen_port} is not in 0..65535")
        if not 1 <= self.default_topic_queue_nums <= 1024:
            raise ConfigError(
                f"defaultTopicQueueNums {self.default_topic_queue_nums} is not in 1..1024"
            )
        if self.ring_size < 65536 or self.ring_size & (self.ring_size - 1):
            raise ConfigError(f"ringSize {self.ring_size} must be a power of two >= 65536")
        if self.ring_slots < 16 or self.ring_slots & (self.ring_slots - 1):
            raise ConfigError(f"ringSlots {self.ring_slots} must be a power of two >= 16")
        for name in ("max_producers", "max_consumers", "max_queue_slots", "agent_restart_max"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{camel_case(name)} must be at least 1")
        if self.register_name_server_period < 100:
            raise ConfigError("registerNameServerPeriod must be at least 100 ms")
        parse_host(f"{self.broker_ip1}:{self.listen_port}")
        self.namesrv_addrs  # noqa: B018 (validates)

    @property
    def namesrv_addrs(self) -> list[str]:
        addrs = [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]
        for addr in addrs:
            parse_host(addr)
        return addrs

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> BrokerConfig:
        return cls().replace(**values)

    def replace(self, **overrides: Any) -> BrokerConfig:
        """A copy with broker or store keys (camelCase or snake_case) changed."""
        fields = {f.name: f for f in dataclasses.fields(self) if f.name not in ("store", "tuning")}
        store_fields = {f.name for f in dataclasses.fields(MessageStoreConfig)}
        broker_changes: dict[str, Any] = {}
        store_changes: dict[str, Any] = {}
        for key, value in overrides.items():
            name = snake_case(key)
            if name in fields:
                broker_changes[name] = _coerce(name, value, fields[name].type)
            elif name in store_fields:
                store_changes[name] = value
            elif name == "tuning":
                broker_changes["tuning"] = dict(value)
            else:
                raise ConfigError(f"unknown broker config key {key!r}")
        store = self.store.replace(**store_changes) if store_changes else self.store
        cfg = dataclasses.replace(self, store=store, **broker_changes)
        if "store_host" not in store_changes and (
            "listen_port" in broker_changes or "broker_ip1" in broker_changes
            or store.store_host == MessageStoreConfig.store_host
        ):  # fmt: skip
            cfg = dataclasses.replace(
                cfg, store=store.replace(store_host=f"{cfg.broker_ip1}:{cfg.listen_port}")
            )
        return cfg


def camel_case(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(p.upper() if p in ("crc", "ip") else p.title() for p in rest)


def parse_properties(text: str) -> dict[str, str]:
    """Java properties: ``key=value``, ``key: value`` or ``key value``; ``#``/``!`` comments;
    a trailing backslash continues the line; the last duplicate wins."""
    out: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.strip() if not logical else raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical += line[:-1]
            continue
        logical += line
        key, value = _split_property(logical)
        out[key] = value
        logical = ""
    if logical:
        key, value = _split_property(logical)
        out[key] = value
    return out


def _split_property(line: str) -> tuple[str, str]:
    for i, ch in enumerate(line):
        if ch in "=:" or ch.isspace():
            rest = line[i:].lstrip()
            if rest[:1] in ("=", ":"):
                rest = rest[1:]
            return line[:i], rest.strip()
    return line, ""


def load_broker_config(path: str | os.PathLike[str]) -> BrokerConfig:
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise ConfigError(f"cannot read broker config {path}: {exc.strerror}") from None
    if path.endswith(".toml"):
        try:
            data = tomllib.loads(raw.decode())
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: {exc}") from None
        values: dict[str, Any] = {}
        for key, value in data.items():
            if key in ("broker", "store") and isinstance(value, dict):
                values.update(value)
            elif key == "tuning":
                values["tuning"] = value
            else:
                values[key] = value
        return BrokerConfig.from_mapping(values)
    return BrokerConfig.from_mapping(parse_properties(raw.decode("utf-8", "replace")))


def to_properties(cfg: BrokerConfig) -> str:
    """``cfg`` as broker.conf text: camelCase keys, values that differ from the defaults."""
    lines = []
    default = BrokerConfig()
    for f in dataclasses.fields(cfg):
        if f.name in ("store", "tuning"):
            continue
        value = getattr(cfg, f.name)
        if value != getattr(default, f.name):
            lines.append(f"{camel_case(f.name)}={_text(value)}")
    for f in dataclasses.fields(cfg.store):
        value = getattr(cfg.store, f.name)
        if value != getattr(default.store, f.name):
            lines.append(f"{camel_case(f.name)}={_text(value)}")
    return "\n".join(lines) + "\n"


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
