"""RocketMQ 5.3's checks of what a gRPC request names and carries (``GrpcValidator``, the
client ``Validators`` it calls, and SendMessage's message checks), each failing with the
``v2.Code`` and message RocketMQ's proxy answers."""

from __future__ import annotations

import re

from google.protobuf.timestamp_pb2 import Timestamp

from shmq.names import MAX_GROUP_LENGTH, MAX_TOPIC_LENGTH, is_system_topic
from shmq.properties import RESERVED_PROPERTY_NAMES
from shmq.proxy.status import Code, ProxyError

_NAME = re.compile(r"[%|a-zA-Z0-9_-]+")
_SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"  # MixAll.isSysConsumerGroup
# Guava's CharMatcher.javaIsoControl: U+0000..U+001F and U+007F..U+009F
_ISO_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def has_control(text: str) -> bool:
    return _ISO_CONTROL.search(text) is not None


def _check_name(kind: str, name: str, limit: int, code: int) -> None:
    """The client ``Validators.checkTopic`` / ``checkGroup`` rule and messages."""
    if not name or name.isspace():
        raise ProxyError(code, f"The specified {kind} is blank.")
    if len(name) > limit:
        raise ProxyError(code, f"The specified {kind} is longer than {kind} max length {limit}.")
    if not _NAME.fullmatch(name):
        raise ProxyError(
            code,
            f"The specified {kind}[{name}] contains illegal characters, "
            "allowing only ^[%|a-zA-Z0-9_-]+$",
        )


def validate_topic(topic: str) -> None:
    _check_name("topic", topic, MAX_TOPIC_LENGTH, Code.ILLEGAL_TOPIC)
    if is_system_topic(topic):
        raise ProxyError(Code.ILLEGAL_TOPIC, "cannot access system topic")


def validate_group(group: str) -> None:
    _check_name("group", group, MAX_GROUP_LENGTH, Code.ILLEGAL_CONSUMER_GROUP)
    if group.startswith(_SYSTEM_GROUP_PREFIX):
        raise ProxyError(Code.ILLEGAL_CONSUMER_GROUP, "cannot use system consumer group")


def validate_tag(tag: str) -> None:
    if not tag:
        return
    if tag.isspace():
        raise ProxyError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot be the char sequence of whitespace")
    if "|" in tag:
        raise ProxyError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain '|'")
    if has_control(tag):
        raise ProxyError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain control character")


def validate_key(key: str) -> None:
    if not key:
        return
    if key.isspace():
        raise ProxyError(Code.ILLEGAL_MESSAGE_KEY, "key cannot be the char sequence of whitespace")
    if has_control(key):
        raise ProxyError(Code.ILLEGAL_MESSAGE_KEY, "key cannot contain control character")


def validate_message_group(group: str, max_size: int) -> None:
    if not group:
        return
    if group.isspace():
        raise ProxyError(
            Code.ILLEGAL_MESSAGE_GROUP, "message group cannot be the char sequence of whitespace"
        )
    if len(group.encode("utf-8", "surrogatepass")) >= max_size:
        raise ProxyError(
            Code.ILLEGAL_MESSAGE_GROUP, f"message group exceed the max size {max_size}"
        )
    if has_control(group):
        raise ProxyError(
            Code.ILLEGAL_MESSAGE_GROUP, "message group cannot contain control character"
        )


def validate_user_properties(properties: dict[str, str], max_num: int) -> int:
    """Check the user properties; returns their UTF-8 size (keys and values)."""
    if len(properties) > max_num:
        raise ProxyError(
            Code.MESSAGE_PROPERTIES_TOO_LARGE, f"too many user properties, max is {max_num}"
        )
    size = 0
    for key, value in properties.items():
        if key in RESERVED_PROPERTY_NAMES:
            raise ProxyError(
                Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {key}"
            )
        if has_control(key):
            raise ProxyError(
                Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
                "the key of property cannot contain control character",
            )
        if has_control(value):
            raise ProxyError(
                Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
                "the value of property cannot contain control character",
            )
        size += utf8_size(key) + utf8_size(value)
    return size


def validate_invisible_time(invisible_ms: int, min_ms: int, max_ms: int) -> None:
    if invisible_ms < min_ms:
        raise ProxyError(
            Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too small. min is {min_ms}"
        )
    if max_ms > 0 and invisible_ms > max_ms:
        raise ProxyError(
            Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too large. max is {max_ms}"
        )


def timestamp_ms(stamp: Timestamp, code: int) -> int:
    """``stamp`` in milliseconds; ``code`` when it is outside protobuf's valid range (years
    1 to 9999). RocketMQ's proxy fails there too (``Timestamps.toMillis``), as an internal
    error; the message here names the likely cause: rocketmq-python-client 5.1 writes a
    message's ``delivery_timestamp`` into the Timestamp's seconds as given, so one given in
    milliseconds (its docstring's unit) lands a thousand times too far."""
    try:
        return stamp.ToMilliseconds()
    except ValueError:
        raise ProxyError(code, f"timestamp seconds {stamp.seconds} is out of range: "
                         "a Timestamp's seconds count seconds since the epoch, "
                         "not milliseconds") from None  # fmt: skip


def utf8_size(text: str) -> int:
    """Java's ``getBytes(UTF_8).length`` (a lone surrogate counts as its '?')."""
    return len(text.encode("utf-8", "replace"))
