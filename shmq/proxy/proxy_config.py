"""The proxy's settings: RocketMQ 5.3's ``ProxyConfig`` defaults under its names, the few
that follow the broker's config, and shmq's bounds on what a gRPC peer may hold (streams,
long polls, bytes waiting for a slow reader)."""

from __future__ import annotations

from dataclasses import dataclass

from shmq.broker.config.broker_config import BrokerConfig
from shmq.remoting.security.tls import TlsOptions
from shmq.remoting.security.tls_server import ENFORCING

MAX_MSG_NUMS_FOR_POP_REQUEST = 32  # RocketMQ's cap on a POP's batch
GRPC_MAX_INBOUND_MESSAGE_SIZE = 130 << 20  # grpcMaxInboundMessageSize


@dataclass(frozen=True)
class ProxyConfig:
    """RocketMQ 5.3's ProxyConfig keys the gRPC activities read (times in ms)."""

    grpc_server_port: int = 8081
    grpc_client_producer_max_attempts: int = 3
    grpc_client_producer_backoff_initial_millis: int = 10
    grpc_client_producer_backoff_max_millis: int = 1000
    grpc_client_producer_backoff_multiplier: int = 2
    grpc_client_consumer_min_long_polling_timeout_millis: int = 5_000
    grpc_client_consumer_max_long_polling_timeout_millis: int = 20_000
    grpc_client_consumer_long_polling_batch_size: int = 32
    default_invisible_time_mills: int = 60_000
    min_invisible_time_mills_for_recv: int = 10_000
    max_invisible_time_mills: int = 12 * 3600_000
    max_message_size: int = 4 << 20
    max_user_property_size: int = 16 * 1024
    user_property_max_num: int = 128
    max_message_group_size: int = 64
    max_delay_time_mills: int = 24 * 3600_000
    max_transaction_recovery_second: int = 3600
    enable_topic_message_type_check: bool = True
    enable_message_body_empty_check: bool = True
    # shmq's bounds: a peer costs at most these (RocketMQ bounds its thread pools' queues)
    max_telemetry_streams: int = 1024  # open Telemetry streams, all clients together
    max_held_receives: int = 64  # ReceiveMessage calls waiting on the broker at once
    write_timeout_ms: int = 10_000  # a stream whose reader takes longer is ended
    broker_timeout_ms: int = 3_000  # a remoting request other than a long poll
    # TLS to the broker's control port: needed only when it enforces TLS (the proxy is on the
    # broker's host and dials brokerIP1, so any certificate is taken, as RocketMQ's do)
    broker_tls: TlsOptions | None = None

    @classmethod
    def of(cls, broker: BrokerConfig) -> ProxyConfig:
        """The proxy beside ``broker``: its port, and a message size the store takes."""
        return cls(
            grpc_server_port=broker.grpc_server_port,
            max_message_size=min(cls.max_message_size, broker.store.max_message_size),
            max_delay_time_mills=min(
                cls.max_delay_time_mills, broker.store.timer_max_delay_sec * 1000
            ),
            broker_tls=TlsOptions() if broker.tls_server.mode == ENFORCING else None,
        )
