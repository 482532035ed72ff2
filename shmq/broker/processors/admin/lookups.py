"""The broker's one-entry admin reads: a topic's config (GET_TOPIC_CONFIG), a subscription
group's (GET_SUBSCRIPTIONGROUP_CONFIG), both RocketMQ 5's codes that its mqadmin and proxy
use in place of reading the whole tables, and the correction offsets of a topic
(QUERY_CORRECTION_OFFSET, ``MQAdminExt.queryCorrectionOffset``).

Bodies are RocketMQ's: the config's JSON (5.x's ``TopicConfigAndQueueMapping`` is the topic
config plus a ``mappingDetail`` that shmq, without static topics, never has) and
``QueryCorrectionOffsetBody`` (``{"correctionOffsets":{0:12}}``, bare queue ids).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from shmq.broker.processors.processor import Processor
from shmq.broker.processors.responses import json_response
from shmq.errors import ResponseError
from shmq.names import MAX_GROUP_LENGTH, name_problem
from shmq.remoting import fastjson
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode
from shmq.remoting.server import Connection

Rc = ResponseCode
NO_CORRECTION = 2**63 - 1  # RocketMQ's Long.MAX_VALUE: the compared group needs none


class AdminLookups(Processor):
    """The three codes above; min offsets from the store view (``ctx.store``)."""

    CODES: ClassVar[Mapping[int, str]] = {
        RequestCode.GET_TOPIC_CONFIG: "topic_config",
        RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG: "group_config",
        RequestCode.QUERY_CORRECTION_OFFSET: "correction_offset",
    }

    def topic_config(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        topic = request.ext_topic()
        config = self.ctx.topics.get(topic)
        if config is None:
            raise ResponseError(Rc.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {topic}")
        return json_response(request, config.to_json())

    def group_config(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        config = self.ctx.subscription_groups.get(request.ext_group("group"))
        if config is None:
            raise ResponseError(Rc.SUBSCRIPTION_GROUP_NOT_EXIST, "No group in this broker")
        return json_response(request, config.to_json())

    def correction_offset(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """Per queue of ``topic``, the lowest offset committed by any group but
        ``filterGroups`` (comma-separated) among the offsets still at or above the queue's
        min offset; for each queue ``compareGroup`` has an offset on, ``Long.MAX_VALUE``
        where that lowest offset is above the compared group's. RocketMQ 4.9's algorithm,
        except that the filtered groups are left out of the minimum only: RocketMQ's
        ``queryMinOffsetInAllGroup`` also deletes their offsets from its table (it removes
        through the table's key set), which a read must not do; and a queue only the
        compared group has an offset on is left out, where RocketMQ fails with a
        NullPointerException."""
        topic = request.ext_topic()
        compare = request.ext_group("compareGroup")
        filtered = set()
        for group in (request.ext_fields.get("filterGroups") or "").split(","):
            if not group:
                continue
            problem = name_problem("group", group, MAX_GROUP_LENGTH)
            if problem:
                raise ResponseError(Rc.SYSTEM_ERROR, f"filterGroups: {problem}")
            filtered.add(group)
        offsets = self.ctx.offsets
        lowest: dict[int, int] = {}
        for group in offsets.groups_of_topic(topic):
            if group in filtered:
                continue
            for queue_id, offset in offsets.offsets(group, topic).items():
                if offset >= self.ctx.store.min_offset(topic, queue_id):
                    lowest[queue_id] = min(offset, lowest.get(queue_id, offset))
        for queue_id, offset in offsets.offsets(compare, topic).items():
            if queue_id in lowest and lowest[queue_id] > offset:
                lowest[queue_id] = NO_CORRECTION
        body = fastjson.dumps({"correctionOffsets": dict(sorted(lowest.items()))}).encode()
        return RemotingCommand.response_to(request, body=body)
