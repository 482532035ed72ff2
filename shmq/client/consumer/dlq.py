"""Dead-letter queues: what a group gave up on, and putting it back.

``%DLQ%<group>`` is an ordinary topic (one queue, readable and writable): a message lands
there after ``max_reconsume_times`` failed attempts (or a negative delay level), with
``RETRY_TOPIC`` naming the topic it was first sent to and ``ORIGIN_MESSAGE_ID`` the first
stored copy. ``query_dlq`` lists it; ``resend_dlq`` sends copies back to their original
topics, where the group consumes them afresh (reconsume count 0). As in RocketMQ, a resent
message also stays in the DLQ: its consume queue is a log, not a set.
"""

from __future__ import annotations

import base64
from typing import Any

from shmq.errors import ClientError, NoRouteError
from shmq.message import Message
from shmq.names import dlq_topic
from shmq.properties import RESERVED_PROPERTY_NAMES

RESEND_GROUP = "shmq-dlq-resend"
MAX_DLQ_QUERY = 65536


def query_dlq(admin: Any, group: str, max_num: int = 64) -> list[dict[str, Any]]:
    """The first ``max_num`` messages in the group's DLQ (``message_to_json``'s shape plus
    ``originTopic``, ``attempts`` and ``originMsgId``), oldest first; [] when the group has
    no DLQ yet."""
    try:
        found = admin.query_msg_by_time(dlq_topic(group), 0, max_num=max_num)
    except NoRouteError:
        return []
    for m in found:
        props = m.get("properties", {})
        m["originTopic"] = props.get("RETRY_TOPIC", "")
        m["originMsgId"] = props.get("ORIGIN_MESSAGE_ID", "")
        m["attempts"] = m.get("reconsumeTimes", 0)
    return found


def resend_dlq(
    admin: Any, group: str, msg_id: str | None = None, *, send_timeout: float = 3.0
) -> list[dict[str, Any]]:
    """Send DLQ messages back to their original topic: the one whose msg id, offset msg id
    or origin msg id is ``msg_id``, or all of them (``msg_id`` None). Returns one row per
    message: ``msgId``, ``originTopic`` and the new ``sendMsgId`` (or ``error``).
    ``ClientError`` when ``msg_id`` is not in the DLQ."""
    from shmq.client.producer.producer import Producer

    found = query_dlq(admin, group, MAX_DLQ_QUERY)
    if msg_id is not None:
        found = [m for m in found if msg_id in (m["msgId"], m["offsetMsgId"], m["originMsgId"])]
        if not found:
            raise ClientError(f"message {msg_id} is not in the DLQ of group {group}")
    rows = []
    namesrv = ";".join(admin.namesrv_addrs)
    with Producer(RESEND_GROUP, namesrv, send_timeout=send_timeout) as producer:
        for m in found:
            row = {"msgId": m["msgId"], "originTopic": m["originTopic"]}
            if not m["originTopic"]:
                row["error"] = "no RETRY_TOPIC property: the original topic is unknown"
            else:
                try:
                    row["sendMsgId"] = producer.send(_original(m)).msg_id
                except Exception as exc:
                    row["error"] = str(exc)
            rows.append(row)
    return rows


def _original(m: dict[str, Any]) -> Message:
    """The DLQ message as its producer sent it: body, flag, tags, keys and its own
    properties (RocketMQ's system properties left out)."""
    props = {k: v for k, v in m.get("properties", {}).items() if k not in RESERVED_PROPERTY_NAMES}
    return Message(
        m["originTopic"],
        base64.b64decode(m["body"]),
        tags=m.get("tags"),
        keys=m.get("keys") or (),
        properties=props,
        flag=m.get("flag", 0),
    )
