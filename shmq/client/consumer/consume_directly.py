"""CONSUME_MESSAGE_DIRECTLY: an admin has one member of a consumer group consume one stored
message now (``mqadmin queryMsgById -g GROUP -d CLIENT_ID``, RocketMQ's
``consumeMessageDirectly``), for example to see what its listener makes of a message that
keeps failing.

The broker sends the member the whole record; the member calls its listener with that one
message, on a thread of its own (the listener may take its time; the connection's reader
goes on), and answers RocketMQ's ``ConsumeMessageDirectlyResult``: whether the consumer is
orderly, ``autoCommit``, the outcome (``CR_SUCCESS``, ``CR_LATER``, ``CR_RETURN_NULL`` for
anything but a status, ``CR_THROW_EXCEPTION`` with the exception as the remark) and the time
spent. Nothing else changes: no offset moves, no retry is sent.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from shmq.client.consumer.consume_retry import restore_topics
from shmq.client.types import (
    ConsumeContext,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    ConsumeResult,
    MessageQueue,
)
from shmq.codec.record_message import record_message
from shmq.remoting import fastjson
from shmq.remoting.protocol import RemotingCommand, ResponseCode

log = logging.getLogger(__name__)

_OUTCOMES = {
    ConsumeResult.CONSUME_SUCCESS: "CR_SUCCESS",
    ConsumeResult.RECONSUME_LATER: "CR_LATER",
    ConsumeOrderlyStatus.SUCCESS: "CR_SUCCESS",
    ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT: "CR_LATER",
}


def consume_directly(listener: Callable, orderly: bool, request: RemotingCommand) -> Future:
    """The future of the response to ``request``: the listener's outcome on its message,
    computed on a new thread."""
    answer: Future = Future()
    msg = record_message(bytes(request.body))
    if msg is None:
        why = "the message to consume is not one record"
        answer.set_result(RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, why))
        return answer
    mq = MessageQueue(msg.topic, request.ext_fields.get("brokerName", ""), msg.queue_id)

    def run() -> None:
        body = fastjson.dumps(outcome(listener, orderly, [msg], mq)).encode()
        answer.set_result(RemotingCommand.response_to(request, body=body))

    threading.Thread(target=run, name="shmq-consume-directly", daemon=True).start()
    return answer


def outcome(listener: Callable, orderly: bool, msgs: list, mq: MessageQueue) -> dict[str, Any]:
    """RocketMQ's ``ConsumeMessageDirectlyResult`` of one listener call."""
    restore_topics(msgs)
    ctx = ConsumeOrderlyContext(mq) if orderly else ConsumeContext(mq, len(msgs) - 1)
    result: dict[str, Any] = {"order": orderly, "autoCommit": True}
    began = time.monotonic()
    try:
        status = listener(msgs, ctx)
        result["consumeResult"] = _OUTCOMES.get(status, "CR_RETURN_NULL")
    except Exception as exc:
        log.warning("consumeMessageDirectly: the listener raised on %s: %r", msgs[0].msg_id, exc)
        result["consumeResult"] = "CR_THROW_EXCEPTION"
        result["remark"] = f"{type(exc).__name__}: {exc}"
    result["spentTimeMills"] = int((time.monotonic() - began) * 1000)
    return result
