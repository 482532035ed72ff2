"""The settings a client's Telemetry stream announces, and what the proxy answers on it
(RocketMQ 5.3's ``GrpcClientSettingsManager``): a producer is told the proxy's retry policy
and message limits; a consumer its group's retry policy, the proxy's long-polling timeout
and batch size, and whether its group consumes orderly."""

from __future__ import annotations

from typing import Any

from google.protobuf.duration_pb2 import Duration

from shmq.proxy.proxy_config import ProxyConfig
from shmq.proxy.v2 import definition_pb2 as pb

DEFAULT_RETRY_MAX_TIMES = 16  # SubscriptionGroupConfig.retryMaxTimes
# CustomizedRetryPolicy's default: 1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h
CUSTOMIZED_BACKOFF_S = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200,
                        1800, 3600, 7200)  # fmt: skip
# ExponentialRetryPolicy's default: initial 5 s, max 2 h, multiplier 2
EXPONENTIAL_BACKOFF = (5_000, 7_200_000, 2)


def millis(ms: int) -> Duration:
    duration = Duration()
    duration.FromMilliseconds(ms)
    return duration


def stored_settings(settings: pb.Settings, config: ProxyConfig) -> pb.Settings:
    """What the proxy keeps of a client's settings: a consumer's overlaid on the defaults of
    a group without a config, as RocketMQ's ``updateClientSettings`` keeps them."""
    if not settings.HasField("subscription"):
        return settings
    merged = subscription_settings(pb.Settings(), config, None)
    merged.MergeFrom(settings)
    return merged


def effective_settings(
    settings: pb.Settings, config: ProxyConfig, group_config: dict[str, Any] | None
) -> pb.Settings:
    """The settings the proxy acts on and answers with (``getClientSettings``)."""
    if settings.HasField("publishing"):
        return producer_settings(settings, config)
    if settings.HasField("subscription") and group_config is not None:
        return subscription_settings(settings, config, group_config)
    return settings


def producer_settings(settings: pb.Settings, config: ProxyConfig) -> pb.Settings:
    merged = pb.Settings()
    merged.CopyFrom(settings)
    policy = merged.backoff_policy
    policy.max_attempts = config.grpc_client_producer_max_attempts
    policy.exponential_backoff.CopyFrom(pb.ExponentialBackoff(
        initial=millis(config.grpc_client_producer_backoff_initial_millis),
        max=millis(config.grpc_client_producer_backoff_max_millis),
        multiplier=config.grpc_client_producer_backoff_multiplier,
    ))  # fmt: skip
    merged.publishing.validate_message_type = config.enable_topic_message_type_check
    merged.publishing.max_body_size = config.max_message_size
    return merged


def subscription_settings(
    settings: pb.Settings, config: ProxyConfig, group_config: dict[str, Any] | None
) -> pb.Settings:
    """``mergeSubscriptionData``: ``group_config`` is the broker's JSON of the group (None:
    a group without one, RocketMQ's defaults). shmq's group configs have no
    ``consumeMessageOrderly`` (a 5.x key) yet: without it the client's own ``fifo`` stands."""
    group = group_config or {}
    merged = pb.Settings()
    merged.CopyFrom(settings)
    sub = merged.subscription
    sub.receive_batch_size = config.grpc_client_consumer_long_polling_batch_size
    sub.long_polling_timeout.CopyFrom(
        millis(config.grpc_client_consumer_max_long_polling_timeout_millis)
    )
    fifo = group.get("consumeMessageOrderly")
    sub.fifo = bool(fifo) if isinstance(fifo, bool) else settings.subscription.fifo
    retry_max_times = group.get("retryMaxTimes", DEFAULT_RETRY_MAX_TIMES)
    policy = merged.backoff_policy
    policy.max_attempts = int(retry_max_times) + 1
    retry_policy = group.get("groupRetryPolicy")
    kind = retry_policy.get("type") if isinstance(retry_policy, dict) else None
    if kind == "EXPONENTIAL":
        initial, maximum, multiplier = EXPONENTIAL_BACKOFF
        policy.exponential_backoff.CopyFrom(pb.ExponentialBackoff(
            initial=millis(initial), max=millis(maximum), multiplier=multiplier))  # fmt: skip
    else:
        policy.customized_backoff.CopyFrom(
            pb.CustomizedBackoff(next=[millis(s * 1000) for s in CUSTOMIZED_BACKOFF_S])
        )
    return merged


def max_attempts(settings: pb.Settings | None) -> int:
    """The attempts after which a received message goes to the DLQ instead."""
    if settings is None or not settings.HasField("backoff_policy"):
        return DEFAULT_RETRY_MAX_TIMES + 1
    return settings.backoff_policy.max_attempts
