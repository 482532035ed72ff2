"""A message's trace as a timeline (mqadmin ``queryMsgTraceById``): the records about one
message id in the trace messages a query by key found, decoded and put in order.

As RocketMQ's ``TraceView``, the client host of a record is the born host of the trace
message that carried it (the traced client sent it), and only the beans of the message
asked for count. A consume is a SubBefore and the SubAfter with its request id: the group,
the client, when it began, how long the listener took, how it ended and which attempt it
was (retryTimes).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from shmq.client.trace.encoder import (
    ConsumeReturnType,
    MessageType,
    TraceContext,
    TraceType,
    decode_body,
)


def _status(success: bool) -> str:
    return "success" if success else "failed"


def _name(kind: type, value: int) -> str:
    try:
        return kind(value).name
    except ValueError:
        return str(value)


def trace_records(msg_id: str, trace_messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every record about ``msg_id`` in ``trace_messages`` (``message_to_json``'s shape),
    with the client host that wrote it; trace messages whose body is not base64 are
    skipped."""
    out = []
    for tm in trace_messages:
        try:
            body = base64.b64decode(tm.get("body", ""), validate=True)
        except (binascii.Error, TypeError, ValueError):
            continue
        host = str(tm.get("bornHost", ""))
        for ctx in decode_body(body):
            beans = enumerate(ctx.beans)
            out += [_record(ctx, i, host) for i, bean in beans if bean.msg_id == msg_id]
    return out


def _record(ctx: TraceContext, i: int, client_host: str) -> dict[str, Any]:
    bean = ctx.beans[i]
    rec: dict[str, Any] = {
        "type": ctx.trace_type.value,
        "group": ctx.group_name,
        "clientHost": bean.client_host or client_host,
        "timeStamp": ctx.time_stamp,
        "regionId": ctx.region_id,
        "msgId": bean.msg_id,
        "keys": bean.keys,
    }
    t = ctx.trace_type
    if t is TraceType.Pub or t is TraceType.EndTransaction:
        rec.update(topic=bean.topic, tags=bean.tags, storeHost=bean.store_host,
                   msgType=_name(MessageType, bean.msg_type))  # fmt: skip
    if t is TraceType.Pub:
        rec.update(costTime=ctx.cost_time, status=_status(ctx.success),
                   bodyLength=bean.body_length, offsetMsgId=bean.offset_msg_id)  # fmt: skip
    elif t is TraceType.EndTransaction:
        rec.update(transactionId=bean.transaction_id, transactionState=bean.transaction_state,
                   fromTransactionCheck=bean.from_transaction_check)  # fmt: skip
    elif t is TraceType.SubBefore:
        rec.update(requestId=ctx.request_id, retryTimes=bean.retry_times)
    else:
        rec.update(requestId=ctx.request_id, costTime=ctx.cost_time, status=_status(ctx.success),
                   result=_name(ConsumeReturnType, ctx.context_code))  # fmt: skip
    return rec


def timeline(msg_id: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    """``records`` (``trace_records``) as the message's timeline: ``produce`` (Pub),
    ``transactions`` (EndTransaction) and ``consume`` (SubBefore joined with its SubAfter;
    a consume without its SubAfter is still running, or its record was lost), each by
    time."""
    by_time = sorted(records, key=lambda r: r["timeStamp"])
    befores = {r["requestId"]: r for r in by_time if r["type"] == TraceType.SubBefore.value}
    consume = []
    for after in (r for r in by_time if r["type"] == TraceType.SubAfter.value):
        before = befores.pop(after["requestId"], None)
        consume.append(_consume(before, after))
    consume += [_consume(before, None) for before in befores.values()]
    return {
        "msgId": msg_id,
        "produce": [r for r in by_time if r["type"] == TraceType.Pub.value],
        "transactions": [r for r in by_time if r["type"] == TraceType.EndTransaction.value],
        "consume": sorted(consume, key=lambda c: c["timeStamp"]),
    }


def _consume(before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, Any]:
    """One consume: ``before`` (its SubBefore) or ``after`` (its SubAfter) may be missing,
    not both."""
    first: dict[str, Any] = before if before is not None else after  # type: ignore[assignment]
    return {
        "group": first["group"],
        "clientHost": first["clientHost"],
        "timeStamp": first["timeStamp"],
        "retryTimes": before["retryTimes"] if before else None,
        "costTime": after["costTime"] if after else None,
        "status": after["status"] if after else "running",
        "result": after["result"] if after else None,
        "requestId": first["requestId"],
    }
