"""A concurrent push consumer's listener calls (RocketMQ's ``ConsumeMessageConcurrentlyService``
``ConsumeRequest.run``): what a listener returns, raises or acknowledges becomes the
messages consumed and those to consume again.

A listener returns ``ConsumeResult.CONSUME_SUCCESS`` or ``RECONSUME_LATER``; an exception,
or anything that is not a ``ConsumeResult``, counts as ``RECONSUME_LATER`` (logged). On
success the messages after ``ctx.ack_index`` still count as failed.
"""

from __future__ import annotations

import logging
from typing import Any

from shmq.client.types import ConsumeContext, ConsumeResult
from shmq.message import MessageBatch, MessageExt

log = logging.getLogger(__name__)

_SUCCESS = ConsumeResult.CONSUME_SUCCESS  # a module constant: one lookup per listener call


def call_in_chunks(
    listener: Any, group: str, msgs: list[MessageExt], request: Any, step: int
) -> tuple[list[MessageExt], list[MessageExt]]:
    """The listener on ``msgs`` (of ``request``, a consume request) in chunks of ``step``
    (``consume_message_batch_max_size``); returns the messages consumed and those that
    failed. The listener is called in this loop, not through ``call_listener``: with chunks
    of one message (RocketMQ's default) the loop is most of a no-op listener's cost."""
    mq = request.mq
    done: list[MessageExt] = []
    failed: list[MessageExt] = []
    for i in range(0, len(msgs), step):
        chunk = msgs[i : i + step]
        last = len(chunk) - 1
        ctx = ConsumeContext(mq, last)
        try:
            status = listener(chunk, ctx)
        except Exception as exc:
            ok = _raised(group, chunk, request, exc)
        else:
            ok = status is _SUCCESS or _judge(group, status)
        request.delay_level = ctx.delay_level_when_next_consume
        if ok and ctx.ack_index >= last:  # the usual case: the whole chunk consumed
            done += chunk
        elif ok:  # messages after ack_index failed (a negative one: all of them)
            ack = max(ctx.ack_index, -1) + 1
            done += chunk[:ack]
            failed += chunk[ack:]
        else:
            failed += chunk
        if request.abandoned:
            break
    return done, failed


def call_listener(
    listener: Any, group: str, msgs: list[MessageExt] | MessageBatch, request: Any
) -> bool:
    """One listener call on all of ``msgs`` (a bulk listener's batch); True for
    CONSUME_SUCCESS."""
    try:
        status = listener(msgs, ConsumeContext(request.mq, len(msgs) - 1))
    except Exception as exc:
        return _raised(group, msgs, request, exc)
    return status is _SUCCESS or _judge(group, status)


def _raised(
    group: str, msgs: list[MessageExt] | MessageBatch, request: Any, exc: Exception
) -> bool:
    log.warning("consumer %s: listener raised on %d message(s) of %s at offset %d: %r;"
                " consuming them later", group, len(msgs), request.mq, _first_offset(msgs),
                exc, exc_info=True)  # fmt: skip
    return False


def _judge(group: str, status: object) -> bool:
    """A listener's answer other than CONSUME_SUCCESS: always a failure."""
    if not isinstance(status, ConsumeResult):
        log.warning("consumer %s: listener returned %r, not a ConsumeResult; treated as"
                    " RECONSUME_LATER", group, status)  # fmt: skip
    return False


def _first_offset(msgs: list[MessageExt] | MessageBatch) -> int:
    return int(msgs.queue_offsets[0]) if isinstance(msgs, MessageBatch) else msgs[0].queue_offset
