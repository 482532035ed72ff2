"""The broker's answers to mqadmin's queue inspection: ``queryCq`` (QUERY_CONSUME_QUEUE: a
queue's units as the consume queue holds them), a group's consume time span per queue
(QUERY_CONSUME_TIME_SPAN: the store times of the first, last and last consumed message,
and how long the next one has waited) and the system topics
(GET_SYSTEM_TOPIC_LIST_FROM_BROKER).

RocketMQ's ``AdminBrokerProcessor`` answers these; the bodies are its
``QueryConsumeQueueResponseBody``, ``QueryConsumeTimeSpanBody`` and ``TopicList``. Store
lookups go through the store view (queue maxima, min offsets, store times), so they answer
as ``topicStatus`` does.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, ClassVar

from shmq.broker.processors.admin.topics import existing_topic
from shmq.broker.processors.processor import Processor
from shmq.broker.processors.responses import json_response
from shmq.broker.topic.config import system_topics
from shmq.errors import ResponseError
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode
from shmq.remoting.server import Connection

Rc = ResponseCode

MAX_QUERY_UNITS = 10_000  # consume-queue units one QUERY_CONSUME_QUEUE answers at most


class QueueInspection(Processor):
    """The three codes above; store lookups from the store view (``ctx.store``)."""

    CODES: ClassVar[Mapping[int, str]] = {
        RequestCode.QUERY_CONSUME_QUEUE: "query_consume_queue",
        RequestCode.QUERY_CONSUME_TIME_SPAN: "consume_time_span",
        RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: "system_topics",
    }

    def query_consume_queue(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """mqadmin ``queryCq``: up to ``count`` units from queue offset ``index``, each its
        CommitLog offset, size and tags code, with the queue's min and max offsets. With
        ``consumerGroup``: that group's subscription to the topic, and per unit whether its
        tag filter takes it (``eval``; RocketMQ fills it only from a consume-queue
        extension, which shmq does not keep). A queue with no message yet answers
        SYSTEM_ERROR and an index outside the queue SUCCESS with a remark, as RocketMQ
        does; that answer also has a body, without units (RocketMQ's has none, which its
        own client cannot decode)."""
        topic, queue_id = request.ext_topic(), request.ext_int("queueId")
        index, count = request.ext_int("index"), request.ext_int("count")
        if not 0 < count <= MAX_QUERY_UNITS:
            raise ResponseError(
                Rc.SYSTEM_ERROR, f"count {count} is not within 1..{MAX_QUERY_UNITS}"
            )
        store = self.ctx.store
        if store.slot(topic, queue_id) < 0:
            raise ResponseError(Rc.SYSTEM_ERROR, f"{queue_id}@{topic} is not exist!")
        low, high = store.min_offset(topic, queue_id), store.max_offset(topic, queue_id)
        body: dict[str, Any] = {"maxQueueIndex": high, "minQueueIndex": low}
        codes: frozenset[int] | None = frozenset()  # no group: no unit is evaluated
        group = request.ext_fields.get("consumerGroup")
        if group is not None:
            info = self.ctx.consumers.group_info(group) or {}
            subscription = info.get("subscriptionTable", {}).get(topic)
            body["subscriptionData"] = subscription
            if subscription is None:
                body["filterData"] = f"{group}@{topic} is not online!"
            else:
                body["filterData"] = "null"  # no SQL92 filter data: fastjson's null
                codes = _tag_codes(subscription)
        units: list[tuple[int, int, int]] = []
        if not low <= index < high:
            body["queueData"] = units
            remark = f"Index {index} of {queue_id}@{topic} is not exist!"
            return RemotingCommand.response_to(
                request, remark=remark, body=RemotingCommand.body_json(body)
            )
        with store.reading() as reader:
            offset, end = index, min(index + count, high)
            while offset < end:
                found, _ = reader.units(topic, queue_id, offset, end)
                if not found.size:
                    break
                units += found.tolist()
                offset += found.size
        body["queueData"] = [_unit(phys, size, tags, codes) for phys, size, tags in units]
        return json_response(request, body)

    def consume_time_span(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """Per write queue of ``topic``: the store times of its first and last messages,
        of the last message ``group`` consumed (the first message's when it has consumed
        none) and, while it lags, how long ago its next message was stored (ms). A time
        the store lacks is -1, as RocketMQ's."""
        topic, group = request.ext_topic(), request.ext_group("group")
        cfg = existing_topic(self.ctx, topic)
        name = self.ctx.config.broker_name
        now_ms = int(time.time() * 1000)
        spans = []
        for qid in range(cfg.write_queue_nums):
            high = self.ctx.store.max_offset(topic, qid)
            first = self._stamp(topic, qid, self.ctx.store.min_offset(topic, qid), high)
            consumed = self.ctx.offsets.query(group, topic, qid)
            span = {
                "messageQueue": {"topic": topic, "brokerName": name, "queueId": qid},
                "minTimeStamp": first,
                "maxTimeStamp": self._stamp(topic, qid, high - 1, high),
                "consumeTimeStamp": (
                    self._stamp(topic, qid, consumed - 1, high) if consumed > 0 else first
                ),
                "delayTime": 0,
            }
            if max(consumed, 0) < high:
                span["delayTime"] = now_ms - self._stamp(topic, qid, max(consumed, 0), high)
            spans.append(span)
        return json_response(request, {"consumeTimeSpanSet": spans})

    def _stamp(self, topic: str, queue_id: int, offset: int, high: int) -> int:
        if not 0 <= offset < high:
            return -1
        return self.ctx.store.store_timestamp(topic, queue_id, offset) or -1

    def system_topics(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """RocketMQ's system topic set, with this broker's cluster and broker names."""
        cfg = self.ctx.config
        topics = sorted(system_topics(cfg.broker_cluster_name, cfg.broker_name))
        return json_response(request, {"topicList": topics, "brokerAddr": None})


def _tag_codes(subscription: dict[str, Any]) -> frozenset[int] | None:
    """The tags codes a TAG subscription takes (None: every message; an empty set: none
    this broker can tell, e.g. for a SQL92 expression)."""
    if subscription.get("expressionType", "TAG") != "TAG":
        return frozenset()
    if str(subscription.get("subString", "*")).strip() in ("", "*"):
        return None
    return frozenset(int(c) for c in subscription.get("codeSet") or ())


def _unit(phys: int, size: int, tags: int, codes: frozenset[int] | None) -> dict[str, Any]:
    """RocketMQ's ``ConsumeQueueData`` of one unit; ``eval``: ``codes`` takes it."""
    return {
        "physicOffset": phys,
        "physicSize": size,
        "tagsCode": tags,
        "extendDataJson": None,
        "bitMap": None,
        "eval": codes is None or tags in codes,
        "msg": None,
    }
