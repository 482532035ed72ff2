"""Value types the clients return (RocketMQ's names, Pythonic spelling)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np

from shmq.message import MessageExt


@dataclass(frozen=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker."""

    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        return (
            f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, "
            f"queueId={self.queue_id}]"
        )


class SendStatus(enum.Enum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass(frozen=True)
class SendResult:
    send_status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int

    def to_json(self) -> dict:
        return {
            "sendStatus": self.send_status.value,
            "msgId": self.msg_id,
            "offsetMsgId": self.offset_msg_id,
            "topic": self.message_queue.topic,
            "brokerName": self.message_queue.broker_name,
            "queueId": self.message_queue.queue_id,
            "queueOffset": self.queue_offset,
        }


@dataclass(frozen=True)
class BulkSendResult:
    """The outcome of ``Producer.send_bulk``: one queue, the messages' queue offsets and
    CommitLog offsets in the order given."""

    send_status: SendStatus
    message_queue: MessageQueue
    queue_offsets: np.ndarray
    physical_offsets: np.ndarray

    def __len__(self) -> int:
        return int(self.queue_offsets.shape[0])


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass(frozen=True)
class PullResult:
    pull_status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)
