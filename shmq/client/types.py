"""Value types the clients return (RocketMQ's names, Pythonic spelling)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from shmq.message import MessageBatch, MessageExt, offset_msg_id


class MessageQueue(NamedTuple):
    """One queue of a topic on one broker: a frozen, ordered value (sorted by topic, broker
    name, queue id, as rebalancing needs). A named tuple, not a dataclass: a consumer hashes
    and compares its queues several times per message (process-queue, offset and wait
    tables), and a tuple does that in C (a dict lookup 25 ns against 170).

    Example::

        mq = MessageQueue("Orders", "broker-a", 3)
        consumer.seek(mq, 0)
    """

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


class SendResult:
    """The broker's answer to one sent message (a value: compare, print, ``to_json``).

    ``offset_msg_id`` (store host and CommitLog offset, as RocketMQ prints it) is decoded on
    first use: a producer answers many results that nobody reads that far.

    Example::

        result = producer.send(Message("Orders", b"paid"))
        print(result.send_status, result.msg_id, result.message_queue, result.queue_offset)
    """

    __slots__ = ("_offset_msg_id", "_physical_offset", "_store_host", "message_queue",
                 "msg_id", "queue_offset", "send_status")  # fmt: skip

    def __init__(
        self,
        send_status: SendStatus,
        msg_id: str,
        offset_msg_id: str,
        message_queue: MessageQueue,
        queue_offset: int,
    ) -> None:
        self.send_status = send_status
        self.msg_id = msg_id
        self._offset_msg_id = offset_msg_id
        self.message_queue = message_queue
        self.queue_offset = queue_offset

    @classmethod
    def answered(
        cls,
        send_status: SendStatus,
        msg_id: str,
        message_queue: MessageQueue,
        queue_offset: int,
        store_host: bytes,
        physical_offset: int,
    ) -> SendResult:
        """A result from a broker's answer (the offset message id decoded when read)."""
        result = cls.__new__(cls)
        result.send_status = send_status
        result.msg_id = msg_id
        result._offset_msg_id = None
        result.message_queue = message_queue
        result.queue_offset = queue_offset
        result._store_host = store_host
        result._physical_offset = physical_offset
        return result

    @property
    def offset_msg_id(self) -> str:
        if self._offset_msg_id is None:
            self._offset_msg_id = offset_msg_id(self._store_host, self._physical_offset)
        return self._offset_msg_id

    def _key(self) -> tuple:
        return (self.send_status, self.msg_id, self.offset_msg_id, self.message_queue,
                self.queue_offset)  # fmt: skip

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SendResult):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"SendResult(send_status={self.send_status}, msg_id={self.msg_id!r}, "
            f"offset_msg_id={self.offset_msg_id!r}, message_queue={self.message_queue!r}, "
            f"queue_offset={self.queue_offset})"
        )

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
    CommitLog offsets in the order given.

    Example::

        result = producer.send_bulk("Ticks", [b"a", b"b", b"c"])
        print(result.message_queue, result.queue_offsets[0], len(result))
    """

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


@dataclass(slots=True)  # not frozen: a frozen one's __init__ costs 0.7 µs of every pull
class PullResult:
    pull_status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)
    batch: MessageBatch | None = None  # what pull_bulk found
    # the broker id to pull this queue from next (a TCP pull's suggestWhichBrokerId)
    suggest_which_broker_id: int = 0


class MessageModel(enum.Enum):
    """CLUSTERING: the group shares the queues, offsets on the broker. BROADCASTING: every
    consumer of the group reads every queue, offsets in a local file."""

    CLUSTERING = "CLUSTERING"
    BROADCASTING = "BROADCASTING"


class ConsumeFromWhere(enum.Enum):
    """Where a group with no stored offset starts in a queue (RocketMQ's names, with or
    without the ``CONSUME_FROM_`` prefix)."""

    LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    TIMESTAMP = "CONSUME_FROM_TIMESTAMP"
    # RocketMQ's full names, as aliases of the same members
    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


class ConsumeResult(enum.Enum):
    """What a concurrent listener returns (RocketMQ's ``ConsumeConcurrentlyStatus``)."""

    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(enum.Enum):
    """What an orderly listener returns (RocketMQ's ``ConsumeOrderlyStatus``)."""

    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


@dataclass(slots=True)
class ConsumeOrderlyContext:
    """Passed to an orderly listener with each batch (RocketMQ's
    ``ConsumeOrderlyContext``): on SUSPEND the queue waits
    ``suspend_current_queue_time_millis`` (-1: the consumer's) before the same messages come
    again.

    Example::

        def on_step(msgs, ctx):
            if not ready(msgs[0]):
                ctx.suspend_current_queue_time_millis = 200  # the same message in 0.2 s
                return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            return ConsumeOrderlyStatus.SUCCESS
    """

    message_queue: MessageQueue
    suspend_current_queue_time_millis: int = -1


@dataclass(slots=True)
class ConsumeContext:
    """Passed to the listener with each batch (RocketMQ's
    ``ConsumeConcurrentlyContext``). On CONSUME_SUCCESS, messages after ``ack_index`` are
    still treated as failed, so a listener can acknowledge part of a batch.

    Example::

        def on_message(msgs, ctx):
            for i, msg in enumerate(msgs):
                if not handle(msg):
                    ctx.ack_index = i - 1  # msgs[i:] are consumed again later
                    break
            return ConsumeResult.CONSUME_SUCCESS
    """

    message_queue: MessageQueue
    ack_index: int
    delay_level_when_next_consume: int = 0
