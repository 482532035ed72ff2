"""RocketMQ's message properties: the names the system uses, the ones a user may not set,
and the ``name \\x01 value \\x02`` encoding (UTF-8; the decoder keeps a pair only when it has
a non-empty name and value, as RocketMQ's ``string2messageProperties``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from shmq.errors import InvalidPropertyError

PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
MAX_DELAY_LEVEL = 18  # messageDelayLevel "1s 5s 10s 30s 1m ... 2h" has 18 levels
KEY_SEPARATOR = " "
MAX_PROPERTIES_LENGTH = 32767

# MessageConst's names: users may not set these as their own properties.
RESERVED_PROPERTY_NAMES = frozenset(
    [
        "KEYS",
        "TAGS",
        "WAIT",
        "DELAY",
        "RETRY_TOPIC",
        "REAL_TOPIC",
        "REAL_QID",
        "TRAN_MSG",
        "PGROUP",
        "MIN_OFFSET",
        "MAX_OFFSET",
        "BUYER_ID",
        "ORIGIN_MESSAGE_ID",
        "TRANSFER_FLAG",
        "CORRECTION_FLAG",
        "MQ2_FLAG",
        "RECONSUME_TIME",
        "MSG_REGION",
        "TRACE_ON",
        "UNIQ_KEY",
        "MAX_RECONSUME_TIMES",
        "CONSUME_START_TIME",
        "TRAN_PREPARED_QUEUE_OFFSET",
        "TRANSACTION_CHECK_TIMES",
        "CHECK_IMMUNITY_TIME_IN_SECONDS",
        "INSTANCE_ID",
        "CORRELATION_ID",
        "REPLY_TO_CLIENT",
        "TTL",
        "ARRIVE_TIME",
        "PUSH_REPLY_TIME",
        "CLUSTER",
        "MSG_TYPE",
        "INNER_MULTI_DISPATCH",
        "INNER_MULTI_QUEUE_OFFSET",
        "__transactionId__",
        "__SHARDINGKEY",
        "SHARDING_KEY",
        "TIMER_DELIVER_MS",
        "TIMER_DELAY_SEC",
        "TIMER_ENQUEUE_MS",
        "TIMER_DEQUEUE_MS",
        "TIMER_ROLL_TIMES",
        "TIMER_OUT_MS",
        "TIMER_DEL_UNIQKEY",
        "TIMER_DELAY_LEVEL",
        "TIMER_DELAY_MS",
        "__CRC32#",
        "__BORNHOST",
        "BORN_TIMESTAMP",
        "TRACE_CONTEXT",
    ]
)


def _check_text(kind: str, text: Any) -> str:
    if not isinstance(text, str):
        raise InvalidPropertyError(f"{kind} must be a str, not {type(text).__name__}")
    if not text or text.isspace():
        raise InvalidPropertyError(f"{kind} {text!r} is empty or blank")
    if "\x01" in text or "\x02" in text:
        raise InvalidPropertyError(
            f"{kind} {text!r} contains a property separator (\\x01 or \\x02)"
        )
    return text


def build_properties(
    tags: str | None = None,
    keys: str | Iterable[str] = (),
    properties: Mapping[str, str] | None = None,
    *,
    system: Mapping[str, str] | None = None,
) -> bytes:
    """Encode tags, keys, user properties and trusted system properties as RocketMQ does.

    User property names must not be reserved; names and values must be non-empty and free
    of the separators. The result is at most 32767 bytes (PROPERTIES_SIZE_EXCEEDED).
    """
    parts: list[str] = []
    if tags is not None:
        parts.append(f"TAGS\x01{_check_text('tags', tags)}\x02")
    if keys:
        key_list = [keys] if isinstance(keys, str) else list(keys)
        for key in key_list:
            _check_text("key", key)
            if KEY_SEPARATOR in key:
                raise InvalidPropertyError(f"key {key!r} contains the key separator ' '")
        if key_list:
            parts.append(f"KEYS\x01{KEY_SEPARATOR.join(key_list)}\x02")
    if properties:
        for name, value in properties.items():
            _check_text("property name", name)
            if name in RESERVED_PROPERTY_NAMES:
                raise InvalidPropertyError(
                    f"property name {name!r} is reserved by RocketMQ; choose another name"
                )
            parts.append(f"{name}\x01{_check_text(f'property {name!r} value', value)}\x02")
    if system:
        parts.extend(f"{name}\x01{value}\x02" for name, value in system.items())
    raw = "".join(parts).encode()
    if len(raw) > MAX_PROPERTIES_LENGTH:
        raise InvalidPropertyError(
            f"properties are {len(raw)} bytes encoded, above the limit {MAX_PROPERTIES_LENGTH}",
            status="PROPERTIES_SIZE_EXCEEDED",
        )
    return raw


def decode_properties(raw: bytes | memoryview) -> dict[str, str]:
    """Parse ``name\\x01value\\x02`` pairs with RocketMQ's rules (empty values dropped)."""
    result: dict[str, str] = {}
    text = bytes(raw).decode("utf-8", "replace")
    for segment in text.split("\x02"):
        i = segment.find("\x01")
        if len(segment) >= 3 and 0 < i < len(segment) - 1:
            result[segment[:i]] = segment[i + 1 :]
    return result
