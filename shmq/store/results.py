"""What the store answers: put and get statuses (RocketMQ's names) and result values."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from shmq.codec import java_hash
from shmq.errors import InvalidMessageError
from shmq.message import MessageExt, offset_msg_id


class PutStatus(enum.Enum):
    """RocketMQ's ``PutMessageStatus`` values that the store can answer."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"


class GetStatus(enum.Enum):
    """RocketMQ's ``GetMessageStatus``."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


class PutResult(NamedTuple):
    """Outcome of ``put``: status, where the record went, and its offset message id."""

    status: PutStatus
    physical_offset: int
    queue_offset: int
    store_timestamp: int
    store_host: bytes

    @property
    def ok(self) -> bool:
        return self.status is PutStatus.PUT_OK

    @property
    def msg_id(self) -> str:
        return offset_msg_id(self.store_host, self.physical_offset)

    def __repr__(self) -> str:
        return (
            f"PutResult(status={self.status.value}, physical_offset={self.physical_offset}, "
            f"queue_offset={self.queue_offset}, msg_id={self.msg_id!r})"
        )


@dataclass(frozen=True)
class BatchPutResult:
    """Outcome of ``put_batch``: one status for the batch and per-message offsets."""

    status: PutStatus
    queue_offsets: np.ndarray
    physical_offsets: np.ndarray
    store_timestamp: int
    store_host: bytes

    @property
    def ok(self) -> bool:
        return self.status is PutStatus.PUT_OK

    @property
    def count(self) -> int:
        return int(self.queue_offsets.shape[0])

    @property
    def msg_ids(self) -> list[str]:
        return [offset_msg_id(self.store_host, int(p)) for p in self.physical_offsets]


@dataclass(frozen=True)
class GetResult:
    status: GetStatus
    messages: list[MessageExt]
    next_begin_offset: int
    min_offset: int
    max_offset: int

    @property
    def found(self) -> bool:
        return self.status is GetStatus.FOUND


def parse_tag_filter(expression: str | None) -> np.ndarray | None:
    """``"A || B"`` → sorted Java hashes of the tags; ``None`` / ``"*"`` / ``""`` → no filter."""
    if expression is None or expression == "*" or expression.strip() in ("", "*"):
        return None
    tags = {t.strip() for t in expression.split("||") if t.strip()}
    if not tags:
        raise InvalidMessageError(f"tag expression {expression!r} names no tag")
    return np.array(sorted({java_hash(t) for t in tags}), dtype=np.int64)
