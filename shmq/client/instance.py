"""A consumer's presence in the cluster (the consumer half of RocketMQ's ``MQClientInstance``).

It owns the consumer's client id, its data path (``QueueReader``), and one duplex control
connection per broker. Heartbeats (group, model, subscriptions) go out on those connections
every ``heartbeat_interval`` and right after a (re)connect; the broker's oneway requests come
back on them: ``NOTIFY_CONSUMER_IDS_CHANGED`` (rebalance now),
``RESET_CONSUMER_CLIENT_OFFSET`` (an admin moved the group's offsets) and
``GET_CONSUMER_RUNNING_INFO`` (an admin asks how the consumer is doing; answered),
``GET_CONSUMER_STATUS_FROM_CLIENT`` (an admin asks for its offsets on a topic; answered) and
``CONSUME_MESSAGE_DIRECTLY`` (an admin has it consume one message; answered when done).
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import threading
from collections.abc import Callable
from concurrent.futures import Future

from shmq.client.consumer.subscription import Subscription
from shmq.client.transport.queue_reader import QueueReader
from shmq.client.types import ConsumeFromWhere, MessageModel, MessageQueue
from shmq.errors import NoRouteError, RemotingError, ResponseError
from shmq.remoting import fastjson
from shmq.remoting.admin_bodies import queue_items, queue_table
from shmq.remoting.duplex import DuplexChannel
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode, request_name
from shmq.remoting.security.credentials import Credentials
from shmq.remoting.security.tls import TlsOptions

log = logging.getLogger(__name__)

_instances = itertools.count()


def _local_ip() -> str:
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


class ClientInstance:
    """``subscriptions`` is read at every heartbeat, so it may change while running;
    ``credentials`` and ``tls`` go to every connection (the reader's control client's)."""

    def __init__(
        self,
        group: str,
        namesrv: str,
        *,
        consume_type: str,
        message_model: MessageModel,
        consume_from_where: ConsumeFromWhere,
        subscriptions: Callable[[], list[Subscription]],
        on_ids_changed: Callable[[], None],
        on_reset_offset: Callable[[str, dict[MessageQueue, int]], None],
        running_info: Callable[[bool], dict],
        offset_table: Callable[[], dict[MessageQueue, int]],
        consume_directly: Callable[[RemotingCommand], Future | None],
        spin_us: int = 20,
        transport: str = "auto",
        poll_name_server_interval: float = 30.0,
        credentials: Credentials | tuple[str, str] | None = None,
        tls: bool | TlsOptions | None = None,
    ) -> None:
        self.group = group
        self.client_id = f"{_local_ip()}@{os.getpid()}#{next(_instances)}"
        self.reader = QueueReader(group, namesrv, spin_us=spin_us, transport=transport,
                                  poll_name_server_interval=poll_name_server_interval,
                                  credentials=credentials, tls=tls)  # fmt: skip
        self.routes = self.reader.routes
        self.consume_type = consume_type
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        self.subscriptions = subscriptions
        self.on_ids_changed = on_ids_changed
        self.on_reset_offset = on_reset_offset
        self.running_info = running_info
        self.offset_table = offset_table
        self.consume_directly = consume_directly
        self._channels: dict[str, DuplexChannel] = {}
        self._lock = threading.Lock()

    # -- broker connections -------------------------------------------------------------------

    def channel(self, addr: str) -> DuplexChannel:
        with self._lock:
            channel = self._channels.get(addr)
            if channel is None:
                client = self.reader.client
                channel = self._channels[addr] = DuplexChannel(
                    addr, self._on_request, credentials=client.credentials, tls=client.tls
                )
        if not channel.connected:
            self._heartbeat_to(addr, channel)
        return channel

    def _on_request(self, request: RemotingCommand) -> RemotingCommand | Future | None:
        if request.code in (RequestCode.GET_CONSUMER_RUNNING_INFO,
                            RequestCode.CONSUME_MESSAGE_DIRECTLY):  # fmt: skip
            if request.ext_fields.get("consumerGroup") != self.group:
                return self._not_this_group(request)
            if request.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
                return self.consume_directly(request) or self._not_this_group(request)
            return self._running_info(request)
        if request.code == RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT:
            return self._consumer_status(request)
        if request.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            log.info("%s: the broker says group %s changed", self.client_id, self.group)
            self.on_ids_changed()
        elif request.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET:
            topic = request.ext_fields.get("topic", "")
            body = request.json_body() or {}
            table = {
                MessageQueue(t, b, q): int(offset)
                for t, b, q, offset in queue_items(body.get("offsetTable", {}))
            }
            log.info("%s: offsets of %s in group %s reset", self.client_id, topic, self.group)
            self.on_reset_offset(topic, table)
        else:
            log.debug("ignoring %s from a broker", request_name(request.code))
        return None

    @staticmethod
    def _not_this_group(request: RemotingCommand) -> RemotingCommand:
        group = request.ext_fields.get("consumerGroup")
        return RemotingCommand.response_to(
            request, ResponseCode.SYSTEM_ERROR,
            f"The Consumer Group <{group}> not exist in this consumer",
        )  # fmt: skip

    def _running_info(self, request: RemotingCommand) -> RemotingCommand:
        """An admin asks, through the broker, how this consumer is doing (RocketMQ's
        ``ClientRemotingProcessor.getConsumerRunningInfo``)."""
        jstack = str(request.ext_fields.get("jstackEnable", "")).lower() == "true"
        body = fastjson.dumps(self.running_info(jstack)).encode()
        return RemotingCommand.response_to(request, body=body)

    def _consumer_status(self, request: RemotingCommand) -> RemotingCommand:
        """Its offsets on the topic asked (RocketMQ's ``getConsumeStatus``: the offset
        store's table; empty for another group)."""
        topic = request.ext_fields.get("topic")
        table = self.offset_table() if request.ext_fields.get("group") == self.group else {}
        rows = [(mq.topic, mq.broker_name, mq.queue_id, offset)
                for mq, offset in sorted(table.items()) if mq.topic == topic]  # fmt: skip
        body = fastjson.dumps({"messageQueueTable": queue_table(rows)}).encode()
        return RemotingCommand.response_to(request, body=body)

    def broker_addresses(self) -> set[str]:
        """The brokers serving any subscribed topic."""
        addrs = set()
        for sub in self.subscriptions():
            try:
                addrs |= {b.address for b in self.routes.brokers(sub.topic)}
            except NoRouteError:
                continue
        return addrs

    # -- heartbeats ---------------------------------------------------------------------------

    def heartbeat_body(self) -> dict:
        return {
            "clientID": self.client_id,
            "consumerDataSet": [
                {
                    "groupName": self.group,
                    "consumeType": self.consume_type,
                    "messageModel": self.message_model.value,
                    "consumeFromWhere": self.consume_from_where.value,
                    "subscriptionDataSet": [s.to_json() for s in self.subscriptions()],
                    "unitMode": False,
                    "language": "PYTHON",
                }
            ],
            "producerDataSet": [],
        }

    def _heartbeat_to(self, addr: str, channel: DuplexChannel) -> None:
        channel.invoke_json(RequestCode.HEART_BEAT, body_obj=self.heartbeat_body())

    def heartbeat(self) -> None:
        """Send a heartbeat to every broker of the subscribed topics."""
        for addr in self.broker_addresses():
            try:
                self._heartbeat_to(addr, self.channel(addr))
            except RemotingError as exc:
                log.warning("%s: heartbeat to %s failed: %s", self.client_id, addr, exc)

    def consumer_ids(self, topic: str) -> list[str]:
        """The group's live client ids, from a broker of ``topic``."""
        last: Exception | None = None
        for b in self.routes.brokers(topic):
            try:
                _, data = self.channel(b.address).invoke_json(
                    RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": self.group}
                )
                return [str(c) for c in data.get("consumerIdList", [])]
            except ResponseError as exc:
                last = exc
                continue
            except RemotingError as exc:
                last = exc
                continue
        log.warning(
            "%s: no broker of %s lists group %s: %s", self.client_id, topic, self.group, last
        )
        return []

    def close(self) -> None:
        with self._lock:
            channels = dict(self._channels)
            self._channels.clear()
        for addr, channel in channels.items():
            if channel.connected:
                try:
                    channel.invoke(
                        RemotingCommand.request(
                            RequestCode.UNREGISTER_CLIENT,
                            {"clientID": self.client_id, "consumerGroup": self.group},
                        ),
                        timeout=1.0,
                    )
                except RemotingError as exc:
                    log.debug("unregister from %s failed: %s", addr, exc)
            channel.close()
        self.reader.close()
