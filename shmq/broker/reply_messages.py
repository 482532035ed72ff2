"""SEND_REPLY_MESSAGE(324) and SEND_REPLY_MESSAGE_V2(325): RocketMQ's request/reply on the
broker (``ReplyMessageProcessor``).

A requester's message carries ``CORRELATION_ID`` and ``REPLY_TO_CLIENT``, its client id; the
consumer that handles it sends its reply, to the cluster's reply topic, with a reply code.
The broker checks the reply as any send (``RemotingSend.prepare``), pushes it to the
requester as PUSH_REPLY_MESSAGE_TO_CLIENT(326) over the connection the requester heartbeats
on as a producer, and (``storeReplyMessageEnable``, the default) stores it as well. The
push decides the response, as in 4.9: SUCCESS when the requester took it, else
SYSTEM_ERROR naming why (no ``REPLY_TO_CLIENT``, no such client, its answer or its
absence); a stored reply's response carries its message id either way.

A push to the connection the reply itself came on (a RocketMQ client that is its own
requester uses one connection per broker) is sent without waiting for its answer
(``Connection.send_unwaited``): that connection's thread, which runs this handler, is the
one that reads it.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import TYPE_CHECKING

from shmq.broker.remoting_send import RemotingSend, pushed_not_stored, send_response
from shmq.broker.send_header import SendHeader
from shmq.codec.record_rebuild import edit_properties, property_value
from shmq.errors import RemotingError
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode, ResponseError
from shmq.remoting.server import Connection, RemotingServer

if TYPE_CHECKING:
    from shmq.broker.control import ControlHandlers

log = logging.getLogger(__name__)

REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
PUSH_TIMEOUT_S = 3.0  # a requester must take a pushed reply within


class ReplyMessages:
    def __init__(self, control: ControlHandlers, send: RemotingSend) -> None:
        self.control = control
        self.send = send
        config = control.broker.config
        self.store = config.store_reply_message_enable
        self.store_host = config.store.store_host
        self.server: RemotingServer | None = None
        self.pushed = self.push_failures = 0

    def register(self, server: RemotingServer) -> None:
        self.server = server
        for code in (RequestCode.SEND_REPLY_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2):
            server.register(code, self.handle)

    def handle(self, request: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        try:
            prepared = self.send.prepare(request, conn)
            if prepared.records.body_offs.shape[0] != 2:
                raise ResponseError(ResponseCode.MESSAGE_ILLEGAL, "a reply cannot be a batch")
        except ResponseError as exc:
            return send_response(request, exc.code, {}, exc.remark)
        failure = self._push(request, prepared.header, conn)
        if self.store:
            prepared.pending = dataclasses.replace(prepared.pending, reply=failure)
            try:
                self.send.append(prepared)
                return None  # answered once stored
            except ResponseError as exc:
                log.warning("a reply was not stored: %s", exc.remark)
        if failure:
            return send_response(request, ResponseCode.SYSTEM_ERROR, {}, failure)
        return pushed_not_stored(request, prepared.pending.queue_id)

    def _push(self, request: RemotingCommand, header: SendHeader, conn: Connection) -> str:
        """Push the reply to its requester: "" when it took it, else why not."""
        props = (header.properties or "").encode()
        client_id = property_value(props, REPLY_TO_CLIENT.encode())
        if client_id is None:
            return self._failed(f"reply message properties[{REPLY_TO_CLIENT}] is null")
        target = self._connection(client_id)
        if target is None:
            return self._failed(f"push reply message fail, channel of <{client_id}> not found.")
        props = edit_properties(props, add={PUSH_REPLY_TIME: str(time.time_ns() // 1_000_000)})
        fields = {
            "producerGroup": header.producerGroup,
            "topic": header.topic,
            "defaultTopic": header.defaultTopic,
            "defaultTopicQueueNums": header.defaultTopicQueueNums,
            "queueId": header.queueId,
            "sysFlag": header.sysFlag,
            "bornTimestamp": header.bornTimestamp,
            "flag": header.flag,
            "properties": props.decode("utf-8", "replace"),
            "reconsumeTimes": header.reconsumeTimes or 0,
            "unitMode": bool(header.unitMode),
            "bornHost": conn.peer,
            "storeHost": self.store_host,
            "storeTimestamp": time.time_ns() // 1_000_000,
        }
        push = RemotingCommand.request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, fields,
                                       request.body)  # fmt: skip
        try:
            if target is conn:  # this thread reads its answer, once the handler returns
                target.send_unwaited(push)
                self.pushed += 1
                return ""
            answer = target.invoke(push, PUSH_TIMEOUT_S)
        except RemotingError as exc:
            log.warning("push reply message to <%s> fail: %s", client_id, exc)
            return self._failed(f"push reply message to {client_id} fail.")
        if answer.code != ResponseCode.SUCCESS:
            log.warning("push reply message to <%s> return fail, response remark: %s",
                        client_id, answer.remark)  # fmt: skip
            return self._failed(f"push reply message to {client_id} fail.")
        self.pushed += 1
        return ""

    def _failed(self, remark: str) -> str:
        self.push_failures += 1
        log.info("%s", remark)
        return remark

    def _connection(self, client_id: str) -> Connection | None:
        conn_id = self.control.producer_connection_id(client_id)
        if conn_id is None or self.server is None:
            return None
        return self.server.connection(conn_id)
