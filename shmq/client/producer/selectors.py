"""Message queue selectors (RocketMQ's ``MessageQueueSelector`` implementations) and the
producer's choice of a queue by selector or sharding key: same key, same queue, so the
messages of one key stay in order."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from shmq.client.producer.publish_info import TopicPublishInfo
from shmq.client.types import MessageQueue
from shmq.codec.jhash import java_hash
from shmq.errors import ClientError
from shmq.message import Message

MessageQueueSelector = Callable[[list[MessageQueue], Message, Any], MessageQueue]


def select_by_hash(queues: list[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """RocketMQ's ``SelectMessageQueueByHash``: ``abs(hashCode(arg)) % len(queues)``, with
    Java's ``String.hashCode`` for a str ``arg`` (same key → same queue)."""
    h = java_hash(arg) if isinstance(arg, str) else hash(arg)
    return queues[abs(h) % len(queues)]


def select_by_random(queues: list[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """RocketMQ's ``SelectMessageQueueByRandom``."""
    return queues[random.randrange(len(queues))]


def select_by(
    info: TopicPublishInfo,
    msg: Message,
    selector: MessageQueueSelector | None,
    arg: Any,
    sharding_key: str | None,
) -> MessageQueue:
    """The queue ``selector(queues, msg, arg)`` picks (it must be one of the topic's
    writable queues), or the sharding key's."""
    queues = info.queues
    if not queues:
        raise info.no_writable_queue()
    if sharding_key is not None:
        return queues[abs(java_hash(sharding_key)) % len(queues)]
    try:
        mq = selector(list(queues), msg, arg)  # type: ignore[misc]
    except Exception as exc:
        raise ClientError(
            f"the message queue selector failed for topic {info.topic}: {exc!r}"
        ) from exc
    try:
        known = mq in info.queue_set
    except TypeError:
        known = False
    if not known:
        raise ClientError(
            f"the message queue selector returned {mq!r}, which is not one of the "
            f"{len(queues)} writable queues of topic {info.topic}"
        )
    return mq
