"""Where a producer may send each topic (RocketMQ's ``TopicPublishInfo``), kept fresh from
the NameServer: fetched on first use, refreshed every ``poll_name_server_interval`` and after
a failed attempt, and for a topic new to the cluster taken from the auto-create template's
route (``TBW102``) until the brokers have created it.

A route with an ``orderTopicConf`` (``"brokerA:4;brokerB:4"``, the namesrv's
``ORDER_TOPIC_CONFIG`` entry for the topic) makes an ordered topic, as RocketMQ's
``topicRouteData2TopicPublishInfo`` does: its queues are the conf's, in the conf's order,
whatever the brokers' perm and queue counts, so a message keyed to queue i stays on it while
brokers are wiped read-only. One difference: RocketMQ also lists the queues of a broker
missing from the route (their sends fail with "broker not exist"); shmq has no address for
them and leaves them out, with a warning.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from shmq.client.route import (
    AUTO_CREATE_TOPIC_KEY,
    PERM_WRITE,
    BrokerQueues,
    RouteTable,
    parse_order_topic_conf,
)
from shmq.client.types import MessageQueue
from shmq.errors import ConfigError, NoRouteError, SendError, ShmqError

log = logging.getLogger(__name__)


@dataclass
class TopicPublishInfo:
    """The writable queues of a topic, sorted by broker name and queue id (an ordered
    topic's: its ``orderTopicConf``'s), and the brokers that hold them."""

    topic: str
    brokers: dict[str, BrokerQueues]
    queues: list[MessageQueue]
    queue_set: frozenset[MessageQueue]
    auto_create: bool  # from TBW102's route: the brokers create the topic on first send
    read_only: tuple[str, ...] = ()  # brokers of the route without write permission
    stale: bool = False

    def no_writable_queue(self) -> SendError:
        return SendError(
            f"no broker accepts writes for topic {self.topic} (read-only on "
            f"{', '.join(self.read_only) or 'no broker'}; no write queue elsewhere)"
        )


class PublishInfoTable:
    """The publish info of every topic a producer uses."""

    def __init__(
        self, routes: RouteTable, group: str, default_topic_queue_nums: int, interval: float
    ) -> None:
        self.routes = routes
        self.group = group
        self.default_topic_queue_nums = default_topic_queue_nums
        self.interval = interval
        self.infos: dict[str, TopicPublishInfo] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._refresher: threading.Thread | None = None

    def get(self, topic: str) -> TopicPublishInfo:
        """The topic's publish info, fetched when unknown or marked stale (a failed refresh
        keeps the one known)."""
        info = self.infos.get(topic)
        if info is not None and not info.stale:
            return info
        try:
            fresh = self.fetch(topic)
        except ShmqError as exc:
            if info is None:
                raise
            log.info("route of %s not refreshed (%s); keeping the one known", topic, exc)
            info.stale = False
            return info
        self.infos[topic] = fresh
        self._ensure_refresher()
        return fresh

    def fetch(self, topic: str) -> TopicPublishInfo:
        self.routes.invalidate(topic)
        auto_create = False
        try:
            brokers = self.routes.brokers(topic)
        except NoRouteError as exc:
            try:
                default = self.routes.brokers(AUTO_CREATE_TOPIC_KEY)
            except NoRouteError:
                raise exc from None
            auto_create = True
            n = self.default_topic_queue_nums
            brokers = [b.with_queue_nums(n) for b in default]
        order_conf = None if auto_create else self.routes.order_topic_conf(topic)
        if order_conf:
            writable, queues = _order_topic_queues(topic, order_conf, brokers)
        else:
            writable = {b.broker_name: b for b in brokers if b.perm & PERM_WRITE}
            queues = [
                MessageQueue(topic, name, q)
                for name in sorted(writable)
                for q in range(writable[name].write_queue_nums)
            ]
        read_only = tuple(sorted(b.broker_name for b in brokers if not b.perm & PERM_WRITE))
        log.info("producer %s: route of %s: %d writable queues on %s%s", self.group, topic,
                 len(queues), ", ".join(f"{b.broker_name} ({b.address})" for b in writable.values())
                 or "no broker", " (auto-create)" if auto_create else "")  # fmt: skip
        return TopicPublishInfo(topic, writable, queues, frozenset(queues), auto_create, read_only)

    def invalidate(self, topic: str) -> None:
        """Refresh the topic's route before the next send (after a failed attempt)."""
        info = self.infos.get(topic)
        if info is not None:
            info.stale = True
        self.routes.invalidate(topic)

    def _ensure_refresher(self) -> None:
        if self._refresher is not None or self._stop.is_set():
            return
        with self._lock:
            if self._refresher is None and not self._stop.is_set():
                self._refresher = threading.Thread(
                    target=self._refresh_loop, name=f"shmq-routes-{self.group}", daemon=True
                )
                self._refresher.start()

    def _refresh_loop(self) -> None:
        """Every ``interval``: the routes of the topics used (RocketMQ's
        ``updateTopicRouteInfoFromNameServer``); a failed refresh keeps the known route."""
        while not self._stop.wait(self.interval):
            for topic in list(self.infos):
                if self._stop.is_set():
                    return
                try:
                    self.infos[topic] = self.fetch(topic)
                except ShmqError as exc:
                    log.debug("route of %s not refreshed: %s", topic, exc)
                except Exception:
                    log.exception("route refresh of %s failed", topic)

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            refresher = self._refresher
        if refresher is not None:
            refresher.join(5.0)


def _order_topic_queues(
    topic: str, order_conf: str, brokers: list[BrokerQueues]
) -> tuple[dict[str, BrokerQueues], list[MessageQueue]]:
    """The brokers and queues ``order_conf`` lists (see the module docstring); a conf
    that does not parse is a ``ConfigError`` naming the topic."""
    try:
        entries = parse_order_topic_conf(order_conf)
    except ConfigError as exc:
        raise ConfigError(f"the route of topic {topic}: {exc}") from None
    by_name = {b.broker_name: b for b in brokers}
    missing = [name for name, _ in entries if name not in by_name]
    if missing:
        log.warning("topic %s: orderTopicConf %r names brokers not in its route: %s; their"
                    " queues are left out", topic, order_conf, ", ".join(missing))  # fmt: skip
    listed = {name: by_name[name] for name, _ in entries if name in by_name}
    queues = [MessageQueue(topic, name, q) for name, n in entries if name in listed
              for q in range(n)]  # fmt: skip
    return listed, queues
