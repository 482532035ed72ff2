"""Request/reply over messages (RocketMQ 4.6's ``DefaultMQProducer.request`` and
``MessageUtil.createReplyMessage``): an RPC whose request and reply are stored messages.

The requester sends a copy of its message with ``CORRELATION_ID`` (a new UUID),
``REPLY_TO_CLIENT`` (its client id), ``TTL`` (the timeout in ms) and ``CLUSTER`` (the
cluster of the topic's brokers; a RocketMQ broker adds it to every message it stores) and
waits for the reply with that correlation id. Whoever consumes the request answers with
``create_reply_message(request, body)`` sent by ``Producer.send``: the reply goes to the
cluster's reply topic as SEND_REPLY_MESSAGE_V2, and the broker pushes it
(PUSH_REPLY_MESSAGE_TO_CLIENT) over the connection the requester heartbeats on as a
producer (``producer_presence``, opened by the first request). A reply that matches no
waiting request (it came after its timeout) is logged and dropped, as RocketMQ does.

Example::

    # the requester
    with Producer("QuoteClients", namesrv) as producer:
        reply = producer.request(Message("Quotes", b"AAPL"), timeout=3.0)
        print(reply.body)

    # the responder, in a PushConsumer's listener
    def on_message(msgs, ctx):
        for msg in msgs:
            responder.send(create_reply_message(msg, price_of(msg.body)))
        return ConsumeResult.CONSUME_SUCCESS
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from shmq.client.producer.presence import ProducerPresence
from shmq.config import parse_host
from shmq.errors import ClientError, ConfigError, RequestTimeoutError, ShmqError
from shmq.message import Message, MessageExt, pack_host
from shmq.names import reply_topic
from shmq.properties import build_properties
from shmq.remoting.custom_header import INT, LONG, STR, Spec, decode_header
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode

if TYPE_CHECKING:
    from shmq.client.route import BrokerQueues
    from shmq.client.types import MessageQueue, SendResult

log = logging.getLogger(__name__)

CORRELATION_ID = "CORRELATION_ID"
REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
TTL = "TTL"
ARRIVE_TIME = "ARRIVE_TIME"
CLUSTER = "CLUSTER"
MSG_TYPE = "MSG_TYPE"
REPLY_MESSAGE_FLAG = "reply"

# ReplyMessageRequestHeader, the fields a reply is rebuilt from
PUSH_HEADER: Spec = {
    "topic": (STR, True),
    "queueId": (INT, True),
    "sysFlag": (INT, True),
    "bornTimestamp": (LONG, True),
    "flag": (INT, True),
    "properties": (STR, False),
    "reconsumeTimes": (INT, False),
    "bornHost": (STR, True),
    "storeHost": (STR, True),
    "storeTimestamp": (LONG, True),
}


class SystemMessage(Message):
    """A message with system properties that shmq sets and users may not
    (``system_properties``, encoded after the user's own)."""

    __slots__ = ("system_properties",)

    def __init__(self, topic: str, body: bytes | str, system: dict[str, str], **kw: Any) -> None:
        super().__init__(topic, body, **kw)
        build_properties(system=system)  # its size checked
        self.system_properties = system


class ReplyMessage(SystemMessage):
    """A reply to a request (``create_reply_message``); ``Producer.send`` sends it so that
    the broker pushes it to the requester."""

    __slots__ = ()


def create_reply_message(request: Message | MessageExt, body: bytes | str) -> ReplyMessage:
    """The reply to ``request`` (a consumed request message) with ``body``: for the
    request's cluster's reply topic, with its correlation id, requester and TTL."""
    props = request.properties
    cluster = props.get(CLUSTER)
    if not cluster:
        raise ClientError(
            f"create reply message fail, requestMessage error, property[{CLUSTER}] is null."
        )
    system = {MSG_TYPE: REPLY_MESSAGE_FLAG}
    for name in (CORRELATION_ID, REPLY_TO_CLIENT, TTL):
        if props.get(name):
            system[name] = props[name]
    return ReplyMessage(reply_topic(cluster), body, system)


def request_message(msg: Message, correlation_id: str, client_id: str, timeout_ms: int,
                    cluster: str) -> SystemMessage:  # fmt: skip
    """A copy of ``msg`` (the caller's is left as it is) that asks for a reply."""
    if not isinstance(msg, Message) or isinstance(msg, SystemMessage):
        raise ClientError(f"a request is a Message, not {type(msg).__name__}")
    if msg.delay_level or msg.deliver_time_ms:
        raise ClientError("a request cannot be delayed (delay_level or deliver_time_ms)")
    system = {CORRELATION_ID: correlation_id, REPLY_TO_CLIENT: client_id, TTL: str(timeout_ms)}
    if cluster:
        system[CLUSTER] = cluster
    return SystemMessage(msg.topic, msg.body, system, tags=msg.tags, keys=msg.keys,
                         properties=msg.properties, flag=msg.flag)  # fmt: skip


class Requests:
    """The requests of a producer waiting for their replies (RocketMQ's
    ``RequestFutureHolder``); a future whose timeout passed fails with
    ``RequestTimeoutError`` (checked every ``SWEEP_S``)."""

    SWEEP_S = 0.05

    def __init__(self, producer: RequestReply, client_id: str) -> None:
        self.producer = producer
        self.client_id = client_id
        self._waiting: dict[str, tuple[Future, float, str]] = {}  # id -> future, deadline, topic
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._sweeper = threading.Thread(target=self._sweep, name="shmq-request-timeouts",
                                         daemon=True)  # fmt: skip
        self._sweeper.start()
        self.replies = self.unmatched = 0

    def request(self, msg: Message, timeout: float, **selection: Any) -> Future:
        """Send ``msg`` as a request (``Producer.send_async``, with ``selection``); the
        future holds the reply ``MessageExt``, or the send's error, or
        ``RequestTimeoutError`` after ``timeout`` seconds."""
        if not timeout > 0:
            raise ConfigError(f"timeout must be > 0 seconds, not {timeout!r}")
        correlation_id = str(uuid.uuid4())
        cluster = self.producer.cluster_of(msg.topic)
        request = request_message(msg, correlation_id, self.client_id, int(timeout * 1000),
                                  cluster)  # fmt: skip
        future: Future = Future()
        with self._lock:
            if self._closed:
                raise ClientError("the producer is closed")
            self._waiting[correlation_id] = (future, time.monotonic() + timeout, msg.topic)
        self._wake.set()

        def failed(exc: BaseException) -> None:
            self._settle(correlation_id, exc=ClientError(
                f"send request message to <{msg.topic}> fail: {exc}"))  # fmt: skip

        try:
            self.producer.send_async(request, on_exception=failed, **selection)
        except BaseException:  # refused before sending: nothing waits for a reply
            with self._lock:
                self._waiting.pop(correlation_id, None)
            raise
        return future

    def on_push(self, push: RemotingCommand) -> RemotingCommand:
        """PUSH_REPLY_MESSAGE_TO_CLIENT: hand the reply to its request's future."""
        try:
            reply = _reply_of(push)
        except (ShmqError, ValueError) as exc:
            log.warning("a pushed reply cannot be read: %s", exc)
            return RemotingCommand.response_to(push, ResponseCode.SYSTEM_ERROR,
                                               "process reply message fail")  # fmt: skip
        correlation_id = reply.properties.get(CORRELATION_ID, "")
        if not self._settle(correlation_id, reply):
            self.unmatched += 1
            log.warning("receive reply message, but not matched any request, CorrelationId: "
                        "%s, reply from host: %s", correlation_id, reply.born_host)  # fmt: skip
        else:
            self.replies += 1
        return RemotingCommand.response_to(push)

    def _settle(self, correlation_id: str, reply: MessageExt | None = None,
                exc: BaseException | None = None) -> bool:  # fmt: skip
        with self._lock:
            entry = self._waiting.pop(correlation_id, None)
        if entry is None:
            return False
        if exc is None:
            entry[0].set_result(reply)
        else:
            entry[0].set_exception(exc)
        return True

    def _sweep(self) -> None:
        while True:
            self._wake.wait()
            time.sleep(self.SWEEP_S)
            now = time.monotonic()
            with self._lock:
                if self._closed:
                    return
                expired = [(cid, e) for cid, e in self._waiting.items() if e[1] <= now]
                if not self._waiting or len(expired) == len(self._waiting):
                    self._wake.clear()
            for cid, (_, _, topic) in expired:
                why = f"send request message to <{topic}> OK, but wait reply message timeout"
                self._settle(cid, exc=RequestTimeoutError(why))

    def close(self) -> None:
        """Fail every request still waiting; stop the sweeper."""
        with self._lock:
            self._closed = True
            waiting, self._waiting = self._waiting, {}
        self._wake.set()
        self._sweeper.join(1.0)
        for future, _, topic in waiting.values():
            future.set_exception(ClientError(f"the producer was closed before the reply to "
                                             f"a request to <{topic}> came"))  # fmt: skip


def _reply_of(push: RemotingCommand) -> MessageExt:
    """The reply message of a PUSH_REPLY_MESSAGE_TO_CLIENT, with ``ARRIVE_TIME`` added."""
    h = decode_header(push, PUSH_HEADER)
    body = bytes(push.body)
    props = (h["properties"] or "") + f"{ARRIVE_TIME}\x01{time.time_ns() // 1_000_000}\x02"
    reply = MessageExt(h["topic"], h["queueId"], 0, 0, body, props.encode(),
                       h["bornTimestamp"], h["storeTimestamp"], _host(h["bornHost"]),
                       _host(h["storeHost"]), h["sysFlag"], h["flag"],
                       reconsume_times=h["reconsumeTimes"] or 0)  # fmt: skip
    reply.body  # noqa: B018  a compressed body that does not decompress fails here, as in Java
    return reply


def _host(text: str) -> bytes:
    """An IPv4 ``host:port`` as the 8 bytes a record holds (zeros for another form)."""
    try:
        return pack_host(*parse_host(text.lstrip("/"))).to_bytes(8, "big", signed=True)
    except ConfigError:
        return bytes(8)


class RequestReply:
    """The request/reply part of ``Producer`` (RocketMQ's ``request`` methods and the
    sending of replies), and the producer's presence at the brokers, which replies and
    transaction check-backs come back on."""

    def __init__(self) -> None:
        self._presence: ProducerPresence | None = None  # opened by the first request
        self._requests: Requests | None = None
        self._presence_lock = threading.Lock()

    def request(self, msg: Message, timeout: float | None = None, **selection: Any) -> MessageExt:
        """Send ``msg`` as a request and wait for its reply (RocketMQ's ``request``; see
        ``shmq.client.producer.request_reply``): the reply message. ``timeout`` (default
        ``send_timeout``) bounds the whole; ``selector`` / ``arg`` / ``sharding_key`` as
        ``send``. Raises ``RequestTimeoutError`` when no reply comes in time,
        ``ClientError`` when the request could not be sent."""
        return self.request_async(msg, timeout, **selection).result()

    def request_async(self, msg: Message, timeout: float | None = None, **selection: Any) -> Future:
        """``request`` without waiting: a ``Future`` of the reply message (its callbacks
        run on the thread that receives the reply: keep them short)."""
        presence = self._presence_started()
        with self._presence_lock:
            if self._requests is None:
                self._requests = Requests(self, presence.client_id)
        return self._requests.request(msg, self.send_timeout if timeout is None else timeout,
                                      **selection)  # fmt: skip

    def cluster_of(self, topic: str) -> str:
        """The cluster of ``topic``'s brokers, from its route ("" when none is named)."""
        brokers = self._infos.get(topic).brokers.values()
        return next((b.cluster for b in brokers if b.cluster), "")

    def _send_reply(self, msg: ReplyMessage) -> SendResult:
        """A reply goes as SEND_REPLY_MESSAGE_V2 whatever the transport: the broker pushes
        it to its requester."""
        one = self._record(msg, None, None)

        def attempt(broker: BrokerQueues, mq: MessageQueue, deadline: float) -> SendResult:
            return self._tcp.send_one(broker, mq, one, deadline, reply_message=True)

        return self._retry.send_with_retries(msg.topic, attempt, lambda r: r.send_status)

    def _presence_started(self, heartbeat_interval: float = 30.0) -> ProducerPresence:
        """The producer's connections to every broker (``producer_presence``), opened
        once: replies and transaction check-backs come on them."""
        with self._presence_lock:
            if self._presence is None:
                self._check_open()
                presence = ProducerPresence(
                    self.group, self.namesrv, self.client, self._on_broker_request,
                    heartbeat_interval,
                )  # fmt: skip
                presence.start()
                self._presence = presence
            return self._presence

    def _on_broker_request(self, addr: str, request: RemotingCommand) -> RemotingCommand | None:
        """A broker's request on a presence connection (on its reader thread: quick)."""
        if request.code == RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT and self._requests:
            return self._requests.on_push(request)
        log.debug("producer %s ignores request %d from %s", self.group, request.code, addr)
        return None

    def _close_presence(self) -> None:
        """Fail the requests still waiting, unregister from the brokers."""
        with self._presence_lock:
            presence, self._presence = self._presence, None
        if self._requests is not None:
            self._requests.close()
        if presence is not None:
            presence.close()
