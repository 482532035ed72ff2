"""The broker's answers to a producer's ring records, read as the user sees them: a
rejection as an error saying why (and whether another attempt may succeed), a stored record
as a ``SendResult`` once it is as durable as the broker's flush mode promises.

This is the one place results are built, for sync, batch, async and bulk sends alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shmq.client.types import MessageQueue, SendResult, SendStatus
from shmq.errors import AttemptError, RemotingError, SendError, SendTimeoutError, ShmqError
from shmq.ipc import counters as cn
from shmq.ipc import ring
from shmq.ipc.durability import durability

if TYPE_CHECKING:
    from shmq.client.producer.link import ProducerLink

# Rejections worth another attempt (RocketMQ retries TOPIC_NOT_EXIST, SERVICE_NOT_AVAILABLE,
# SYSTEM_ERROR and NO_PERMISSION); a too-large body or an unsupported sysflag is final.
RETRYABLE_REASONS = frozenset(
    {
        ring.REASON_TOPIC_NOT_EXIST,
        ring.REASON_NO_PERMISSION,
        ring.REASON_QUEUE_ID,
        ring.REASON_SERVICE_NOT_AVAILABLE,
        ring.REASON_CORRUPT,
    }
)
STATUS_MASK = 0xFFFF


def retryable(exc: BaseException) -> bool:
    if isinstance(exc, AttemptError):
        return exc.retryable
    return isinstance(exc, SendTimeoutError | RemotingError)


def rejection(link: ProducerLink, mq: MessageQueue, packed: list[int]) -> AttemptError | None:
    """The error for answers whose first words are ``packed`` (status | reason << 16 |
    queue id << 32), or None when every record was stored."""
    bad = [p for p in packed if p & STATUS_MASK == ring.REJECTED]
    if not bad:
        return None
    n = len(packed)
    reason = (bad[0] >> 16) & 0xFFFF
    what = "the message" if n == 1 else f"{len(bad)} of {n} messages"
    stored = "" if len(bad) == n else f" ({n - len(bad)} were stored)"
    return AttemptError(
        f"broker {link.broker_name} rejected {what} to topic {mq.topic}: "
        f"{link.reason_text(reason)}{stored}",
        retryable=len(bad) == n and reason in RETRYABLE_REASONS,
        reason=reason,
    )


def flush_status(link: ProducerLink, end: int) -> SendStatus:
    """SEND_OK once the records up to ``end`` are as durable as the broker promises
    (``ipc.durability``); a failed flush raises."""
    if not link.waits:
        return SendStatus.SEND_OK
    return SendStatus(durability(link.ring, end, link.sync_flush, link.sync_master,
                                 link.fallbehind_max, link.flush_timeout))  # fmt: skip


def flushed(link: ProducerLink, end: int) -> bool:
    """Whether the records up to ``end`` are as durable as the broker promises, now."""
    return cn.durable_offset(link.counters, link.sync_flush, link.sync_master) >= end


def result(
    status: SendStatus, msg_id: str, mq: MessageQueue, answer: tuple[int, int, int],
    store_host: bytes, placed: bool = False,
) -> SendResult:  # fmt: skip
    """The ``SendResult`` of one stored record from its answer ``(packed, queue offset,
    physical offset)``; the queue is the answer's (the broker may have chosen another),
    but ``mq`` for a record ``placed`` in a system topic's queue (a delayed, retried or
    half message: RocketMQ's answer names the queue it was sent to)."""
    packed, queue_offset, physical_offset = answer
    qid = packed >> 32
    if qid != mq.queue_id and not placed:
        mq = MessageQueue(mq.topic, mq.broker_name, qid)
    return SendResult.answered(status, msg_id, mq, queue_offset, store_host, physical_offset)


def settle_failed(future, mq: MessageQueue, exc: BaseException) -> None:
    """Fail an async send's future after its last attempt (RocketMQ's
    ``onExceptionImpl``): with ``exc`` itself when the first attempt failed for good, else
    with a ``SendError`` (``SendTimeoutError`` for a timeout) naming the attempts."""
    attempts = future.attempts + 1
    if isinstance(exc, ShmqError) and not retryable(exc) and attempts == 1:
        future.settle(exc=exc)
        return
    cls = SendTimeoutError if isinstance(exc, SendTimeoutError) else SendError
    error = cls(f"async send to {mq} failed after {attempts} attempt(s): {exc}")
    error.__cause__ = exc
    future.settle(exc=error)
