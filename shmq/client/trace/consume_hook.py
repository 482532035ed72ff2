"""The consumer's trace hook (RocketMQ's ``ConsumeMessageTraceHookImpl``): a SubBefore
context before a listener call and a SubAfter context after it, joined by one request id.

A push consumer's listener is wrapped once at start (``wrap``), so a consumer without trace
calls its listener directly; a lite pull consumer records both when ``poll`` hands the
messages over (``polled``: success, as RocketMQ's ``DefaultLitePullConsumerImpl`` does).
A message whose ``TRACE_ON`` property is ``false`` is not traced. SubAfter's costTime is
the call's time divided among its messages; its contextCode says how the call ended
(``ConsumeReturnType``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from shmq.client.producer.records import UniqKeys
from shmq.client.trace.dispatcher import AsyncTraceDispatcher
from shmq.client.trace.encoder import (
    DEFAULT_REGION,
    NULL,
    ConsumeReturnType,
    TraceBean,
    TraceContext,
    TraceType,
)
from shmq.client.trace.send_hook import keys_text
from shmq.client.types import ConsumeOrderlyStatus, ConsumeResult
from shmq.message import MessageExt

_SUCCESS = (ConsumeResult.CONSUME_SUCCESS, ConsumeOrderlyStatus.SUCCESS)


class ConsumeMessageTraceHook:
    """Traces the consumer of ``group`` to ``dispatcher``; a listener call of
    ``consume_timeout`` seconds or more ends as TIME_OUT."""

    def __init__(
        self, group: str, dispatcher: AsyncTraceDispatcher, consume_timeout: float = 15 * 60.0
    ) -> None:
        self.group = group
        self.dispatcher = dispatcher
        self.consume_timeout = consume_timeout
        # requestId: a unique id as RocketMQ's createUniqID makes (uuid4 costs ~9x as much)
        self._request_ids = UniqKeys()

    def shutdown(self) -> None:
        self.dispatcher.shutdown()

    def wrap(self, listener: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        """``listener`` with a SubBefore before and a SubAfter after each call."""

        def traced(msgs: Sequence[MessageExt], ctx: Any) -> Any:
            before = self.before(msgs)
            try:
                status = listener(msgs, ctx)
            except BaseException:
                self.after(before, len(msgs), False, ConsumeReturnType.EXCEPTION)
                raise
            ok = status in _SUCCESS
            if status is None:
                code = ConsumeReturnType.RETURNNULL
            elif before is not None and time.time() * 1000 - before.time_stamp >= \
                    self.consume_timeout * 1000:  # fmt: skip
                code = ConsumeReturnType.TIME_OUT
            else:
                code = ConsumeReturnType.SUCCESS if ok else ConsumeReturnType.FAILED
            self.after(before, len(msgs), ok, code)
            return status

        return traced

    def polled(self, msgs: Sequence[MessageExt]) -> None:
        """Messages a lite pull consumer's ``poll`` returns: consumed, as far as it knows."""
        before = self.before(msgs)
        self.after(before, len(msgs), True, ConsumeReturnType.SUCCESS)

    def before(self, msgs: Sequence[MessageExt]) -> TraceContext | None:
        """The SubBefore context of ``msgs`` (queued), or None when none is traced."""
        beans = []
        region = DEFAULT_REGION
        for msg in msgs:
            props = msg.properties
            if props.get("TRACE_ON") == "false":
                continue
            region = props.get("MSG_REGION", region)
            beans.append(TraceBean(
                msg_id=msg.msg_id, topic=msg.topic, tags=msg.tags or NULL,
                keys=keys_text(msg.keys), retry_times=msg.reconsume_times,
            ))  # fmt: skip
        if not beans:
            return None
        now = time.time_ns() // 1_000_000
        ctx = TraceContext(TraceType.SubBefore, self.group, beans, now, region,
                           request_id=self._request_ids.key(now).decode())  # fmt: skip
        self.dispatcher.append(ctx)
        return ctx

    def after(
        self, before: TraceContext | None, n: int, success: bool, code: ConsumeReturnType
    ) -> None:
        """The SubAfter context that ends ``before``'s call on ``n`` messages."""
        if before is None:
            return
        now = int(time.time() * 1000)
        self.dispatcher.append(TraceContext(
            TraceType.SubAfter, self.group, before.beans, now, before.region_id,
            request_id=before.request_id, cost_time=(now - before.time_stamp) // max(n, 1),
            success=success, context_code=int(code),
        ))  # fmt: skip
