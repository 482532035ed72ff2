"""HEART_BEAT, UNREGISTER_CLIENT and CHECK_CLIENT_CONFIG: RocketMQ's
``ClientManageProcessor``.

A heartbeat registers its consumers with the consumer registry (``client.consumer_manager``,
which tells a group's members when its membership changes) and its producers with the
producer registry (``client.producer_manager``); a CLUSTERING consumer's first heartbeat
creates its subscription group (``autoCreateSubscriptionGroup``) and its retry topic, as
4.9's does. A closed connection unregisters every client that heartbeat on it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import ClassVar

from shmq.broker.client.consumer_manager import ClientChannel, message_model_name
from shmq.broker.processors.processor import Processor
from shmq.broker.processors.pull import SQL92, check_expression_type, compiled_sql
from shmq.errors import FilterExpressionError, ResponseError
from shmq.names import MAX_GROUP_LENGTH, MAX_TOPIC_LENGTH, name_problem, retry_topic
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode
from shmq.remoting.server import Connection, RemotingServer


class ClientManageProcessor(Processor):
    """The three codes above, and the server's disconnect callback."""

    CODES: ClassVar[Mapping[int, str]] = {
        RequestCode.HEART_BEAT: "heartbeat",
        RequestCode.UNREGISTER_CLIENT: "unregister_client",
        RequestCode.CHECK_CLIENT_CONFIG: "check_client_config",
    }

    def register(self, server: RemotingServer) -> None:
        super().register(server)
        server.on_disconnect(self.disconnected)

    def heartbeat(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        ctx = self.ctx
        data = request.json_body() or {}
        client_id = str(data.get("clientID", ""))
        if not client_id:
            raise ResponseError(ResponseCode.SYSTEM_ERROR, "HEART_BEAT without a clientID")
        for entry in data.get("consumerDataSet", []):
            _check_name("group", entry.get("groupName"), MAX_GROUP_LENGTH)
            for sub in entry.get("subscriptionDataSet") or []:
                _check_name("topic", sub.get("topic"), MAX_TOPIC_LENGTH)
        for entry in data.get("producerDataSet", []):
            _check_name("group", entry.get("groupName"), MAX_GROUP_LENGTH)
        for entry in data.get("consumerDataSet", []):
            ctx.consumers.register(client_id, conn, entry, request.language, request.version)
            # the group and its retry topic, however the client encodes the model
            if message_model_name(entry.get("messageModel")) == "CLUSTERING":
                group = entry["groupName"]
                group_cfg = ctx.subscription_groups.find(
                    group, ctx.config.auto_create_subscription_group
                )
                if group_cfg.retry_queue_nums:
                    ctx.topic_publisher.ensure(retry_topic(group), group_cfg.retry_queue_nums)
        now = int(time.time() * 1000)
        for entry in data.get("producerDataSet", []):
            channel = ClientChannel(client_id, conn, now, request.language, request.version)
            ctx.producers.register(entry["groupName"], channel)
        return RemotingCommand.response_to(request)

    def unregister_client(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        client_id = request.ext("clientID")
        group = request.ext_fields.get("consumerGroup")
        if group:
            self.ctx.consumers.unregister(group, client_id)
        group = request.ext_fields.get("producerGroup")
        if group:
            self.ctx.producers.unregister(group, client_id)
        return RemotingCommand.response_to(request)

    def check_client_config(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """CHECK_CLIENT_CONFIG: a 4.9 push consumer subscribing by an expression other than
        tags asks before it starts (``checkClientInBroker``). Without property filters
        (RocketMQ's ``enablePropertyFilter``, off by default) such an expression is refused
        as RocketMQ refuses it, and as a pull naming it is; with them, a SQL92 expression
        that does not compile is SUBSCRIPTION_PARSE_FAILED with its position and reason."""
        body = request.json_body()
        sub = body.get("subscriptionData") if isinstance(body, dict) else None
        kind = sub.get("expressionType") if isinstance(sub, dict) else None
        check_expression_type(kind, self.ctx.config.enable_property_filter)
        if kind == SQL92:
            try:
                compiled_sql(str(sub.get("subString") or ""))
            except FilterExpressionError as exc:
                raise ResponseError(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(exc)) from None
        return RemotingCommand.response_to(request)

    def disconnected(self, conn: Connection) -> None:
        """Forget the consumers and producers that heartbeat on ``conn``."""
        self.ctx.consumers.connection_closed(conn)
        self.ctx.producers.connection_closed(conn)


def _check_name(kind: str, name: object, limit: int) -> None:
    """A name from a request body (heartbeats): RocketMQ's rule, or SYSTEM_ERROR naming it."""
    problem = name_problem(kind, name, limit)
    if problem:
        raise ResponseError(ResponseCode.SYSTEM_ERROR, f"HEART_BEAT: {problem}")
