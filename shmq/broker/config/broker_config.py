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
import difflib
import logging
import os
import re
import tomllib
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shmq.broker.config.rocketmq_keys import ignored_keys, ignored_reason
from shmq.config import MessageStoreConfig, parse_host, setting, snake_case
from shmq.errors import ConfigError
from shmq.ipc.idle import STRATEGIES, spare_cpus
from shmq.java_properties import escape, parse_properties
from shmq.remoting.frame_budget import MAX_BUFFERED_BYTES
from shmq.remoting.protocol import MAX_FRAME_SIZE
from shmq.remoting.security.tls import TlsOptions
from shmq.remoting.security.tls_server import TlsServerConfig

log = logging.getLogger(__name__)

BROKER_ROLES = ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE")
RECORD_OVERHEAD_MAX = 256 + 32 * 1024
MIN_RING_SIZE = 64 * 1024
MIN_RING_SLOTS = 16
# RocketMQ 5's MetricsExporterType, by number; shmq has all but LOG
METRICS_EXPORTERS = ("DISABLE", "OTLP_GRPC", "PROM", "LOG")
SERVED_EXPORTERS = ("DISABLE", "OTLP_GRPC", "PROM")

# Fields whose RocketMQ key is not the plain camelCase of the field name.
_CAMEL_ALIASES = {
    "broker_ip1": "brokerIP1",
    "use_tls": "useTLS",
    "check_crc_on_recover": "checkCRCOnRecover",
    "warm_mapped_file_enable": "warmMapedFileEnable",  # RocketMQ's spelling
}
# Fields that are not keys of a conf file.
NOT_KEYS = ("store", "tuning")


@dataclass(frozen=True)
class BrokerConfig:
    """Broker settings with RocketMQ 4.9 defaults (intervals in ms unless named otherwise).

    RocketMQ clamps ``registerNameServerPeriod`` to 10..60 s; shmq takes it as given, so
    tests can register every few hundred milliseconds. ``store.store_host`` follows
    ``brokerIP1:listenPort`` unless ``storeHost`` is set to something else.
    """

    broker_cluster_name: str = setting("DefaultCluster", "The cluster the broker registers in.")
    broker_name: str = setting(
        "broker-a", "The broker group's name: a master and its slaves share it."
    )
    broker_id: int = setting(0, "0 for a master, above 0 for a slave.")
    namesrv_addr: str = setting(
        "", "The NameServers to register with, `ip:port` separated by `;`.", shown="(none)"
    )
    listen_port: int = setting(
        10911,
        "The broker's TCP port (0: any free port): its data server's, which serves sends and "
        "pulls and relays every other request to the control server (on 127.0.0.1, any port).",
    )
    broker_ip1: str = setting(
        "127.0.0.1", "The IPv4 address the broker registers (and stores in messages)."
    )
    broker_role: str = setting(
        "ASYNC_MASTER",
        "`ASYNC_MASTER`, `SYNC_MASTER` (a send waits for the slave too) or `SLAVE`.",
    )
    broker_permission: int = setting(
        6, "The permission registered for the broker's topics: 6 read-write, 4 read, 2 write."
    )
    # Where a config came from is not a setting: configs compare and are written without it.
    broker_config_path: str = setting(
        "",
        "Set to the file the broker was started from (a value in the file is replaced): "
        "`updateBrokerConfig` writes the keys that act at the next start there.",
        shown="the `-c` file",
        compare=False,
    )
    acl_enable: bool = setting(
        False,
        "Every request (remoting and gRPC) is authenticated and authorized by the accounts "
        "of `plain_acl.yml` (RocketMQ 4.9's plain ACL; see ACL).",
    )
    acl_file: str = setting(
        "",
        "shmq's own: the ACL file (relative: to the broker.conf's folder); RocketMQ's is "
        "`conf/plain_acl.yml` (`-Drocketmq.acl.plain.file`).",
        shown="`plain_acl.yml` beside the `-c` file",
    )
    auto_create_topic_enable: bool = setting(True, "A send to an unknown topic creates it.")
    auto_create_subscription_group: bool = setting(
        True, "A consumer group is created when first used."
    )
    enable_property_filter: bool = setting(
        False,
        "Accept SQL92 subscriptions (`MessageSelector.by_sql`): PULL_MESSAGE and heartbeats "
        "with `expressionType=SQL92`, CHECK_CLIENT_CONFIG; off, they are refused as RocketMQ "
        "refuses them.",
    )
    rebalance_lock_max_live_time: int = setting(
        60_000,
        "How long an orderly consumer's queue lock lasts unless renewed (a system property "
        "in RocketMQ, `rocketmq.broker.rebalance.lockMaxLiveTime`).",
    )
    default_topic_queue_nums: int = setting(8, "Queues of an auto-created topic.")
    cluster_topic_enable: bool = setting(
        True, "Make the topic named after the cluster readable and writable."
    )
    broker_topic_enable: bool = setting(
        True, "Make the topic named after the broker readable and writable."
    )
    trace_topic_enable: bool = setting(
        False, "Create the message trace topic (msgTraceTopicName) at start, one queue."
    )
    msg_trace_topic_name: str = setting(
        "RMQ_SYS_TRACE_TOPIC", "The trace topic traceTopicEnable creates."
    )
    register_name_server_period: int = setting(
        30_000, "How often the broker registers with the namesrvs (not clamped to 10-60 s)."
    )
    flush_consumer_offset_interval: int = setting(
        5_000, "How often consumer offsets are written to `consumerOffset.json`."
    )
    long_polling_enable: bool = setting(
        True, "A pull that finds nothing waits for messages (long polling)."
    )
    short_polling_time_mills: int = setting(
        1_000, "How long such a pull waits without long polling."
    )
    server_channel_max_idle_time_seconds: int = setting(
        120, "A connection silent this many seconds is closed."
    )
    server_max_connections: int = setting(
        1024,
        "shmq's own: connections the broker's port (the data server) serves at once; the "
        "control server behind it takes as many relay links and 64 more.",
    )
    server_worker_threads: int = setting(
        8,
        "Threads that run requests, for all connections: the data server's sends and pulls, "
        "and as many again in the control server for the rest (one connection's requests "
        "run one at a time, in order; each server's event loop reads and writes every "
        "connection).",
    )
    server_frame_timeout_seconds: int = setting(
        30, "shmq's own: seconds a request frame may take to arrive once its length is read."
    )
    server_max_buffered_bytes: int = setting(
        MAX_BUFFERED_BYTES,
        "shmq's own: bytes of request frames over 64 KiB each server (the data server, the "
        "control server) holds at once, "
        "over all connections (reserved when a frame's length is read, released when its "
        "request is answered; at least the 16 MiB frame limit). A frame that finds no room "
        "within a second closes its connection, with a warning naming the peer; smaller "
        "frames are not counted (RocketMQ bounds each channel's buffers with water marks).",
    )
    channel_expired_timeout: int = setting(
        120_000, "A client without a heartbeat this long is dropped (fixed in RocketMQ)."
    )
    # A record never wraps in a ring, so the largest message that can be sent is about
    # ringSize less its header: 8 MiB holds the default maxMessageSize of 4 MiB.
    ring_size: int = setting(
        8 << 20,
        "shmq's own: bytes of each producer's shared-memory ring (a power of two); the "
        "largest message that can be sent is about this less its header.",
    )
    ring_slots: int = setting(65536, "shmq's own: completion slots of each ring (a power of two).")
    max_producers: int = setting(64, "shmq's own: producer rings the broker holds at once.")
    max_consumers: int = setting(
        256, "shmq's own: consumers on this host the broker serves at once."
    )
    max_queue_slots: int = setting(
        4096, "shmq's own: queues (topic and queue id) the shared queue table holds."
    )
    max_topics: int = setting(
        4096, "shmq's own: topics the shared topic table holds (clients look topics up there)."
    )
    max_held_pulls: int = setting(
        65536,
        "shmq's own: pulls held by long polling at once; past it a pull that finds nothing "
        "is answered at once.",
    )
    proxy_enable: bool = setting(
        True,
        "shmq's own: serve RocketMQ 5's gRPC `MessagingService` (the proxy in LOCAL mode) as a "
        "process of the broker's group, on `brokerIP1:grpcServerPort`.",
    )
    grpc_server_port: int = setting(
        8081, "The gRPC proxy's port, as RocketMQ proxy's `grpcServerPort` (0: any free port)."
    )
    # metrics: RocketMQ 5's exporter keys (``metrics.process`` serves them)
    metrics_exporter_type: str = setting(
        "DISABLE",
        "RocketMQ 5's: `PROM` (or `2`) serves the broker's metrics for Prometheus from a "
        "process of the broker's group (see Metrics); `OTLP_GRPC` (`1`) pushes them to "
        "`metricsGrpcExporterTarget` instead (the `otlp` extra); `DISABLE` (`0`) serves none. "
        "shmq has no `LOG` (3) exporter.",
    )
    metrics_prom_exporter_host: str = setting(
        "", "RocketMQ 5's: the address the metrics endpoint listens on.", shown="`brokerIP1`"
    )
    metrics_prom_exporter_port: int = setting(
        5557, "RocketMQ 5's: the metrics endpoint's port (0: any free port)."
    )
    metrics_label: str = setting(
        "", "RocketMQ 5's: constant labels added to every metric, `k1:v1,k2:v2`.",
        shown="(none)",
    )  # fmt: skip
    metrics_grpc_exporter_target: str = setting(
        "",
        "RocketMQ 5's: the OTLP collector `OTLP_GRPC` pushes to, `http://host:port` "
        "(plaintext) or `https://host:port` (TLS); `https://` is prepended when it does not "
        "start with `http`, and the scheme's port (80, 443) is taken when it names none. "
        "Required for `OTLP_GRPC`.",
        shown="(none)",
    )
    metrics_grpc_exporter_header: str = setting(
        "", "RocketMQ 5's: gRPC headers sent with every OTLP push, `k1:v1,k2:v2`.",
        shown="(none)",
    )  # fmt: skip
    metric_grpc_exporter_time_out_in_mills: int = setting(
        3_000, "RocketMQ 5's: how long one OTLP push may take."
    )
    metric_grpc_exporter_interval_in_mills: int = setting(
        60_000, "RocketMQ 5's: how often `OTLP_GRPC` pushes the metrics."
    )
    # TLS: RocketMQ's JVM properties ``tls.*`` (TlsSystemConfig) as broker.conf keys
    tls_server_mode: str = setting(
        "permissive",
        "RocketMQ's `tls.server.mode`: `disabled` (plain TCP only), `permissive` (TLS and plain "
        "TCP on the same port, told apart by the first byte) or `enforcing` (TLS only), for "
        "the control port and the master's HA port; the gRPC port serves TLS when enforcing, "
        "plaintext otherwise.",
    )
    tls_server_cert_path: str = setting(
        "", "RocketMQ's `tls.server.certPath`: the server's certificate chain (PEM).",
        shown="(none)",
    )  # fmt: skip
    tls_server_key_path: str = setting(
        "", "RocketMQ's `tls.server.keyPath`: the server's private key (PEM).", shown="(none)"
    )
    tls_server_key_password: str = setting(
        "", "RocketMQ's `tls.server.keyPassword`: the key's password, if it is encrypted.",
        shown="(none)",
    )  # fmt: skip
    tls_server_need_client_auth: str = setting(
        "none",
        "RocketMQ's `tls.server.need.client.auth`: `none`, `optional` or `require` a client "
        "certificate, checked against `tlsServerTrustCertPath`.",
    )
    tls_server_trust_cert_path: str = setting(
        "", "RocketMQ's `tls.server.trustCertPath`: the CA of client certificates (PEM).",
        shown="(none)",
    )  # fmt: skip
    tls_test_mode_enable: bool = setting(
        True,
        "RocketMQ's `tls.test.mode.enable`: without `tlsServerCertPath`, serve TLS with a "
        "self-signed certificate made at the first TLS connection.",
    )
    tls_config_file: str = setting(
        "",
        "RocketMQ's `tls.config.file`: a properties file of `tls.server.*` / "
        "`tls.test.mode.enable` values that override the keys above (RocketMQ's default, "
        "`/etc/rocketmq/tls.properties`, is not read unless named).",
        shown="(none)",
    )
    use_tls: bool = setting(
        False,
        "RocketMQ's `useTLS` (`tls.enable`): the broker's own connections (namesrv "
        "registration, a slave's to its master's control and HA ports) use TLS, trusting any "
        "server certificate. The slave's HA connection is shmq's addition (RocketMQ's HA port "
        "is plain TCP): a master with `tlsServerMode=enforcing` needs it on its slaves.",
    )
    revive_interval: int = setting(
        1000, "How often (ms) POP checkpoints past their invisible time are looked at."
    )
    revive_queue_num: int = setting(
        8, "Revive queues a POP checkpoint is assigned to in turn (its receipt's `reviveQid`)."
    )
    pop_from_retry_probability: int = setting(
        20, "Percent of POP requests that read the group's POP retry topic first."
    )
    pop_polling_size: int = setting(
        1024, "POP requests held by long polling per topic, group and queue."
    )
    max_pop_polling_size: int = setting(
        100_000, "POP requests held by long polling at once; past it POLLING_FULL."
    )
    idle_strategy: str = setting(
        "backoff",
        "shmq's own: how the writer waits for work: `backoff` (spin, yield, then park), "
        "`busy_spin` (so does reput where it runs: on a slave, or with `dispatchInline=false`; "
        "for hosts with cores to spare) or `park`; the other agents park. An agent whose next "
        "pass would only find nothing and park (work has lately come back later than a spin) "
        "parks right after its pass with work, its parked flag set before it looks once more.",
    )
    idle_spin_us: int = setting(50, "shmq's own: µs the backoff writer spins before it yields.")
    idle_yield_us: int = setting(0, "shmq's own: µs it then yields before it parks.")
    # a park ends at a post; its timeout only bounds what no one posts for (a stop, a
    # topic created on request are posted too): each wake-up costs ~80-150 µs of CPU on a
    # small VM, so 1 ms parks kept an idle writer and reput at 8 % of a core each, and 10 ms
    # ones an idle writer at 1.3 %: an idle agent's parks double up to 200 ms (agents.env)
    idle_park_us: int = setting(
        10_000,
        "shmq's own: the longest park, in µs, while work comes; an agent that stays idle "
        "doubles it park by park up to 200 ms.",
    )
    idle_linger_us: int = setting(
        200,
        "shmq's own: µs the writer stays awake after answering a sync send, whose sender "
        "comes straight back with the next one (while sync senders lately came back within "
        "it; below 4 CPUs yielding the CPU to any other runnable thread meanwhile).",
    )
    # 0 with 4 CPUs or more, where the agents may spin
    idle_batch_linger_us: int = setting(
        0 if spare_cpus() else 100,
        "shmq's own: µs the writer sleeps after a pass of `idleBatchMin` records or more "
        "that answered no waiting sync send, so that its next pass takes what a stream of "
        "async or oneway sends brought meanwhile (fewer passes, fewer wake-ups of reput).",
        shown="`0` with 4 CPUs or more, else `100`",
    )
    idle_batch_min: int = setting(
        4, "shmq's own: records of a pass that `idleBatchLingerUs` follows."
    )
    dispatch_inline: bool = setting(
        True,
        "shmq's own: on a master, the agent that makes records visible dispatches them "
        "(consume queues, index) and wakes the consumers itself once its producers are "
        "answered: the writer in ASYNC_FLUSH, the flush agent in SYNC_FLUSH. A message then "
        "crosses one parked hand-off fewer and no reput process runs; `false` keeps reput's "
        "process, as a slave always does.",
    )
    check_producer_crc: bool = setting(
        False,
        "shmq's own: also reject a ring record whose producer-computed body CRC differs (the "
        "writer computes every stored CRC either way).",
    )
    agent_restart_max: int = setting(
        5,
        "shmq's own: restarts of one agent within a minute, no client to blame, before the "
        "broker stops itself.",
    )
    store_reply_message_enable: bool = setting(
        True, "A reply is stored in the cluster's reply topic as well as pushed to its requester."
    )
    # RocketMQ's replyMessageExecutor: a requester slow to take its push holds a pool thread,
    # never the replier's connection
    process_reply_message_thread_pool_nums: int = setting(
        16 + 2 * (os.cpu_count() or 1),
        "Threads that push replies to their requesters.",
        shown="16 + 2 × CPUs",
    )
    reply_thread_pool_queue_capacity: int = setting(
        10_000, "Replies waiting for those threads; past it a reply is answered SYSTEM_BUSY."
    )
    max_reply_waiting_bytes: int = setting(
        256 << 20,
        "shmq's own: bytes of reply bodies waiting for those threads; past it a reply is "
        "answered SYSTEM_BUSY.",
        shown="`268435456` (256 MiB)",
    )
    transaction_time_out: int = setting(
        6_000, "A half message without an outcome is checked back once this old."
    )
    transaction_check_interval: int = setting(
        60_000, "How often half messages without an outcome are checked back."
    )
    transaction_check_max: int = setting(
        15, "Check-backs of a half message before it is discarded."
    )
    recall_message_enable: bool = setting(
        False,
        "RocketMQ 5.3's: RECALL_MESSAGE takes back a timer message before its time (off: "
        "answered NO_PERMISSION, as RocketMQ's default).",
    )
    allow_recall_when_broker_not_writeable: bool = setting(
        True, "RocketMQ 5.3's: a recall is taken even while the broker's permission is read-only."
    )
    # master/slave replication: RocketMQ 4.9's MessageStoreConfig HA keys
    ha_listen_port: int = setting(
        0, "The master's HA port (0: `listenPort` + 1).", shown="`0` (listenPort + 1)"
    )
    ha_master_address: str = setting(
        "",
        "A slave's master HA address, `ip:port` (none: learnt from the namesrv's answer).",
        shown="(none)",
    )
    ha_send_heartbeat_interval: int = setting(
        5_000, "How often a slave reports its offset to the master when idle."
    )
    ha_housekeeping_interval: int = setting(
        20_000, "A replication connection silent this long is closed."
    )
    ha_transfer_batch_size: int = setting(32 * 1024, "The most bytes the master sends at once.")
    ha_slave_fallbehind_max: int = setting(
        256 * 1024 * 1024,
        "A slave further behind than this (bytes) is not in sync: a SYNC_MASTER does not wait "
        "for it.",
    )
    slave_read_enable: bool = setting(
        False,
        "Consumers may read from a slave: a master sends a consumer far behind "
        "(`accessMessageInMemoryMaxRatio`) to it; without it a slave sends pulls back.",
    )
    slave_synchronize_interval: int = setting(
        10_000,
        "How often a slave copies its master's topics, offsets and groups (fixed at 10 s in "
        "RocketMQ).",
    )
    # controller mode uses RocketMQ 5's names
    enable_controller_mode: bool = setting(
        False,
        "RocketMQ 5's: the namesrv's controller decides the role at start and elects a slave "
        "when the master stops.",
    )
    broker_heartbeat_interval: int = setting(
        1_000, "RocketMQ 5's: how often a broker in controller mode reports to the controller."
    )
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
        _range(self, "grpc_server_port", 0, 65535)
        _range(self, "metrics_prom_exporter_port", 0, 65535)
        _require(self.metrics_exporter in SERVED_EXPORTERS, "metrics_exporter_type",
                 self.metrics_exporter_type, "DISABLE (0), OTLP_GRPC (1) or PROM (2)")  # fmt: skip
        self.metrics_labels  # noqa: B018 - validates metricsLabel
        self.metrics_grpc_headers  # noqa: B018 - validates metricsGrpcExporterHeader
        _range(self, "metric_grpc_exporter_time_out_in_mills", 1)
        _range(self, "metric_grpc_exporter_interval_in_mills", 1)
        if self.metrics_exporter == "OTLP_GRPC":
            self.metrics_grpc_endpoint  # noqa: B018 - validates metricsGrpcExporterTarget
        _range(self, "pop_from_retry_probability", 0, 100)
        _range(self, "server_max_connections", 1, 65536)
        _range(self, "server_worker_threads", 1, 1024)
        _range(self, "server_channel_max_idle_time_seconds", 1, 86400)
        _range(self, "server_frame_timeout_seconds", 1, 3600)
        _range(self, "server_max_buffered_bytes", MAX_FRAME_SIZE)
        _range(self, "broker_permission", 0, 15)
        _range(self, "default_topic_queue_nums", 1, 1024)
        for name in (
            "register_name_server_period",
            "flush_consumer_offset_interval",
            "short_polling_time_mills",
            "channel_expired_timeout",
            "max_producers",
            "max_consumers",
            "max_queue_slots",
            "max_topics",
            "max_held_pulls",
            "revive_interval",
            "revive_queue_num",
            "pop_polling_size",
            "max_pop_polling_size",
            "max_reply_waiting_bytes",
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
        self.tls_server  # noqa: B018 - validates the TLS keys (and reads tlsConfigFile)

    @property
    def ring_message_limit(self) -> int:
        """The largest body a producer ring takes: the ring less the largest record header
        (fixed fields, a 127-byte topic, 32 KiB of properties) and a closing blank."""
        return self.ring_size - RECORD_OVERHEAD_MAX

    @property
    def tls_server(self) -> TlsServerConfig:
        """The ``tls.server.*`` settings of the control, HA and gRPC ports, with
        ``tlsConfigFile``'s values over the keys'."""
        tls = TlsServerConfig(
            mode=self.tls_server_mode,
            cert_path=self.tls_server_cert_path,
            key_path=self.tls_server_key_path,
            key_password=self.tls_server_key_password,
            need_client_auth=self.tls_server_need_client_auth,
            trust_cert_path=self.tls_server_trust_cert_path,
            test_mode=self.tls_test_mode_enable,
        )
        return tls.with_file(self.tls_config_file) if self.tls_config_file else tls

    @property
    def tls_client(self) -> TlsOptions | None:
        """TLS for the broker's own connections (``useTLS``), or None."""
        return TlsOptions() if self.use_tls else None

    @property
    def metrics_exporter(self) -> str:
        """``metricsExporterType`` by name (RocketMQ accepts its number or its name)."""
        text = self.metrics_exporter_type.strip().upper()
        if text.isdigit() and int(text) < len(METRICS_EXPORTERS):
            return METRICS_EXPORTERS[int(text)]
        return text

    @property
    def metrics_enabled(self) -> bool:
        """Whether the broker has a metrics process (``metricsExporterType`` PROM or
        OTLP_GRPC)."""
        return self.metrics_exporter in ("PROM", "OTLP_GRPC")

    @property
    def metrics_labels(self) -> dict[str, str]:
        """``metricsLabel``'s ``k1:v1,k2:v2`` pairs (Prometheus label names as keys)."""
        return dict(_pairs(self, "metrics_label", r"[a-zA-Z_][a-zA-Z0-9_]*",
                           "keys of letters, digits and _"))  # fmt: skip

    @property
    def metrics_grpc_headers(self) -> list[tuple[str, str]]:
        """``metricsGrpcExporterHeader``'s ``k1:v1,k2:v2`` pairs as gRPC metadata: keys
        lowercased, as HTTP/2 sends them and grpcio requires."""
        pairs = _pairs(self, "metrics_grpc_exporter_header", r"[0-9a-zA-Z_.-]+",
                       "keys of letters, digits, _, . and -")  # fmt: skip
        return [(key.lower(), value) for key, value in pairs]

    @property
    def metrics_grpc_endpoint(self) -> tuple[str, bool]:
        """``metricsGrpcExporterTarget`` as gRPC's ``host:port`` and whether it is TLS.
        RocketMQ prepends ``https://`` to a target that does not start with ``http``, so a
        bare ``host:port`` is a TLS collector there and here."""
        target = self.metrics_grpc_exporter_target.strip()
        rule = "`http://host:port` or `https://host:port` when metricsExporterType is OTLP_GRPC"
        _require(bool(target), "metrics_grpc_exporter_target", target, rule)
        if not target.startswith("http"):
            target = "https://" + target
        url = urllib.parse.urlsplit(target)
        try:
            port = url.port or {"http": 80, "https": 443}.get(url.scheme)
        except ValueError:  # a port that is not a number, or out of range
            port = None
        ok = url.scheme in ("http", "https") and bool(url.hostname) and port is not None
        ok = ok and url.path in ("", "/")  # gRPC has no path: `ftp://x` became `https://ftp://x`
        _require(ok, "metrics_grpc_exporter_target", self.metrics_grpc_exporter_target, rule)
        host = f"[{url.hostname}]" if ":" in url.hostname else url.hostname
        return f"{host}:{port}", url.scheme == "https"

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
    def dispatcher(self) -> str:
        """The agent that runs reput's dispatch (``dispatchInline``): on a master the one
        that makes records visible, the writer, or in SYNC_FLUSH (which shows only flushed
        records) the flush agent; else reput in a process of its own."""
        if not self.dispatch_inline or self.is_slave:
            return "reput"
        return "flush" if self.store.sync_flush else "writer"

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
        fields = {f.name: f for f in dataclasses.fields(self) if f.name not in NOT_KEYS}
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
                raise ConfigError(f"unknown broker config key {key!r}{did_you_mean(key)}")
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


def _pairs(cfg: BrokerConfig, name: str, key_pattern: str, keys: str) -> list[tuple[str, str]]:
    """The ``k1:v1,k2:v2`` pairs of the key ``name`` (RocketMQ's format for metricsLabel and
    metricsGrpcExporterHeader), each key matching ``key_pattern`` (``keys`` says how)."""
    text = getattr(cfg, name)
    pairs = []
    for pair in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = pair.partition(":")
        ok = bool(sep and re.fullmatch(key_pattern, key.strip()))
        _require(ok, name, text, f"`key:value` pairs separated by commas, {keys}")
        pairs.append((key.strip(), value.strip()))
    return pairs


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
    RocketMQ's keys that mean nothing here (``shmq.broker.config.rocketmq_keys``) are dropped with
    one warning line each; any other name shmq does not know is a ``ConfigError`` naming the
    nearest key.
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
    values = _without_ignored(path, values)
    try:
        return BrokerConfig.from_mapping({**values, "broker_config_path": os.path.abspath(path)})
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _without_ignored(path: str, values: dict[str, Any]) -> dict[str, Any]:
    """``values`` without RocketMQ's keys that mean nothing here, each logged as one warning
    line with the reason, so RocketMQ's own broker.conf files load as they are."""
    kept = {}
    for name, value in values.items():
        reason = ignored_reason(name)
        if reason is None:
            kept[name] = value
        else:
            log.warning("%s: %s ignored: %s", path, name, reason)
    return kept


def did_you_mean(name: str) -> str:
    """`` (did you mean 'brokerName'?)`` for a misspelt key: the nearest of shmq's keys and
    RocketMQ's, or nothing when none is near."""
    keys = [camel_case(f.name) for f in dataclasses.fields(BrokerConfig) if f.name not in NOT_KEYS]
    keys += [camel_case(f.name) for f in dataclasses.fields(MessageStoreConfig)]
    near = difflib.get_close_matches(camel_case(snake_case(name)), keys + ignored_keys(), n=1)
    return f" (did you mean {near[0]!r}?)" if near else ""


def _toml_values(path: str, data: dict[str, Any]) -> dict[str, Any]:
    store_fields = {f.name for f in dataclasses.fields(MessageStoreConfig)}
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key == "broker" and isinstance(value, dict):
            values.update(value)
        elif key == "store" and isinstance(value, dict):
            for store_key in value:
                if snake_case(store_key) not in store_fields and not ignored_reason(store_key):
                    raise ConfigError(
                        f"{path}: [store] has unknown store key {store_key!r}"
                        f"{did_you_mean(store_key)}"
                    )
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
        if f.name not in NOT_KEYS and (not changed_only or (
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
