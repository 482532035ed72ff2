"""What the proxy tells the broker of its gRPC clients, by remoting heartbeats on its
control connection, as RocketMQ's proxy registers them with the broker's producer and
consumer managers:

* a producer group per topic its clients publish (RocketMQ's proxy names a gRPC producer's
  group after the topic), under the proxy's own client id: the broker's transaction
  check-backs then come to the proxy, which hands them to a live client;
* every consumer client under its own client id, with its group and subscriptions: the
  broker's admin (``shmq admin consumer-connection``, ``consumer-progress``) lists gRPC
  consumers as it lists remoting ones, and the broker creates the group and its retry topic
  as for any consumer's heartbeat. A consumer that is gone (NotifyClientTermination, or
  forgotten as idle) is unregistered; if the proxy dies, its connection closes and the
  broker forgets them all.

``sync`` blocks on the broker: the service calls it on a worker thread with a snapshot of
its clients taken on the event loop (``Registered`` rows).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from shmq.client.consumer.subscription import Subscription
from shmq.client.selector import MessageSelector
from shmq.proxy.broker import BrokerClient
from shmq.proxy.v2 import definition_pb2 as pb
from shmq.remoting.protocol import RequestCode

_CONSUME_TYPES = {pb.PUSH_CONSUMER: "CONSUME_PASSIVELY", pb.SIMPLE_CONSUMER: "CONSUME_ACTIVELY"}


@dataclass(frozen=True)
class Registered:
    """One client as the broker is told of it."""

    client_id: str
    language: str
    settings: pb.Settings


def consumer_data(settings: pb.Settings) -> dict[str, Any]:
    """A consumer's settings as a heartbeat's ``ConsumerData`` (RocketMQ's
    ``GrpcClientSettingsManager`` → ``registerConsumer``: clustering, from the last offset,
    tag or SQL92 subscriptions)."""
    subscription = settings.subscription
    return {
        "groupName": subscription.group.name,
        "consumeType": _CONSUME_TYPES.get(settings.client_type, "CONSUME_ACTIVELY"),
        "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
        "unitMode": False,
        "subscriptionDataSet": [
            Subscription.parse(e.topic.name, selector(e.expression)).to_json()
            for e in subscription.subscriptions
        ],
    }


def selector(expression: pb.FilterExpression) -> str | MessageSelector:
    """A gRPC subscription's filter as shmq's clients write it: a tag expression or a
    SQL92 ``MessageSelector``."""
    if expression.type == pb.SQL:
        return MessageSelector.by_sql(expression.expression)
    return expression.expression


class BrokerRegistration:
    """The heartbeats last sent, so that ``sync`` sends what changed (or all, ``force``)."""

    def __init__(self, broker: BrokerClient) -> None:
        self.broker = broker
        self._producer_topics: list[str] = []
        # client id → (group, subscriptions as sent)
        self._consumers: dict[str, tuple[str, tuple[tuple[str, int, str], ...]]] = {}
        self._lock = threading.Lock()  # two workers may sync at once

    def sync(self, clients: list[Registered], force: bool = False) -> None:
        """Register ``clients`` (every known one with settings) with the broker; the
        consumers registered before and missing now are unregistered."""
        topics = sorted({t.name for c in clients if c.settings.HasField("publishing")
                         for t in c.settings.publishing.topics})  # fmt: skip
        consumers = {c.client_id: c for c in clients if c.settings.HasField("subscription")}
        with self._lock:
            if topics and (force or topics != self._producer_topics):
                self.broker.heartbeat(self.broker.client_id, topics)
                self._producer_topics = topics
            for client_id in self._consumers.keys() - consumers.keys():
                self._unregister(client_id, self._consumers.pop(client_id)[0])
            for client_id, client in consumers.items():
                subscription = client.settings.subscription
                entries = tuple((e.topic.name, e.expression.type, e.expression.expression)
                                for e in subscription.subscriptions)  # fmt: skip
                key = (subscription.group.name, entries)
                before = self._consumers.get(client_id)
                if before is not None and before[0] != key[0]:  # it moved to another group
                    self._unregister(client_id, before[0])
                if force or before != key:
                    data = consumer_data(client.settings)
                    self.broker.heartbeat(client_id, [], data, client.language)
                    self._consumers[client_id] = key

    def _unregister(self, client_id: str, group: str) -> None:
        self.broker.invoke(RequestCode.UNREGISTER_CLIENT,
                           {"clientID": client_id, "consumerGroup": group})  # fmt: skip
