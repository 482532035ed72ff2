"""Dead-letter queues: what a group gave up on, and putting it back.

``%DLQ%<group>`` is an ordinary topic (one queue, readable and writable): a message lands
there after ``max_reconsume_times`` failed attempts (or a negative delay level), with
``RETRY_TOPIC`` naming the topic it was first sent to and ``ORIGIN_MESSAGE_ID`` the first
stored copy. ``query_dlq`` lists it; ``resend_dlq`` sends copies back to their original
topics, where the group consumes them afresh (reconsume count 0), with their original
bodies (the resending producer compresses a large one again, as any send does; a body
that did not decompress is not resent). As in RocketMQ, a resent
message also stays in the DLQ: its consume queue is a log, not a set. ``Admin`` documents
each call.
"""

from __future__ import annotations

import base64
from typing import Any

from shmq.client.admin.message.queries import DEFAULT_QUERY_NUM, MessageQueries
from shmq.client.admin.remote import Remote
from shmq.errors import ClientError, NoRouteError
from shmq.message import Message
from shmq.names import dlq_topic
from shmq.properties import RESERVED_PROPERTY_NAMES

RESEND_GROUP = "shmq-dlq-resend"
RESEND_TIMEOUT_S = 3.0  # the resending producer's send_timeout
MAX_DLQ_QUERY = 65536


class DeadLetterQueues:
    """A group's DLQ, read with ``messages`` and resent by a producer of the namesrvs."""

    def __init__(self, remote: Remote, messages: MessageQueries) -> None:
        self._remote = remote
        self._messages = messages

    def query_dlq(self, group: str, max_num: int = DEFAULT_QUERY_NUM) -> list[dict[str, Any]]:
        try:
            found = self._messages.query_msg_by_time(dlq_topic(group), 0, max_num=max_num)
        except NoRouteError:
            return []
        for m in found:
            props = m.get("properties", {})
            m["originTopic"] = props.get("RETRY_TOPIC", "")
            m["originMsgId"] = props.get("ORIGIN_MESSAGE_ID", "")
            m["attempts"] = m.get("reconsumeTimes", 0)
        return found

    def resend_dlq(self, group: str, msg_id: str | None = None) -> list[dict[str, Any]]:
        found = self.query_dlq(group, MAX_DLQ_QUERY)
        if msg_id is not None:
            found = [m for m in found if msg_id in (m["msgId"], m["offsetMsgId"], m["originMsgId"])]
            if not found:
                raise ClientError(f"message {msg_id} is not in the DLQ of group {group}")
        # The one admin call that sends: the producer, and numba behind it, are imported
        # here, so that every other `shmq admin` command starts in 0.3 s, not 0.8 s.
        from shmq.client.producer.producer import Producer

        rows = []
        namesrv = self._remote.namesrvs
        with Producer(
            RESEND_GROUP,
            namesrv,
            send_timeout=RESEND_TIMEOUT_S,
            credentials=self._remote.credentials,
            tls=self._remote.tls,
        ) as producer:
            for m in found:
                row = {"msgId": m["msgId"], "originTopic": m["originTopic"]}
                if not m["originTopic"]:
                    row["error"] = "no RETRY_TOPIC property: the original topic is unknown"
                elif "bodyError" in m:
                    row["error"] = m["bodyError"]
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
