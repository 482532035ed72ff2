"""``apache.rocketmq.v2.MessagingService`` on grpc's asyncio server (RocketMQ 5.3's
``GrpcMessagingApplication`` and ``ClientActivity``).

Each RPC checks its client id and, with ACL on, its credentials and permissions
(``authorization``), then runs its activity (``producer``, ``consumer``,
``route``), which blocks on the broker, on a worker thread; errors become the RPC's status
as RocketMQ's ``ResponseBuilder`` makes them. Streams cost memory, not threads: the event
loop holds every Telemetry stream and every ReceiveMessage while its POP waits on the
broker. Everything is bounded: open Telemetry streams (``maxTelemetryStreams``), POPs held
at once (``maxHeldReceives``, more answer TOO_MANY_REQUESTS), unary calls waiting for a
worker (TOO_MANY_REQUESTS "flow limit"), and a write a reader does not take within
``writeTimeoutMs`` ends its stream (a ReceiveMessage's undelivered messages are made
visible again in a second, as RocketMQ's proxy NACKs them).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from shmq.client.consumer.subscription import Subscription
from shmq.codec.record_message import record_message
from shmq.errors import InvalidMessageError
from shmq.proxy import route
from shmq.proxy.authorization import GrpcAcl, PermissionDenied
from shmq.proxy.broker import BrokerClient
from shmq.proxy.clients import ClientRegistry, TelemetryStream
from shmq.proxy.consumer import ConsumerActivity, Popped, sql_expression
from shmq.proxy.context import RequestContext
from shmq.proxy.messages import incoming
from shmq.proxy.producer import ProducerActivity
from shmq.proxy.proxy_config import ProxyConfig
from shmq.proxy.registration import BrokerRegistration, Registered
from shmq.proxy.settings import effective_settings, max_attempts, stored_settings
from shmq.proxy.status import OK, Code, ProxyError, status
from shmq.proxy.transactions import TransactionTable
from shmq.proxy.v2 import definition_pb2 as pb
from shmq.proxy.v2 import service_pb2 as spb
from shmq.proxy.v2 import service_pb2_grpc
from shmq.proxy.validation import validate_group, validate_invisible_time, validate_topic
from shmq.remoting.protocol import RemotingCommand
from shmq.remoting.security.credentials import Credentials

log = logging.getLogger(__name__)

T = TypeVar("T")
HEARTBEAT_INTERVAL_S = 10.0  # the proxy's registration of its clients with the broker
NACK_INVISIBLE_MS = 1_000
MAX_WAITING_CALLS = 1024  # unary calls waiting for a worker thread
UNARY_WORKERS = 8
_NO_SETTINGS = "cannot find client settings for this client"


class MessagingService(service_pb2_grpc.MessagingServiceServicer):
    """The RPCs of one proxy in front of one broker."""

    def __init__(self, cfg: ProxyConfig, broker_address: str, broker_name: str, host: str,
                 client_id: str, acl: GrpcAcl | None = None,
                 credentials: Credentials | None = None) -> None:  # fmt: skip
        """``acl`` checks the clients (None: ACL is off); ``credentials`` sign the requests
        to the broker (its ACL's account for the proxy)."""
        self.cfg = cfg
        self.acl = acl
        self.broker_name = broker_name
        self.host = host
        self.port = 0  # known once bound (``bound``)
        self.clients = ClientRegistry(cfg.max_telemetry_streams)
        self.transactions = TransactionTable()
        self.broker = BrokerClient(broker_address, client_id, self._check_arrived,
                                   cfg.broker_timeout_ms / 1000, cfg.broker_tls,
                                   credentials)  # fmt: skip
        self.producer = ProducerActivity(self.broker, cfg, self.transactions)
        self.consumer = ConsumerActivity(self.broker, cfg, broker_name)
        self.registration = BrokerRegistration(self.broker)
        self.workers = ThreadPoolExecutor(UNARY_WORKERS, thread_name_prefix="shmq-proxy")
        self.pollers = ThreadPoolExecutor(cfg.max_held_receives, thread_name_prefix="shmq-pop")
        self.loop: asyncio.AbstractEventLoop | None = None
        self._waiting = 0
        self._polls = 0
        self._turn = itertools.count()

    def bound(self, port: int, loop: asyncio.AbstractEventLoop) -> None:
        self.port = port
        self.loop = loop

    def close(self) -> None:
        self.broker.close()
        self.workers.shutdown(wait=False, cancel_futures=True)
        self.pollers.shutdown(wait=False, cancel_futures=True)

    # -- plumbing -----------------------------------------------------------------------------

    async def _blocking(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on a worker thread; TOO_MANY_REQUESTS when too many wait for one."""
        if self._waiting >= MAX_WAITING_CALLS:
            raise ProxyError(Code.TOO_MANY_REQUESTS, "flow limit")
        self._waiting += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self.workers, fn, *args)
        finally:
            self._waiting -= 1

    def _authorize(self, ctx: RequestContext, request: Any) -> None:
        """With ACL on, ``ProxyError`` (UNAUTHORIZED) or ``PermissionDenied`` unless the
        client of ``ctx`` may send ``request``."""
        if self.acl is not None:
            self.acl.check(ctx, request)

    async def _unary(self, context, response_type, fn: Callable[..., Any], request: Any):
        """A unary RPC: client id and ACL checked, ``fn(ctx, request)`` run on a worker
        thread, any error answered as the response's status."""
        try:
            ctx = RequestContext.of(context)
            self._authorize(ctx, request)
            return await self._blocking(fn, ctx, request)
        except ProxyError as exc:
            return response_type(status=exc.status())
        except PermissionDenied as exc:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, exc.message)
        except Exception as exc:  # a bug: answered, logged, the server goes on
            log.exception("%s failed", response_type.__name__)
            return response_type(status=status(Code.INTERNAL_SERVER_ERROR, repr(exc)))

    def _broker(self) -> pb.Broker:
        return pb.Broker(name=self.broker_name, id=0,
                         endpoints=route.endpoints(self.host, self.port))  # fmt: skip

    def _settings(self, ctx: RequestContext) -> pb.Settings | None:
        """The client's settings as the proxy acts on them (blocking: a group's config)."""
        settings = self.clients.settings(ctx.client_id)
        if settings is None:
            return None
        group = None
        if settings.HasField("subscription"):
            group = self.broker.group_config(settings.subscription.group.name)
        return effective_settings(settings, self.cfg, group)

    # -- route ------------------------------------------------------------------------------

    async def QueryRoute(self, request, context):
        return await self._unary(context, spb.QueryRouteResponse, self._query_route, request)

    def _query_route(self, _ctx: RequestContext, request: spb.QueryRouteRequest):
        validate_topic(request.topic.name)
        config = self.broker.topic_config(request.topic.name)
        queues = route.route_queues(request.topic, config, self._broker())
        return spb.QueryRouteResponse(status=OK, message_queues=queues)

    async def QueryAssignment(self, request, context):
        return await self._unary(context, spb.QueryAssignmentResponse, self._query_assignment,
                                 request)  # fmt: skip

    def _query_assignment(self, ctx: RequestContext, request: spb.QueryAssignmentRequest):
        validate_topic(request.topic.name)
        validate_group(request.group.name)
        config = self.broker.topic_config(request.topic.name)
        settings = self._settings(ctx)
        orderly = settings is not None and settings.subscription.fifo
        assignments = route.assignments(request.topic, config, self._broker(), orderly)
        return spb.QueryAssignmentResponse(status=OK, assignments=assignments)

    # -- clients ------------------------------------------------------------------------------

    async def Heartbeat(self, request, context):
        try:
            ctx = RequestContext.of(context)
            self._authorize(ctx, request)
            if self.clients.settings(ctx.client_id) is None:
                raise ProxyError(Code.UNRECOGNIZED_CLIENT_TYPE, _NO_SETTINGS)
            if request.client_type in (pb.PUSH_CONSUMER, pb.SIMPLE_CONSUMER):
                validate_group(request.group.name)
            self.clients.client(ctx.client_id, ctx.language, ctx.client_version)
        except ProxyError as exc:
            return spb.HeartbeatResponse(status=exc.status())
        except PermissionDenied as exc:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, exc.message)
        return spb.HeartbeatResponse(status=OK)

    async def NotifyClientTermination(self, request, context):
        try:
            ctx = RequestContext.of(context)
            self._authorize(ctx, request)
            if request.HasField("group"):
                validate_group(request.group.name)
            gone = self.clients.remove(ctx.client_id)
            if gone is None or gone.settings is None:
                raise ProxyError(Code.UNRECOGNIZED_CLIENT_TYPE, _NO_SETTINGS)
            await self._register()
        except ProxyError as exc:
            return spb.NotifyClientTerminationResponse(status=exc.status())
        except PermissionDenied as exc:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, exc.message)
        return spb.NotifyClientTerminationResponse(status=OK)

    async def Telemetry(self, request_iterator, context):
        """Settings in, settings back; the proxy's commands out (``TelemetryStream``)."""
        del request_iterator  # read with context.read(), beside context.write()
        try:
            ctx = RequestContext.of(context)
            self._authorize(ctx, None)  # who: each settings command is checked for what
        except ProxyError as exc:
            await self._write(context, spb.TelemetryCommand(status=exc.status()))
            return
        stream = self.clients.open_stream(ctx.client_id)
        if stream is None:
            await self._write(context, spb.TelemetryCommand(
                status=status(Code.TOO_MANY_REQUESTS, "too many telemetry streams")))  # fmt: skip
            return
        reader = asyncio.ensure_future(self._read_telemetry(ctx, stream, context))
        try:
            while True:
                command = await stream.queue.get()
                if command is None or not await self._write(context, command):
                    break
        finally:
            reader.cancel()
            self.clients.close_stream(stream)
        if reader.done() and not reader.cancelled() and reader.exception() is not None:
            error = reader.exception()
            if isinstance(error, PermissionDenied):
                await context.abort(grpc.StatusCode.PERMISSION_DENIED, error.message)
            code = (grpc.StatusCode.INVALID_ARGUMENT if isinstance(error, ProxyError)
                    and 40000 <= error.code < 50000 else grpc.StatusCode.INTERNAL)  # fmt: skip
            await context.abort(code, getattr(error, "message", repr(error)))

    async def _read_telemetry(self, ctx: RequestContext, stream: TelemetryStream, context) -> None:
        """The client's commands; the stream ends (None) when it does or one is wrong."""
        try:
            while True:
                command = await context.read()
                if command is grpc.aio.EOF:
                    return
                if command.HasField("settings"):
                    stream.offer(await self._settings_command(ctx, command.settings))
        finally:
            stream.offer(None)

    async def _settings_command(self, ctx: RequestContext, settings: pb.Settings):
        """Store a client's settings and answer the ones the proxy acts on."""
        self._authorize(ctx, settings)
        if settings.WhichOneof("pub_sub") is None:
            raise ProxyError(
                Code.BAD_REQUEST, "there is no publishing or subscription data in settings"
            )
        if settings.HasField("publishing"):
            for topic in settings.publishing.topics:
                validate_topic(topic.name)
        else:
            validate_group(settings.subscription.group.name)
            for entry in settings.subscription.subscriptions:
                validate_topic(entry.topic.name)
                if entry.expression.type == pb.SQL:
                    sql_expression(entry.expression.expression)
                    continue
                try:
                    Subscription.parse(entry.topic.name, entry.expression.expression)
                except InvalidMessageError as exc:
                    raise ProxyError(Code.ILLEGAL_FILTER_EXPRESSION, str(exc)) from None
        known = self.clients.client(ctx.client_id, ctx.language, ctx.client_version)
        known.settings = stored_settings(settings, self.cfg)
        merged = await self._blocking(self._settings, ctx)
        await self._register()
        return spb.TelemetryCommand(status=OK, settings=merged)

    async def _write(self, context, message) -> bool:
        """Write to a stream; False when the reader did not take it in time (or is gone)."""
        try:
            await asyncio.wait_for(context.write(message), self.cfg.write_timeout_ms / 1000)
        except (TimeoutError, grpc.aio.AioRpcError, asyncio.InvalidStateError, RuntimeError):
            return False
        return True

    # -- producer ---------------------------------------------------------------------------

    async def SendMessage(self, request, context):
        return await self._unary(
            context,
            spb.SendMessageResponse,
            lambda ctx, r: self.producer.send_message(r, ctx.peer),
            request,
        )

    async def EndTransaction(self, request, context):
        return await self._unary(
            context,
            spb.EndTransactionResponse,
            lambda _ctx, r: self.producer.end_transaction(r),
            request,
        )

    async def RecallMessage(self, request, context):
        return await self._unary(
            context,
            spb.RecallMessageResponse,
            lambda _ctx, r: self.producer.recall_message(r),
            request,
        )

    async def _register(self, force: bool = False) -> None:
        """Tell the broker of the clients (``registration``): what changed, or all. A
        failure is logged, not the client's: the next heartbeat tries again."""
        clients = [Registered(c.client_id, c.language, c.settings)
                   for c in self.clients.clients.values() if c.settings is not None]  # fmt: skip
        try:
            await self._blocking(self.registration.sync, clients, force)
        except ProxyError as exc:
            log.warning("registration with the broker failed: %s", exc.message)

    async def heartbeat_loop(self) -> None:
        """Every ``HEARTBEAT_INTERVAL_S``: idle clients forgotten, every client registered
        with the broker again (its registry forgets one silent for two minutes)."""
        while True:
            await asyncio.sleep(HEARTBEAT_INTERVAL_S)
            self.clients.expire()
            await self._register(force=True)

    def _check_arrived(self, request: RemotingCommand) -> None:
        """CHECK_TRANSACTION_STATE (on a connection's reader thread): on to the loop."""
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self._recover_orphaned, request)

    def _recover_orphaned(self, request: RemotingCommand) -> None:
        """Ask a live client publishing the half's topic to resolve it
        (RecoverOrphanedTransactionCommand); nobody to ask: the broker asks again later."""
        msg = record_message(bytes(request.body))
        if msg is None:
            log.warning("a transaction check-back holds no message")
            return
        props = msg.properties
        topic = props.get("REAL_TOPIC") or msg.topic
        group = props.get("PGROUP") or topic
        fields = request.ext_fields
        transaction_id = fields.get("transactionId") or msg.msg_id
        try:
            self.transactions.note(group, transaction_id, int(fields["tranStateTableOffset"]),
                                   int(fields["commitLogOffset"]), msg.msg_id)  # fmt: skip
        except (KeyError, ValueError):
            log.warning("a transaction check-back without its offsets: %s", fields)
            return
        streams = self.clients.publishers(group)
        if not streams:
            return
        message = incoming(msg, None)
        message.topic.name = topic
        command = spb.TelemetryCommand(
            recover_orphaned_transaction_command=(
                spb.RecoverOrphanedTransactionCommand(
                    message=message, transaction_id=transaction_id
                )
            )
        )
        start = next(self._turn)
        for k in range(len(streams)):
            if streams[(start + k) % len(streams)].offer(command):
                return

    # -- consumer ---------------------------------------------------------------------------

    async def ReceiveMessage(self, request, context):
        """Status first, then the messages, then the delivery timestamp."""
        popped = await self._receive(request, context)
        responses = [spb.ReceiveMessageResponse(status=popped.status)]
        responses += [spb.ReceiveMessageResponse(message=m) for m in popped.messages]
        for i, response in enumerate(responses):
            if not await self._write(context, response):
                undelivered = popped.messages[max(i - 1, 0) :]
                await self._blocking(self.consumer.nack, request, undelivered, NACK_INVISIBLE_MS)
                return
        stamp = Timestamp()
        stamp.FromMilliseconds(time.time_ns() // 1_000_000)
        await self._write(context, spb.ReceiveMessageResponse(delivery_timestamp=stamp))

    async def _receive(self, request, context) -> Popped:
        try:
            ctx = RequestContext.of(context)
            self._authorize(ctx, request)
            settings = await self._blocking(self._settings, ctx)
            remaining = context.time_remaining()
            remaining_ms = int(remaining * 1000) if remaining is not None else 1 << 40
            polling_ms = self._polling_time(ctx, request, settings, remaining_ms)
            validate_topic(request.message_queue.topic.name)
            validate_group(request.group.name)
            if not request.auto_renew:
                validate_invisible_time(request.invisible_duration.ToMilliseconds(),
                                        self.cfg.min_invisible_time_mills_for_recv,
                                        self.cfg.max_invisible_time_mills)  # fmt: skip
            if self._polls >= self.cfg.max_held_receives:
                raise ProxyError(Code.TOO_MANY_REQUESTS, "polling full")
            fifo = settings is not None and settings.subscription.fifo
            self._polls += 1
            try:
                return await asyncio.get_running_loop().run_in_executor(
                    self.pollers, self.consumer.pop, request, polling_ms, fifo,
                    max_attempts(settings))  # fmt: skip
            finally:
                self._polls -= 1
        except ProxyError as exc:
            return Popped(exc.status())
        except PermissionDenied as exc:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, exc.message)
        except Exception as exc:  # a bug: answered, logged, the server goes on
            log.exception("ReceiveMessage failed")
            return Popped(status(Code.INTERNAL_SERVER_ERROR, repr(exc)))

    def _polling_time(self, ctx: RequestContext, request, settings, remaining_ms: int) -> int:
        """ReceiveMessage's long-polling time, clamped as RocketMQ's proxy clamps it."""
        cfg = self.cfg
        if request.HasField("long_polling_timeout"):
            polling = request.long_polling_timeout.ToMilliseconds()
        else:
            timeout = settings.request_timeout.ToMilliseconds() if settings is not None else 0
            polling = remaining_ms - timeout // 2
        low = cfg.grpc_client_consumer_min_long_polling_timeout_millis
        polling = min(max(polling, low), cfg.grpc_client_consumer_max_long_polling_timeout_millis)
        if polling > remaining_ms:
            if remaining_ms < low:
                raise ProxyError(ctx.polling_time_code(), "The deadline time remaining is not "
                                 "enough for polling, please check network condition")  # fmt: skip
            polling = remaining_ms
        return polling

    async def AckMessage(self, request, context):
        return await self._unary(context, spb.AckMessageResponse,
                                 lambda _ctx, r: self.consumer.ack(r), request)  # fmt: skip

    async def ChangeInvisibleDuration(self, request, context):
        return await self._unary(context, spb.ChangeInvisibleDurationResponse,
                                 lambda _ctx, r: self.consumer.change_invisible_duration(r),
                                 request)  # fmt: skip

    async def ForwardMessageToDeadLetterQueue(self, request, context):
        return await self._unary(
            context,
            spb.ForwardMessageToDeadLetterQueueResponse,
            lambda _ctx, r: self.consumer.forward_to_dlq(r),
            request,
        )

    # -- what RocketMQ 5.3.3's proxy does not implement -----------------------------------

    async def PullMessage(self, request, context):
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not implemented!")

    async def UpdateOffset(self, request, context):
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not implemented!")

    async def GetOffset(self, request, context):
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not implemented!")

    async def QueryOffset(self, request, context):
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not implemented!")
