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

Replies are handled on a pool of their own (``processReplyMessageThreadPoolNums``, as
RocketMQ's ``replyMessageExecutor``), never on the connection's reader thread: a push waits
up to ``PUSH_TIMEOUT_S`` for a requester that is connected but does not answer, and that
wait must not hold back the replier's other requests. The reader thread also reads the
push's answer when the requester is the replier itself (a RocketMQ client uses one
connection per broker). Past ``replyThreadPoolQueueCapacity`` waiting replies (or
``maxReplyWaitingBytes`` of their bodies), a reply is answered SYSTEM_BUSY, as RocketMQ's
executor rejects it.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from shmq.broker.context import BrokerContext
from shmq.broker.processors.send import RemotingSend, pushed_not_stored, send_response
from shmq.broker.processors.send_header import SendHeader
from shmq.codec.record_rebuild import edit_properties, property_value
from shmq.errors import RemotingConnectError, RemotingError
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode, ResponseError
from shmq.remoting.server import Connection, RemotingServer, call_handler

log = logging.getLogger(__name__)

REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
PUSH_TIMEOUT_S = 3.0  # a requester must take a pushed reply within
OVERLOAD = "[OVERLOAD]system busy, start flow control for a while"
# bodies of replies waiting for a pool thread, at most (shmq's own bound: a client must not
# make the broker hold its replies' bodies without limit, where the reader thread used to
# stop reading it)


class ReplyMessages:
    """The reply codes; a reply is checked and stored as ``send`` does it (RocketMQ's
    ``ReplyMessageProcessor`` is an ``AbstractSendMessageProcessor`` too), and pushed to
    the connection its requester heartbeats on (``ctx.producers``)."""

    def __init__(self, ctx: BrokerContext, send: RemotingSend) -> None:
        self.producers = ctx.producers
        self.send = send
        config = ctx.config
        self.store = config.store_reply_message_enable
        self.store_host = config.store.store_host
        self._pool = ThreadPoolExecutor(config.process_reply_message_thread_pool_nums,
                                        thread_name_prefix="shmq-reply")  # fmt: skip
        self._capacity = config.reply_thread_pool_queue_capacity
        self._max_waiting_bytes = config.max_reply_waiting_bytes
        self._waiting = 0  # replies submitted and not yet started
        self._waiting_bytes = 0  # and their bodies
        self._lock = threading.Lock()

    def register(self, server: RemotingServer) -> None:
        for code in (RequestCode.SEND_REPLY_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2):
            server.register(code, self.submit)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def submit(self, request: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        """Hand the reply to the pool (its answer is sent from there), or SYSTEM_BUSY when
        ``replyThreadPoolQueueCapacity`` replies or ``maxReplyWaitingBytes`` of bodies wait."""
        size = len(request.body)
        with self._lock:
            if (
                self._waiting >= self._capacity
                or self._waiting_bytes + size > self._max_waiting_bytes
            ):
                return RemotingCommand.response_to(request, ResponseCode.SYSTEM_BUSY, OVERLOAD)
            self._waiting += 1
            self._waiting_bytes += size
        try:
            self._pool.submit(self._run, request, conn)
        except RuntimeError:  # the broker is stopping
            self._started(size)
            return RemotingCommand.response_to(request, ResponseCode.SYSTEM_BUSY, OVERLOAD)
        return None

    def _started(self, size: int) -> None:
        with self._lock:
            self._waiting -= 1
            self._waiting_bytes -= size

    def _run(self, request: RemotingCommand, conn: Connection) -> None:
        self._started(len(request.body))
        response = call_handler(self.handle, request, conn, "broker")
        if response is None or request.is_oneway:
            return
        try:
            conn.send(response)
        except RemotingConnectError as exc:
            log.debug("reply answer not sent: %s", exc)

    def handle(self, request: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        """One reply, on a pool thread: checked, pushed, stored; the response, or None
        when it is sent once the reply is stored."""
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
        target = self.producers.find_connection(client_id)
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
            answer = target.invoke(push, PUSH_TIMEOUT_S)
        except RemotingError as exc:
            log.warning("push reply message to <%s> fail: %s", client_id, exc)
            return self._failed(f"push reply message to {client_id} fail.")
        if answer.code != ResponseCode.SUCCESS:
            log.warning("push reply message to <%s> return fail, response remark: %s",
                        client_id, answer.remark)  # fmt: skip
            return self._failed(f"push reply message to {client_id} fail.")
        return ""

    def _failed(self, remark: str) -> str:
        log.info("%s", remark)
        return remark
