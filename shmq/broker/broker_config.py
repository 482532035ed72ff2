"""Broker settings: RocketMQ's ``BrokerConfig`` / ``NettyServerConfig`` keys, shmq's own, and
the store's ``MessageStoreConfig``, read from one file as a RocketMQ broker does.

A RocketMQ ``broker.conf`` is a Java properties file holding broker and store keys side by
side, so shmq reads that format unchanged (and TOML, for people who prefer it). Keys may be
camelCase, as RocketMQ writes them, or snake_case, as the fields here are named; store keys
land in ``BrokerConfig.store``. ``to_properties`` writes a config back as ``broker.conf``
text, so what ``shmq start`` ran with can be read and reused.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shmq.config import MessageStoreConfig, parse_host, snake_case
from shmq.errors import ConfigError
from shmq.ipc.idle import STRATEGIES, spare_cpus
from shmq.java_properties import escape, parse_properties

BROKER_ROLES = ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE")
RECORD_OVERHEAD_MAX = 256 + 32 * 1024
MIN_RING_SIZE = 64 * 1024
MIN_RING_SLOTS = 16

# Fields whose RocketMQ key is not the plain camelCase of the field name.
_CAMEL_ALIASES = {
    "broker_ip1": "brokerIP1",
    "check_crc_on_recover": "checkCRCOnRecover",
    "warm_mapped_file_enable": "warmMapedFileEnable",  # RocketMQ's spelling
}
# Fields that are not keys of a conf file.
_NOT_KEYS = ("store", "tuning")


@dataclass(frozen=True)
class BrokerConfig:
    """Broker settings with RocketMQ 4.9 defaults (intervals in ms unless named otherwise).

    RocketMQ clamps ``registerNameServerPeriod`` to 10..60 s; shmq takes it as given, so
    tests can register every few hundred milliseconds. ``store.store_host`` follows
    ``brokerIP1:listenPort`` unless ``storeHost`` is set to something else.
    """

    broker_cluster_name: str = "DefaultCluster"
    broker_name: str = "broker-a"
    broker_id: int = 0
    namesrv_addr: str = ""
    listen_port: int = 10911
    broker_ip1: str = "127.0.0.1"
    broker_role: str = "ASYNC_MASTER"
    broker_permission: int = 6
    # the file the broker was started from (load_broker_config sets it): UPDATE_BROKER_CONFIG
    # writes the keys that act at the next start there, as RocketMQ does. Where a config
    # came from is not a setting: configs compare and are written without it.
    broker_config_path: str = field(default="", compare=False)
    auto_create_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    # RocketMQ's rocketmq.broker.rebalance.lockMaxLiveTime (a system property there), ms
    rebalance_lock_max_live_time: int = 60_000
    default_topic_queue_nums: int = 8
    cluster_topic_enable: bool = True
    broker_topic_enable: bool = True
    register_name_server_period: int = 30_000
    flush_consumer_offset_interval: int = 5_000
    long_polling_enable: bool = True
    short_polling_time_mills: int = 1_000
    client_channel_max_idle_time_seconds: int = 120
    server_channel_max_idle_time_seconds: int = 120
    # shmq's own: connections the control server serves at once; seconds a frame may take
    server_max_connections: int = 1024
    server_frame_timeout_seconds: int = 30
    # ms without a heartbeat before a client is dropped (RocketMQ: 120 s, fixed in code)
    channel_expired_timeout: int = 120_000
    # shmq's own: producer rings (bytes, completion slots), slot tables, agent idling. A
    # record never wraps in a ring, so the largest message that can be sent is about ringSize
    # less its header: 8 MiB holds the default maxMessageSize of 4 MiB.
    ring_size: int = 8 << 20
    ring_slots: int = 65536
    max_producers: int = 64
    max_consumers: int = 256
    max_queue_slots: int = 4096
    # the writer's idle strategy (shmq.ipc.idle): backoff (adaptive spin, yield, park),
    # busy_spin (hosts with cores to spare: reput spins too) or park; other agents park
    idle_strategy: str = "backoff"
    idle_spin_us: int = 50
    idle_yield_us: int = 0
    # a park ends at a post; its timeout only bounds what no one posts for (a stop, a
    # topic created on request are posted too): each wake-up costs ~80 µs of CPU on a small
    # VM, so 1 ms parks kept an idle writer and reput at 8 % of a core each
    idle_park_us: int = 10_000
    # how long the writer stays awake after answering a producer that waits for the answer
    # (a sync send), whatever the recent gaps (shmq.ipc.idle's linger); 0 below 4 CPUs,
    # where it takes the CPU reput and the consumers need
    idle_linger_us: int = 200 if spare_cpus() else 0
    # how long the writer sleeps after a pass of idleBatchMin records or more that answered
    # no waiting sync send, so the next pass takes what a stream of async or oneway sends
    # brought meanwhile (shmq.ipc.idle's batch linger): fewer passes and fewer wake-ups of
    # reput. 0 (every pass at once) with 4 CPUs or more, where the agents may spin
    idle_batch_linger_us: int = 0 if spare_cpus() else 100
    idle_batch_min: int = 4
    # shmq's own: the writer computes every stored BODYCRC itself (as RocketMQ's broker
    # does); with checkProducerCrc it also rejects a ring record whose producer-computed CRC
    # differs (an end-to-end check of the rings, and producers then compute CRCs)
    check_producer_crc: bool = False
    agent_restart_max: int = 5
    # request/reply: a reply is pushed to its requester and, as well, stored in the
    # cluster's reply topic (RocketMQ's storeReplyMessageEnable)
    store_reply_message_enable: bool = True
    # replies are handled on a pool of their own, as RocketMQ's replyMessageExecutor, so a
    # requester slow to take its push holds a pool thread, never the replier's connection;
    # past the queue's capacity a reply is answered SYSTEM_BUSY ([OVERLOAD])
    process_reply_message_thread_pool_nums: int = 16 + 2 * (os.cpu_count() or 1)
    reply_thread_pool_queue_capacity: int = 10_000
    # transactional messages (ms, count): a half message without an outcome is checked back
    # once older than transactionTimeOut, every transactionCheckInterval, at most
    # transactionCheckMax times (RocketMQ 4.9's defaults)
    transaction_time_out: int = 6_000
    transaction_check_interval: int = 60_000
    transaction_check_max: int = 15
    # master/slave replication (RocketMQ 4.9's MessageStoreConfig HA keys): haListenPort 0
    # means listenPort + 1; a slave without haMasterAddress learns it from the namesrv's
    # register answer. syncFlushTimeout (a store key) bounds a SYNC_MASTER's wait for the
    # slave, as in 4.9.
    ha_listen_port: int = 0
    ha_master_address: str = ""
    ha_send_heartbeat_interval: int = 5_000
    ha_housekeeping_interval: int = 20_000
    ha_transfer_batch_size: int = 32 * 1024
    ha_slave_fallbehind_max: int = 256 * 1024 * 1024
    # consumers may read from a slave: a master suggests it to a consumer far behind (more
    # than accessMessageInMemoryMaxRatio % of RAM), a slave serves pulls (else it answers
    # PULL_RETRY_IMMEDIATELY, suggesting the master)
    slave_read_enable: bool = False
    # shmq's own key for RocketMQ's fixed 10 s: how often a slave copies its master's topics,
    # offsets, delay offsets and subscription groups (slave_sync)
    slave_synchronize_interval: int = 10_000
    # controller mode (RocketMQ 5's names): the namesrv's controller decides the role at
    # start and elects a slave when the master stops; heartbeats every brokerHeartbeatInterval
    enable_controller_mode: bool = False
    broker_heartbeat_interval: int = 1_000
    store: MessageStoreConfig = field(default_factory=MessageStoreConfig)
    tuning: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _require(
            self.broker_role in BROKER_ROLES,
            "broker_role",
            self.broker_role,
            f"one of {', '.join(BROKER_ROLES)}",
        )
        if self.broker_role == "SLAVE":
            _require(self.broker_id > 0, "broker_id", self.broker_id, "> 0 for a SLAVE")
        else:
            _require(self.broker_id == 0, "broker_id", self.broker_id, "0 for a master")
        for name in ("broker_cluster_name", "broker_name"):
            value = getattr(self, name)
            _require(
                bool(value) and not any(c.isspace() for c in value),
                name,
                value,
                "a non-empty name without whitespace",
            )
        _range(self, "listen_port", 0, 65535)
        _range(self, "server_max_connections", 1, 65536)
        _range(self, "server_channel_max_idle_time_seconds", 1, 86400)
        _range(self, "server_frame_timeout_seconds", 1, 3600)
        _range(self, "broker_permission", 0, 15)
        _range(self, "default_topic_queue_nums", 1, 1024)
        for name in (
            "register_name_server_period",
            "flush_consumer_offset_interval",
            "short_polling_time_mills",
            "client_channel_max_idle_time_seconds",
            "channel_expired_timeout",
            "max_producers",
            "max_consumers",
            "max_queue_slots",
            "agent_restart_max",
            "transaction_check_interval",
            "transaction_check_max",
            "ha_send_heartbeat_interval",
            "ha_housekeeping_interval",
            "ha_transfer_batch_size",
            "ha_slave_fallbehind_max",
            "broker_heartbeat_interval",
            "slave_synchronize_interval",
            "process_reply_message_thread_pool_nums",
            "reply_thread_pool_queue_capacity",
        ):
            _range(self, name, 1)
        if self.enable_controller_mode:
            _require(self.listen_port > 0, "listen_port", self.listen_port,
                     "a fixed port in controller mode (brokers are known by it)")  # fmt: skip
        _range(self, "transaction_time_out", 0)
        for name in ("idle_spin_us", "idle_yield_us", "idle_park_us", "idle_linger_us",
                     "idle_batch_linger_us"):  # fmt: skip
            _range(self, name, 0, 1_000_000)
        _range(self, "idle_batch_min", 2)
        _require(self.idle_strategy in STRATEGIES, "idle_strategy", self.idle_strategy,
                 f"one of {', '.join(STRATEGIES)}")  # fmt: skip
        _power_of_two(self, "ring_size", MIN_RING_SIZE)
        _power_of_two(self, "ring_slots", MIN_RING_SLOTS)
        parse_host(f"{self.broker_ip1}:{self.listen_port}")
        _range(self, "ha_listen_port", 0, 65535)
        if self.ha_master_address:
            parse_host(self.ha_master_address)
        self.namesrv_addrs  # noqa: B018 - validates every address

    @property
    def ring_message_limit(self) -> int:
        """The largest body a producer ring takes: the ring less the largest record header
        (fixed fields, a 127-byte topic, 32 KiB of properties) and a closing blank."""
        return self.ring_size - RECORD_OVERHEAD_MAX

    @property
    def namesrv_addrs(self) -> list[str]:
        """``namesrvAddr`` split at ``;``, each checked to be ``ip:port``."""
        addrs = [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]
        for addr in addrs:
            parse_host(addr)
        return addrs

    @property
    def ha_port(self) -> int:
        """The port the master's HA service listens on (RocketMQ: listenPort + 1; any free
        port when the broker's own is chosen by the system, ``listenPort`` 0)."""
        if self.ha_listen_port or not self.listen_port:
            return self.ha_listen_port
        return self.listen_port + 1

    @property
    def is_slave(self) -> bool:
        return self.broker_role == "SLAVE"

    @property
    def derived_store_host(self) -> str:
        """The ``storeHost`` this broker has unless one is set: ``brokerIP1:listenPort``."""
        return f"{self.broker_ip1}:{self.listen_port}"

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> BrokerConfig:
        """Build from broker and store keys (camelCase or snake_case; strings converted)."""
        return cls().replace(**values)

    def replace(self, **overrides: Any) -> BrokerConfig:
        """A copy with broker or store keys (camelCase or snake_case) changed.

        A ``tuning`` key replaces the tuning table. ``store.store_host`` keeps following
        ``brokerIP1:listenPort`` unless it was set apart from them.
        """
        fields = {f.name: f for f in dataclasses.fields(self) if f.name not in _NOT_KEYS}
        store_fields = {f.name for f in dataclasses.fields(MessageStoreConfig)}
        changes: dict[str, Any] = {}
        store_changes: dict[str, Any] = {}
        for key, value in overrides.items():
            name = snake_case(key)
            if name in fields:
                changes[name] = _coerce(name, value, fields[name].type)
            elif name in store_fields:
                store_changes[name] = value
            elif name == "tuning":
                if not isinstance(value, Mapping):
                    raise ConfigError(f"tuning must be a table, not {type(value).__name__}")
                changes["tuning"] = dict(value)
            else:
                raise ConfigError(f"unknown broker config key {key!r}")
        store = self.store.replace(**store_changes) if store_changes else self.store
        follows = "store_host" not in store_changes and self.store.store_host in (
            self.derived_store_host,
            MessageStoreConfig.store_host,
        )
        if follows:
            ip = changes.get("broker_ip1", self.broker_ip1)
            port = changes.get("listen_port", self.listen_port)
            if 0 <= port <= 65535:  # else __post_init__ reports the port
                store = store.replace(store_host=f"{ip}:{port}")
        return dataclasses.replace(self, store=store, **changes)


def _require(ok: bool, name: str, value: Any, allowed: str) -> None:
    if not ok:
        raise ConfigError(f"{camel_case(name)} = {value!r} is invalid: must be {allowed}")


def _range(cfg: BrokerConfig, name: str, low: int, high: int | None = None) -> None:
    value = getattr(cfg, name)
    if value < low or (high is not None and value > high):
        allowed = f"in {low}..{high}" if high is not None else f">= {low}"
        _require(False, name, value, allowed)


def _power_of_two(cfg: BrokerConfig, name: str, low: int) -> None:
    value = getattr(cfg, name)
    _require(value >= low and not value & (value - 1), name, value, f"a power of two >= {low}")


def _coerce(name: str, value: Any, kind: Any) -> Any:
    """``value`` (a conf-file string, or a TOML value) as the field's type."""
    kind = kind if isinstance(kind, str) else kind.__name__
    text = value.strip() if isinstance(value, str) else value
    if kind == "bool":
        if isinstance(text, bool):
            return text
        if isinstance(text, str) and text.lower() in ("true", "false"):
            return text.lower() == "true"
    elif kind == "int":
        if isinstance(text, int) and not isinstance(text, bool):
            return text
        if isinstance(text, str) and re.fullmatch(r"[+-]?\d+", text):
            return int(text)
    elif isinstance(text, str):
        return text
    raise ConfigError(f"broker config {camel_case(name)} = {value!r} is not a valid {kind}")


def camel_case(snake: str) -> str:
    """``broker_cluster_name`` → ``brokerClusterName``; the inverse of ``snake_case`` for
    every config field (RocketMQ's acronyms and misspellings come from a table)."""
    alias = _CAMEL_ALIASES.get(snake)
    if alias is not None:
        return alias
    head, *rest = snake.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def load_broker_config(path: str | os.PathLike[str]) -> BrokerConfig:
    """Read a ``.toml`` file, or any other file as Java properties (RocketMQ's broker.conf).

    TOML keys may sit at the top level or in a ``[broker]`` table; a ``[store]`` table holds
    only store keys; a ``[tuning]`` table is kept as it is in ``BrokerConfig.tuning``.
    """
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise ConfigError(f"cannot read broker config {path}: {exc.strerror or exc}") from None
    if path.endswith(".toml"):
        try:
            data = tomllib.loads(raw.decode("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"broker config {path} is not valid TOML: {exc}") from None
        values = _toml_values(path, data)
    else:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("latin-1")  # what Java's Properties.load reads
        values = parse_properties(text)
    try:
        return BrokerConfig.from_mapping({**values, "broker_config_path": os.path.abspath(path)})
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _toml_values(path: str, data: dict[str, Any]) -> dict[str, Any]:
    store_fields = {f.name for f in dataclasses.fields(MessageStoreConfig)}
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key == "broker" and isinstance(value, dict):
            values.update(value)
        elif key == "store" and isinstance(value, dict):
            for store_key in value:
                if snake_case(store_key) not in store_fields:
                    raise ConfigError(f"{path}: [store] has unknown store key {store_key!r}")
            values.update(value)
        elif key == "tuning" and isinstance(value, dict):
            values["tuning"] = value
        else:
            values[key] = value
    return values


def to_properties(cfg: BrokerConfig, *, changed_only: bool = True) -> str:
    """``cfg`` as broker.conf text: camelCase keys, broker then store keys. By default
    only values that differ from the defaults, under a comment (``storeHost`` only when it
    is not ``brokerIP1:listenPort``); with ``changed_only=False`` every key, as RocketMQ's
    GET_BROKER_CONFIG lists them. ``tuning`` has no properties form and is left out."""
    default = BrokerConfig()
    lines = ["# shmq broker config: RocketMQ broker.conf keys, defaults left out"][:changed_only]
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if f.name not in _NOT_KEYS and (not changed_only or (
                f.compare and value != getattr(default, f.name))):  # fmt: skip
            lines.append(f"{camel_case(f.name)}={escape(_text(value))}")
    for f in dataclasses.fields(cfg.store):
        value = getattr(cfg.store, f.name)
        derived = f.name == "store_host" and value == cfg.derived_store_host
        if not changed_only or (not derived and value != getattr(default.store, f.name)):
            lines.append(f"{camel_case(f.name)}={escape(_text(value))}")
    return "\n".join(lines) + "\n"


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
