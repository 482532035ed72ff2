"""The small frozen value types ``Admin`` returns, each with ``to_json()`` giving
RocketMQ's field names."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from shmq.client.types import MessageQueue
from shmq.names import RETRY_GROUP_TOPIC_PREFIX


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


class _Json:
    def to_json(self) -> dict[str, Any]:
        """The fields under RocketMQ's (camelCase) names."""
        return {_camel(f.name): getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]


@dataclass(frozen=True)
class QueueStatus(_Json):
    """One queue of ``topic_status`` (RocketMQ's ``TopicOffset``)."""

    topic: str
    broker_name: str
    queue_id: int
    min_offset: int
    max_offset: int
    last_update_timestamp: int  # store time of the queue's last message, 0 when empty

    @property
    def message_queue(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker_name, self.queue_id)


@dataclass(frozen=True)
class QueueProgress(_Json):
    """One queue of ``consumer_progress`` (RocketMQ's ``OffsetWrapper``)."""

    topic: str
    broker_name: str
    queue_id: int
    broker_offset: int  # the queue's max offset
    consumer_offset: int  # the group's committed offset (0 when none, as RocketMQ)
    last_timestamp: int  # store time of the last consumed message, 0 when none

    @classmethod
    def from_entry(cls, e: dict[str, Any]) -> QueueProgress:
        """From a ``queue_entries`` row of a ``ConsumeStats`` offset table."""
        return cls(e["topic"], e["brokerName"], e["queueId"], e["brokerOffset"],
                   e["consumerOffset"], e["lastTimestamp"])  # fmt: skip

    @property
    def diff(self) -> int:
        """The lag: messages stored but not yet consumed."""
        return self.broker_offset - self.consumer_offset

    @property
    def message_queue(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker_name, self.queue_id)

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "diff": self.diff}


@dataclass(frozen=True)
class ConsumerProgress(_Json):
    """A group's progress over every broker (RocketMQ's ``ConsumeStats``)."""

    group: str
    queues: tuple[QueueProgress, ...]
    consume_tps: float = 0.0
    dlq_messages: int = 0  # messages in %DLQ%<group>

    @property
    def diff_total(self) -> int:
        """The total lag over all queues (the retry topic's included, as RocketMQ)."""
        return sum(q.diff for q in self.queues)

    @property
    def retry_diff(self) -> int:
        """The lag of the group's retry topic: failed messages waiting to come again."""
        return sum(q.diff for q in self.queues if q.topic.startswith(RETRY_GROUP_TOPIC_PREFIX))

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "queues": [q.to_json() for q in self.queues],
            "consumeTps": self.consume_tps,
            "diffTotal": self.diff_total,
            "retryDiff": self.retry_diff,
            "dlqMessages": self.dlq_messages,
        }
