"""What a producer checks before anything is sent (RocketMQ's ``Validators.checkMessage``
and ``checkTopic``), so a bad message fails in the caller with an error naming the problem."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from shmq.body_compression import CompressionType
from shmq.client.route import AUTO_CREATE_TOPIC_KEY
from shmq.errors import (
    ClientError,
    ConfigError,
    InvalidMessageError,
    InvalidTopicError,
    MessageTooLargeError,
)
from shmq.message import Message, validate_topic
from shmq.names import NOT_ALLOWED_SEND_TOPICS


def check_topic(topic: str) -> bytes:
    """The topic's bytes, if a client may send to it."""
    raw = validate_topic(topic)
    if topic in NOT_ALLOWED_SEND_TOPICS:
        raise InvalidTopicError(f"sending to the system topic {topic} is forbidden")
    if topic == AUTO_CREATE_TOPIC_KEY:
        raise InvalidTopicError(
            f"topic {topic} is the auto-create template (AUTO_CREATE_TOPIC_KEY_TOPIC); "
            f"send to a topic of your own"
        )
    return raw


# the levels each compressor takes (LZ4's frame is written at its default level: any)
_LEVELS = {CompressionType.ZLIB: range(-1, 10), CompressionType.ZSTD: range(-7, 23)}


def check_compression(ctype: CompressionType, over_howmuch: int, level: int) -> None:
    """A producer's compression options: a threshold of 0 bytes or more (bodies of that
    length or longer are compressed) and a level ``ctype`` takes."""
    if not isinstance(over_howmuch, int) or over_howmuch < 0:
        raise ConfigError(
            f"compress_msg_body_over_howmuch must be an int >= 0 bytes, not {over_howmuch!r}"
        )
    levels = _LEVELS.get(ctype)
    if not isinstance(level, int) or (levels is not None and level not in levels):
        span = "an int" if levels is None else f"in [{levels.start}, {levels.stop - 1}]"
        raise ConfigError(f"compress_level for {ctype.name} must be {span}, not {level!r}")


def check_selection(selector: Any, sharding_key: Any) -> None:
    if selector is not None and sharding_key is not None:
        raise ClientError("give a selector or a sharding_key, not both")
    if selector is not None and not callable(selector):
        raise ClientError(f"selector must be callable, not {type(selector).__name__}")
    if sharding_key is not None and not isinstance(sharding_key, str):
        raise ClientError(f"sharding_key must be a str, not {type(sharding_key).__name__}")


def check_body(topic: str, body: Any, limit: int) -> None:
    """A body must be bytes of 1..``limit`` (maxMessageSize) bytes."""
    if not isinstance(body, bytes | bytearray | memoryview):
        raise InvalidMessageError(
            f"message to topic {topic}: body must be bytes, not {type(body).__name__}"
        )
    size = len(body)
    if size == 0:
        raise MessageTooLargeError(
            f"message to topic {topic}: the body is empty; bodies must be 1..{limit} "
            f"bytes (maxMessageSize)"
        )
    if size > limit:
        raise MessageTooLargeError(
            f"message to topic {topic}: the body is {size} bytes, above maxMessageSize {limit}"
        )


def check_message(msg: Any, limit: int) -> None:
    if not isinstance(msg, Message):
        raise InvalidMessageError(f"expected a Message, not {type(msg).__name__}")
    check_topic(msg.topic)
    check_body(msg.topic, msg.body, limit)


def check_batch(messages: Sequence[Message], limit: int) -> str:
    """Every message valid and of one topic; returns the topic."""
    topic = None
    for m in messages:
        check_message(m, limit)
        if topic is None:
            topic = m.topic
        elif m.topic != topic:
            raise ClientError(f"a batch holds messages of one topic only: {topic}, {m.topic}")
    if topic is None:
        raise ClientError("a batch needs at least one message")
    return topic


def check_bulk_sizes(topic: str, offsets: np.ndarray, limit: int) -> None:
    """Every body of a bulk send 1..``limit`` bytes, checked over the boundaries at once."""
    sizes = np.diff(offsets)
    bad = (sizes < 1) | (sizes > limit)
    if bad.any():
        k = int(np.argmax(bad))
        size = int(sizes[k])
        if size < 0:
            raise InvalidMessageError(
                f"bulk send to topic {topic}: body boundaries decrease at body {k} "
                f"({int(offsets[k])} then {int(offsets[k + 1])})"
            )
        raise MessageTooLargeError(
            f"bulk send to topic {topic}: body {k} is {size} bytes ({int(bad.sum())} "
            f"bad of {sizes.shape[0]}); bodies must be 1..{limit} bytes (maxMessageSize)"
        )
