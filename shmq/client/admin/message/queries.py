"""Messages looked up as mqadmin's ``queryMsgById``, ``queryMsgByKey``,
``queryMsgByUniqueKey`` and a query by store time find them, each as the brokers' JSON
(``message_to_json``'s shape), a message's trace timeline (``queryMsgTraceById``), and a
message consumed on request by a group member (``queryMsgById -g -d``, RocketMQ's
``consumeMessageDirectly``). ``Admin`` documents each call.

The brokers answer with bodies as stored; a compressed one (``sysFlag`` COMPRESSED) is
decompressed here, as RocketMQ's admin tools decode it, and one that does not decompress
stays as stored with ``bodyError`` saying why."""

from __future__ import annotations

import base64
import time
from typing import Any

from shmq.body_compression import COMPRESSED_FLAG, decompress
from shmq.client.admin.remote import Remote
from shmq.client.trace.encoder import TRACE_TOPIC
from shmq.client.trace.view import timeline, trace_records
from shmq.errors import (
    BodyDecompressionError,
    ClientError,
    InvalidMessageIdError,
    ResponseError,
    ShmqError,
)
from shmq.message import parse_offset_msg_id
from shmq.remoting.protocol import RequestCode, ResponseCode

DEFAULT_QUERY_NUM = 64
CONSUME_DIRECTLY_TIMEOUT_S = 8.0  # the broker gives a consumer 5 s, then says so


class MessageQueries:
    """Messages by offset message id, key, unique key or store time."""

    def __init__(self, remote: Remote) -> None:
        self._remote = remote

    def query_msg_by_id(self, msg_id: str, topic: str | None = None) -> dict[str, Any]:
        try:
            host, offset = parse_offset_msg_id(msg_id)
        except InvalidMessageIdError:
            if topic is None:
                raise
            return self.query_msg_by_unique_key(topic, msg_id)
        target = self._remote.by_store_host(host)
        if target is not None:
            try:
                return plain_body(self._remote.call(target, RequestCode.VIEW_MESSAGE_BY_ID,
                                                    {"offset": offset})[1])  # fmt: skip
            except ResponseError:
                if topic is None:
                    raise
        if topic is not None:
            return self.query_msg_by_unique_key(topic, msg_id)
        raise ClientError(
            f"message id {msg_id}: no broker stores messages at {host} (offset {offset});"
            " if it is a unique key (client msg id), give its topic"
        )

    def consume_message_directly(
        self, group: str, client_id: str, msg_id: str, topic: str | None = None
    ) -> dict[str, Any]:
        msg = self.query_msg_by_id(msg_id, topic)
        offset_id = msg["offsetMsgId"]
        target = self._remote.by_store_host(parse_offset_msg_id(offset_id)[0])
        if target is None:
            raise ClientError(f"message {offset_id}: no broker stores it any more")
        fields = {"consumerGroup": group, "clientId": client_id, "msgId": offset_id,
                  "topic": msg["topic"]}  # fmt: skip
        return self._remote.call(target, RequestCode.CONSUME_MESSAGE_DIRECTLY, fields,
                                 timeout=CONSUME_DIRECTLY_TIMEOUT_S)[1]  # fmt: skip

    def _query_index(self, topic: str, key: str, max_num: int, begin: int, end: int) -> list:
        found = []
        fields = {
            "topic": topic,
            "key": key,
            "maxNum": max_num,
            "beginTimestamp": begin,
            "endTimestamp": end,
        }
        for target in self._remote.topic_brokers(topic):
            try:
                body = self._remote.call(target, RequestCode.QUERY_MESSAGE, fields)[1]
                found += map(plain_body, body["messages"])
            except ResponseError as exc:
                if exc.code != ResponseCode.QUERY_NOT_FOUND:
                    raise
        return sorted(found, key=_store_order)

    def query_msg_by_key(
        self,
        topic: str,
        key: str,
        max_num: int = DEFAULT_QUERY_NUM,
        begin: int = 0,
        end: int | None = None,
    ) -> list[dict[str, Any]]:
        end = _now_ms() + 1000 if end is None else end
        found = [
            m
            for m in self._query_index(topic, key, max_num, begin, end)
            if key in m["keys"] and begin <= m["storeTimestamp"] <= end  # the index has seconds
        ]
        return found[-max_num:]

    def query_msg_by_unique_key(self, topic: str, msg_id: str) -> dict[str, Any]:
        found = [
            m
            for m in self._query_index(topic, msg_id, 32, 0, _now_ms() + 1000)
            if m["properties"].get("UNIQ_KEY") == msg_id
        ]
        if not found:
            raise ClientError(f"no message of topic {topic} has the unique key {msg_id}")
        return found[0]

    def query_msg_trace_by_id(
        self,
        msg_id: str,
        trace_topic: str = TRACE_TOPIC,
        begin: int = 0,
        end: int | None = None,
        max_num: int = DEFAULT_QUERY_NUM,
    ) -> dict[str, Any]:
        found = self.query_msg_by_key(trace_topic, msg_id, max_num, begin, end)
        line = timeline(msg_id, trace_records(msg_id, found))
        for pub in line["produce"]:  # where it was stored, while the broker still has it
            try:
                stored = self.query_msg_by_id(pub["offsetMsgId"])
            except ShmqError:
                continue
            pub.update(queueId=stored["queueId"], queueOffset=stored["queueOffset"],
                       storeTimestamp=stored["storeTimestamp"])  # fmt: skip
        return line

    def query_msg_by_time(
        self, topic: str, begin: int, end: int | None = None, max_num: int = DEFAULT_QUERY_NUM
    ) -> list[dict[str, Any]]:
        end = _now_ms() + 1000 if end is None else end
        fields = {"topic": topic, "beginTimestamp": begin, "endTimestamp": end, "maxNum": max_num}
        found = []
        for target in self._remote.topic_brokers(topic):
            body = self._remote.call(target, RequestCode.QUERY_MESSAGE_BY_TIME, fields)[1]
            found += map(plain_body, body["messages"])
        return sorted(found, key=_store_order)[:max_num]


def plain_body(msg: dict[str, Any]) -> dict[str, Any]:
    """A broker's message JSON with its body decompressed when its ``sysFlag`` says it is
    compressed (the flag cleared then, as RocketMQ's ``MessageDecoder`` clears it), or with
    ``bodyError`` when it does not decompress (the body left as stored)."""
    sysflag = msg.get("sysFlag", 0)
    if sysflag & COMPRESSED_FLAG:
        what = f"message {msg.get('msgId')} of {msg.get('topic')}"
        try:
            body = decompress(base64.b64decode(msg["body"]), sysflag, what)
        except BodyDecompressionError as exc:
            msg["bodyError"] = str(exc)
        else:
            msg["body"] = base64.b64encode(body).decode()
            msg["sysFlag"] = sysflag & ~COMPRESSED_FLAG
    return msg


def _store_order(msg: dict[str, Any]) -> tuple[int, str, int]:
    return msg["storeTimestamp"], msg.get("storeHost", ""), msg["commitLogOffset"]


def _now_ms() -> int:
    return int(time.time() * 1000)
