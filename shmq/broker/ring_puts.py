"""The broker's own puts: records the broker itself writes (a consumer's send-back, a
transaction's commit and op records, a check-back's copy) go through a producer ring of the
broker's own to the writer, like any producer's, so the writer stays the CommitLog's only
writer.

A caller appends a run of records back to back and waits once, for the last answer: the
writer answers in ring order, so every answer is in by then. A put that gets no answer in
time is a ``ResponseError`` (SYSTEM_ERROR) naming what was being written.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from shmq.errors import ShmqError
from shmq.ipc import ring
from shmq.ipc.ring_appender import DEFAULT_SPIN_US, Answer, RingAppender
from shmq.remoting.protocol import ResponseCode, ResponseError

if TYPE_CHECKING:
    from shmq.broker.agents.broker_names import BrokerNames
    from shmq.broker.client.slots import ClientSlot
    from shmq.broker.context import BrokerContext

PUT_TIMEOUT_S = 5.0


def broker_ring(ctx: BrokerContext, group: str, spin_us: int = DEFAULT_SPIN_US) -> RingAppender:
    """A producer ring of the broker's own process, registered like any producer's."""
    slot = ctx.clients.register_producer(os.getpid(), group)
    return RingAppender(ring_info(slot, ctx.names), ctx.counters, ctx.registry, spin_us)


def ring_info(slot: ClientSlot, names: BrokerNames) -> dict:
    """What attaches a ``RingAppender`` to producer ``slot`` (in any process of the
    broker's group: the data server appends to a ring the supervisor registered)."""
    return {
        "ring": slot.segment.name,
        "sem": slot.sem_name,
        "writerSem": names.agent_sem("writer"),
        "slot": slot.index,
    }


def put_records(
    appender: RingAppender,
    lock: threading.Lock,
    records: Sequence[bytes | bytearray],
    what: str,
    timeout_s: float = PUT_TIMEOUT_S,
) -> list[Answer]:
    """Append ``records`` to ``appender``'s ring (``lock`` serialises appenders) and return
    the writer's answers, in order; each may be a refusal (``refusal``)."""
    deadline = time.monotonic() + timeout_s
    with lock:
        try:
            first = appender.append_raws(records, deadline)
            if records:
                appender.wait_answer(first + len(records) - 1, deadline)
        except ShmqError as exc:
            raise ResponseError(ResponseCode.SYSTEM_ERROR, f"{what} failed: {exc}") from exc
        return [appender.answer(seq) for seq in range(first, first + len(records))]


def refusal(answer: Answer, what: str) -> ResponseError | None:
    """The error a refused put answers with (SERVICE_NOT_AVAILABLE when the store cannot
    take puts now), or None when the record was stored."""
    if answer.status != ring.REJECTED:
        return None
    code = (
        ResponseCode.SERVICE_NOT_AVAILABLE
        if answer.reason == ring.REASON_SERVICE_NOT_AVAILABLE
        else ResponseCode.SYSTEM_ERROR
    )
    return ResponseError(code, f"{what} refused: {ring.REASONS[answer.reason]}")
