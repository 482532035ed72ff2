"""UPDATE_AND_CREATE_TOPIC and GET_ALL_TOPIC_CONFIG (RocketMQ's ``AdminBrokerProcessor``):
a topic created or changed is registered with the namesrvs before the agents take it
(``topic.publisher``); the table is answered as RocketMQ's ``TopicConfigSerializeWrapper``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from shmq.broker.context import BrokerContext
from shmq.broker.processors.processor import Processor
from shmq.broker.processors.responses import json_response
from shmq.broker.topic.config import TopicConfig
from shmq.errors import ResponseError
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode
from shmq.remoting.server import Connection


class TopicAdmin(Processor):
    """The two codes above."""

    CODES: ClassVar[Mapping[int, str]] = {
        RequestCode.UPDATE_AND_CREATE_TOPIC: "update_topic",
        RequestCode.GET_ALL_TOPIC_CONFIG: "all_topics",
    }

    def update_topic(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        topic = request.ext_topic()
        fields = request.ext_fields
        current = self.ctx.topics.get(topic)
        default_q = self.ctx.config.default_topic_queue_nums
        cfg = TopicConfig(
            topic,
            read_queue_nums=int(fields.get("readQueueNums", default_q)),
            write_queue_nums=int(fields.get("writeQueueNums", default_q)),
            perm=int(fields.get("perm", current.perm if current else 6)),
        )
        self.ctx.topic_publisher.create(cfg)
        return RemotingCommand.response_to(request)

    def all_topics(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        return json_response(request, self.ctx.topics.to_wrapper_json())


def existing_topic(ctx: BrokerContext, topic: str) -> TopicConfig:
    """``topic``'s config; TOPIC_NOT_EXIST naming the broker when it has none."""
    cfg = ctx.topics.get(topic)
    if cfg is None:
        raise ResponseError(
            ResponseCode.TOPIC_NOT_EXIST,
            f"topic {topic} does not exist on broker {ctx.config.broker_name}",
        )
    return cfg
