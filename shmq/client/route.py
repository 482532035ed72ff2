"""Topic routes from the namesrvs, cached and refreshed (RocketMQ's ``MQClientInstance``).

A route lists, per broker, its address and the topic's read/write queue counts. When no
namesrv knows a topic, producers fall back to the route of ``TBW102``, which brokers with
``autoCreateTopicEnable`` register; the broker then creates the topic on the first send.
A route may also carry an ``orderTopicConf`` (``parse_order_topic_conf``), the fixed queue
list producers use for the topic.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
import time
from dataclasses import dataclass

from shmq.errors import ConfigError, InvalidTopicError, NoRouteError, RemotingError, ResponseError
from shmq.names import MAX_TOPIC_LENGTH, name_problem
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RequestCode, ResponseCode

log = logging.getLogger(__name__)

AUTO_CREATE_TOPIC_KEY = "TBW102"
DEFAULT_TOPIC_QUEUE_NUMS = 4  # the producer's defaultTopicQueueNums
PERM_READ, PERM_WRITE = 4, 2
MAX_ORDER_QUEUE_NUMS = 1024  # a broker's queues in an orderTopicConf: the broker's own limit
_ORDER_ENTRY = re.compile(r"([^:;]+):([0-9]{1,9})")


MASTER_ID = 0


@dataclass(frozen=True)
class BrokerQueues:
    """A broker name's queues of a topic. ``address`` is the master's, or the lowest-id
    slave's while the master is gone; ``addrs`` every registered ``(brokerId, address)``,
    sorted."""

    broker_name: str
    address: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    addrs: tuple[tuple[int, str], ...] = ()
    cluster: str = ""

    def with_queue_nums(self, n: int) -> BrokerQueues:
        """This broker's queues of a topic it will create from ``TBW102``'s: at most ``n``
        (the producer's ``defaultTopicQueueNums``)."""
        return dataclasses.replace(self, read_queue_nums=min(n, self.read_queue_nums),
                                   write_queue_nums=min(n, self.write_queue_nums))  # fmt: skip

    @property
    def master(self) -> str:
        """The master's address; empty while it is not registered."""
        return dict(self.addrs).get(MASTER_ID, "")

    def find(self, broker_id: int) -> str:
        """Where to read from when ``broker_id`` is wanted (RocketMQ's
        ``findBrokerAddressInSubscribe`` without ``onlyThisBroker``): that broker, for a
        slave id the next one, else any (the master first)."""
        if self.addrs and self.addrs[0][0] == broker_id:  # usual: the master, sorted first
            return self.addrs[0][1]
        addrs = dict(self.addrs)
        found = addrs.get(broker_id) or (broker_id != MASTER_ID and addrs.get(broker_id + 1))
        return found or self.address


def parse_order_topic_conf(conf: str) -> list[tuple[str, int]]:
    """``[(brokerName, queue count)]`` of an ``orderTopicConf`` such as
    ``"brokerA:4;brokerB:4"`` (mqadmin ``updateOrderConf -v``), in its order.

    RocketMQ splits on ``;`` and ``:`` and lets a malformed entry throw; here a trailing
    ``;`` is allowed (Java's split drops it too) and anything else off the shape is a
    ``ConfigError`` naming the entry: an empty entry or broker name, a count that is not
    1..``MAX_ORDER_QUEUE_NUMS``, a broker named twice.
    """
    if not isinstance(conf, str):
        raise ConfigError(f"orderTopicConf must be a str, not {type(conf).__name__}")
    entries = conf.split(";")
    if entries[-1] == "" and len(entries) > 1:
        entries.pop()
    out: dict[str, int] = {}
    for entry in entries:
        match = _ORDER_ENTRY.fullmatch(entry)
        if match is None or not 1 <= int(match[2]) <= MAX_ORDER_QUEUE_NUMS:
            raise ConfigError(
                f"orderTopicConf {conf!r}: entry {entry!r} is not brokerName:queueNums with"
                f" queueNums in 1..{MAX_ORDER_QUEUE_NUMS} (e.g. 'broker-a:4;broker-b:4')"
            )
        if match[1] in out:
            raise ConfigError(f"orderTopicConf {conf!r} names broker {match[1]!r} twice")
        out[match[1]] = int(match[2])
    return list(out.items())


def split_addrs(namesrv: str) -> list[str]:
    addrs = [a.strip() for a in namesrv.split(";") if a.strip()]
    if not addrs:
        raise NoRouteError("no namesrv address given (namesrvAddr)")
    return addrs


class RouteTable:
    def __init__(self, namesrv: str, client: RemotingClient, refresh_s: float = 30.0) -> None:
        self.addrs = split_addrs(namesrv)
        self.client = client
        self.refresh_s = refresh_s
        self._routes: dict[str, tuple[float, list[BrokerQueues]]] = {}
        self._order_confs: dict[str, str] = {}  # of the last route fetched; kept by invalidate
        self._lock = threading.Lock()

    def brokers(self, topic: str, *, auto_create: bool = False) -> list[BrokerQueues]:
        """The topic's brokers (cached ``refresh_s``); with ``auto_create``, the default
        topic's brokers when the topic has no route yet. A name no topic can have is an
        ``InvalidTopicError``, not a missing route."""
        with self._lock:
            cached = self._routes.get(topic)
            if cached is not None and time.monotonic() - cached[0] < self.refresh_s:
                return cached[1]
        problem = name_problem("topic", topic, MAX_TOPIC_LENGTH)
        if problem:
            raise InvalidTopicError(problem)
        route = self._fetch(topic)
        if route is None and auto_create:
            default = self._fetch(AUTO_CREATE_TOPIC_KEY)
            if default:
                return [b.with_queue_nums(DEFAULT_TOPIC_QUEUE_NUMS) for b in default]
        if route is None:
            raise NoRouteError(
                f"No route info of this topic: {topic} (namesrv {';'.join(self.addrs)})"
            )
        return route

    def invalidate(self, topic: str) -> None:
        with self._lock:
            self._routes.pop(topic, None)

    def order_topic_conf(self, topic: str) -> str | None:
        """The ``orderTopicConf`` of the topic's route last fetched (None: none, or not
        fetched); it is not dropped by ``invalidate``, so it always matches the brokers
        a fetch just returned."""
        with self._lock:
            return self._order_confs.get(topic)

    def _fetch(self, topic: str) -> list[BrokerQueues] | None:
        last: Exception | None = None
        for addr in self.addrs:
            try:
                _, data = self.client.invoke_json(
                    addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}
                )
            except ResponseError as exc:
                if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                    with self._lock:
                        self._order_confs.pop(topic, None)
                    return None
                last = exc
                continue
            except RemotingError as exc:
                last = exc
                continue
            route = _parse_route(data)
            conf = data.get("orderTopicConf")
            with self._lock:
                self._routes[topic] = (time.monotonic(), route)
                if conf:
                    self._order_confs[topic] = conf
                else:
                    self._order_confs.pop(topic, None)
            return route
        raise NoRouteError(f"no namesrv answered for topic {topic}: {last}")


def _parse_route(data: dict) -> list[BrokerQueues]:
    """Each broker name's master; a slave (the lowest id) while the master is gone, as
    RocketMQ's ``findBrokerAddressInSubscribe`` does, so consumers read what the slave
    holds (a slave refuses producers' registrations: sends fail clearly)."""
    brokers = {}
    for b in data.get("brokerDatas", []):
        addrs = tuple(sorted((int(i), a) for i, a in b.get("brokerAddrs", {}).items()))
        if addrs:
            brokers[b["brokerName"]] = (addrs, str(b.get("cluster") or ""))
    out = []
    for q in sorted(data.get("queueDatas", []), key=lambda q: q["brokerName"]):
        addrs, cluster = brokers.get(q["brokerName"], ((), ""))
        if addrs:  # the master (id 0) sorts first
            queues = (q["readQueueNums"], q["writeQueueNums"], q["perm"])
            out.append(BrokerQueues(q["brokerName"], addrs[0][1], *queues, addrs, cluster))
    return out
