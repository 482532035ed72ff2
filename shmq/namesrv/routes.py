"""The NameServer's route registry: RocketMQ 4.9's ``RouteInfoManager``, in memory.

Brokers register periodically with their topic configs; clients ask which brokers serve a
topic. The tables mirror RocketMQ's (spec §12) so route answers have TopicRouteData's shape:

- topicQueueTable: topic → {brokerName → QueueData}; only masters (brokerId 0) contribute;
- brokerAddrTable: brokerName → BrokerData(cluster, brokerName, {brokerId → addr});
- clusterAddrTable: cluster → {brokerName};
- brokerLiveTable: brokerAddr → BrokerLiveInfo(lastUpdateTimestamp, dataVersion,
  haServerAddr, connection id).

A broker leaves the tables when it unregisters, when its registration connection closes, or
when it has not registered for ``expire_ms`` (RocketMQ's BROKER_CHANNEL_EXPIRED_TIME, 120 s).
One lock guards all tables; every method is one short critical section.

Unlike 4.9, which only adds and updates queue data on registration, a master's registration
replaces its queue data: topics missing from its table lose the broker, so a topic deleted on
the broker disappears from routes without a separate DELETE_TOPIC_IN_NAMESRV.

Admins take a broker out of the producers' routes before maintenance with
``wipe_write_perm`` (mqadmin ``wipeWritePerm``) and put it back with ``add_write_perm``; the
change is the namesrv's alone, the broker still accepts writes. As in RocketMQ (4.9 and
5.x), a registration only replaces queue data when the broker registers first or its
dataVersion changed: its periodic re-registration leaves a wiped perm wiped, while a topic
change on the broker (a new dataVersion), its restart or its expiry and return brings back
the perm of its topic configs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

log = logging.getLogger(__name__)

MASTER_ID = 0
BROKER_EXPIRE_MS = 120_000  # RocketMQ's BROKER_CHANNEL_EXPIRED_TIME
PERM_READ, PERM_WRITE = 4, 2  # RocketMQ's PermName (the broker's topic_config pulls numpy)
FLAG_UNIT, FLAG_UNIT_SUB = 0x1, 0x2  # RocketMQ's TopicSysFlag bits

# TopicConfig defaults (RocketMQ's TopicConfig: 16 read and write queues, perm RW).
_QUEUE_DEFAULTS = {"readQueueNums": 16, "writeQueueNums": 16, "perm": 6, "topicSysFlag": 0}


@dataclass(frozen=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums,
            "perm": self.perm,
            "topicSysFlag": self.topic_sys_flag,
        }


@dataclass
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str]

    def to_json(self) -> dict[str, Any]:
        addrs = {str(k): v for k, v in sorted(self.broker_addrs.items())}
        return {"cluster": self.cluster, "brokerName": self.broker_name, "brokerAddrs": addrs}


@dataclass
class BrokerLiveInfo:
    last_update_timestamp: int
    data_version: dict[str, Any] | None
    ha_server_addr: str
    connection_id: int | None


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _queue_datas(broker_name: str, topic_config_table: dict[str, Any]) -> dict[str, QueueData]:
    """topic → QueueData from a topics.json ``topicConfigTable``; ``ValueError`` naming the
    topic and field if a config is malformed (checked before any table changes)."""
    if not isinstance(topic_config_table, dict):
        raise ValueError(f"topicConfigTable is a {type(topic_config_table).__name__}, not a map")
    result: dict[str, QueueData] = {}
    for key, config in topic_config_table.items():
        if not isinstance(config, dict):
            raise ValueError(f"topic config of {key!r} is a {type(config).__name__}, not a map")
        topic = config.get("topicName", key)
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"topic config of {key!r} has topicName {topic!r}")
        values = {}
        for name, default in _QUEUE_DEFAULTS.items():
            value = config.get(name, default)
            if type(value) is not int or value < 0:
                raise ValueError(f"topic {topic!r}: {name} is {value!r}, not an integer >= 0")
            values[name] = value
        result[topic] = QueueData(
            broker_name,
            values["readQueueNums"],
            values["writeQueueNums"],
            values["perm"],
            values["topicSysFlag"],
        )
    return result


class RouteInfoManager:
    """Thread-safe route tables; see the module docstring."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._topic_queue: dict[str, dict[str, QueueData]] = {}
        self._broker_addr: dict[str, BrokerData] = {}
        self._cluster_addr: dict[str, set[str]] = {}
        self._broker_live: dict[str, BrokerLiveInfo] = {}

    def register_broker(
        self,
        cluster: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topic_config_table: dict[str, Any] | None,
        data_version: dict[str, Any] | None,
        connection_id: int | None = None,
        now_ms: int | None = None,
    ) -> dict[str, str | None]:
        """Record a broker's heartbeat; returns RegisterBrokerResult ``{"haServerAddr",
        "masterAddr"}``, filled in for a slave whose master is registered (else None).

        A master's ``topic_config_table`` replaces its queue data when it registers first or
        its ``data_version`` changed (or is None); ``None`` as the table leaves it as is.
        """
        queue_datas = (
            None if topic_config_table is None else _queue_datas(broker_name, topic_config_table)
        )
        now = _now_ms() if now_ms is None else now_ms
        with self._lock:
            self._cluster_addr.setdefault(cluster, set()).add(broker_name)
            broker_data = self._broker_addr.get(broker_name)
            register_first = broker_data is None
            if broker_data is None:
                broker_data = self._broker_addr[broker_name] = BrokerData(cluster, broker_name, {})
            # The same address has one role: a slave switched to master loses its old id.
            for old_id in [i for i, a in broker_data.broker_addrs.items() if a == broker_addr]:
                if old_id != broker_id:
                    del broker_data.broker_addrs[old_id]
            old_addr = broker_data.broker_addrs.get(broker_id)
            broker_data.broker_addrs[broker_id] = broker_addr
            register_first = register_first or old_addr is None

            previous = self._broker_live.get(broker_addr)
            changed = (
                previous is None or data_version is None or previous.data_version != data_version
            )
            if queue_datas is not None and broker_id == MASTER_ID and (changed or register_first):
                self._replace_queue_datas(broker_name, queue_datas)
            self._broker_live[broker_addr] = BrokerLiveInfo(
                now, data_version, ha_server_addr, connection_id
            )
            if previous is None:
                log.info(
                    "new broker registered: %s (%s, id %d)", broker_addr, broker_name, broker_id
                )

            result: dict[str, str | None] = {"haServerAddr": None, "masterAddr": None}
            if broker_id != MASTER_ID:
                master_addr = broker_data.broker_addrs.get(MASTER_ID)
                master_live = self._broker_live.get(master_addr) if master_addr else None
                if master_live is not None:
                    result = {"haServerAddr": master_live.ha_server_addr, "masterAddr": master_addr}
            return result

    def _replace_queue_datas(self, broker_name: str, queue_datas: dict[str, QueueData]) -> None:
        for topic in list(self._topic_queue):
            if topic not in queue_datas:
                self._remove_broker_from_topic(topic, broker_name)
        for topic, queue_data in queue_datas.items():
            by_broker = self._topic_queue.setdefault(topic, {})
            if by_broker.get(broker_name) != queue_data:
                log.info("topic %s queue data of %s: %s", topic, broker_name, queue_data)
                by_broker[broker_name] = queue_data

    def _remove_broker_from_topic(self, topic: str, broker_name: str) -> None:
        by_broker = self._topic_queue[topic]
        if by_broker.pop(broker_name, None) is not None and not by_broker:
            del self._topic_queue[topic]
            log.info("topic %s removed: no broker serves it any more", topic)

    def unregister_broker(
        self, cluster: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> None:
        """Forget a broker that shuts down; its brokerName's routes go with its last address."""
        with self._lock:
            self._broker_live.pop(broker_addr, None)
            broker_data = self._broker_addr.get(broker_name)
            if broker_data is None or broker_data.broker_addrs.get(broker_id) != broker_addr:
                return
            del broker_data.broker_addrs[broker_id]
            log.info("broker unregistered: %s (%s, id %d)", broker_addr, broker_name, broker_id)
            if not broker_data.broker_addrs:
                self._remove_broker_name(cluster, broker_name)

    def _remove_broker_name(self, cluster: str, broker_name: str) -> None:
        del self._broker_addr[broker_name]
        names = self._cluster_addr.get(cluster)
        if names is not None:
            names.discard(broker_name)
            if not names:
                del self._cluster_addr[cluster]
        for topic in list(self._topic_queue):
            self._remove_broker_from_topic(topic, broker_name)

    def _remove_broker_addr(self, broker_addr: str) -> None:
        """RocketMQ's onChannelDestroy: drop an address everywhere (lock held)."""
        self._broker_live.pop(broker_addr, None)
        for broker_name, broker_data in list(self._broker_addr.items()):
            for broker_id in [i for i, a in broker_data.broker_addrs.items() if a == broker_addr]:
                del broker_data.broker_addrs[broker_id]
            if not broker_data.broker_addrs:
                self._remove_broker_name(broker_data.cluster, broker_name)

    def scan_not_active_brokers(
        self, now_ms: int | None = None, expire_ms: int = BROKER_EXPIRE_MS
    ) -> list[str]:
        """Remove brokers whose last registration is older than ``expire_ms``; their addrs."""
        now = _now_ms() if now_ms is None else now_ms
        with self._lock:
            expired = [
                addr
                for addr, live in self._broker_live.items()
                if live.last_update_timestamp + expire_ms < now
            ]
            for addr in expired:
                log.warning("broker %s expired: no registration for %d ms", addr, expire_ms)
                self._remove_broker_addr(addr)
        return expired

    def on_connection_closed(self, connection_id: int) -> list[str]:
        """Remove the brokers that registered over a closed connection; their addrs."""
        with self._lock:
            gone = [
                a for a, live in self._broker_live.items() if live.connection_id == connection_id
            ]
            for addr in gone:
                log.info("broker %s removed: its connection closed", addr)
                self._remove_broker_addr(addr)
        return gone

    def pick_topic_route(self, topic: str) -> dict[str, Any] | None:
        """TopicRouteData for ``topic`` as JSON-ready dicts, or None if no broker serves it."""
        with self._lock:
            by_broker = self._topic_queue.get(topic)
            if not by_broker:
                return None
            names = sorted(by_broker)
            broker_datas = [self._broker_addr[n].to_json() for n in names if n in self._broker_addr]
            if not broker_datas:
                return None
            return {
                "orderTopicConf": None,
                "queueDatas": [by_broker[n].to_json() for n in names],
                "brokerDatas": broker_datas,
                "filterServerTable": {},
            }

    def cluster_info(self) -> dict[str, Any]:
        """ClusterInfo: ``{"brokerAddrTable": {name: BrokerData}, "clusterAddrTable":
        {cluster: [names]}}``."""
        with self._lock:
            return {
                "brokerAddrTable": {
                    name: self._broker_addr[name].to_json() for name in sorted(self._broker_addr)
                },
                "clusterAddrTable": {
                    cluster: sorted(names) for cluster, names in sorted(self._cluster_addr.items())
                },
            }

    def all_topics(self) -> list[str]:
        with self._lock:
            return sorted(self._topic_queue)

    def system_topics(self) -> dict[str, Any]:
        """RocketMQ's ``getSystemTopicList``: every cluster name and broker name (each is a
        topic of its brokers), and one registered broker's address."""
        with self._lock:
            topics = set(self._cluster_addr)
            for names in self._cluster_addr.values():
                topics |= names
            addrs = [
                addr
                for name in sorted(self._broker_addr)
                for _, addr in sorted(self._broker_addr[name].broker_addrs.items())
            ]
            return {"topicList": sorted(topics), "brokerAddr": addrs[0] if addrs else None}

    def topics_by_sys_flag(self, wanted: Callable[[int], bool]) -> list[str]:
        """The topics whose ``topicSysFlag`` (of any one broker's queue data, as RocketMQ
        reads the first) ``wanted`` takes, sorted: mqadmin's unit-topic lists
        (GET_UNIT_TOPIC_LIST and the two GET_HAS_UNIT_SUB lists)."""
        with self._lock:
            return sorted(
                topic
                for topic, by_name in self._topic_queue.items()
                if by_name and wanted(next(iter(by_name.values())).topic_sys_flag)
            )

    def query_data_version(
        self, broker_addr: str, data_version: dict[str, Any] | None, now_ms: int | None = None
    ) -> tuple[bool, dict[str, Any] | None]:
        """RocketMQ's QUERY_DATA_VERSION, which a broker sends to learn whether it must
        register again: ``(changed, the data version registered)``; ``changed`` when the
        broker is not registered or registered another version. A registered broker's
        heartbeat is renewed, as a registration would."""
        with self._lock:
            live = self._broker_live.get(broker_addr)
            if live is None:
                return True, None
            live.last_update_timestamp = _now_ms() if now_ms is None else now_ms
            return live.data_version != data_version, live.data_version

    def topics_by_cluster(self, cluster: str) -> list[str]:
        """The topics any broker of ``cluster`` serves, sorted (RocketMQ's
        ``getTopicsByCluster``); none for a cluster it does not know."""
        with self._lock:
            names = self._cluster_addr.get(cluster, set())
            return sorted(t for t, by_name in self._topic_queue.items() if names & by_name.keys())

    def wipe_write_perm(self, broker_name: str) -> int:
        """Clear the write bit of ``broker_name``'s queue data in every topic (RocketMQ's
        ``wipeWritePermOfBroker``); how many topics it has."""
        return self._set_perms(broker_name, lambda perm: perm & ~PERM_WRITE)

    def add_write_perm(self, broker_name: str) -> int:
        """Set ``broker_name``'s queue data in every topic to read-write (RocketMQ's
        ``addWritePermOfBroker``, which sets the perm to READ | WRITE, dropping any other
        bit); how many topics it has."""
        return self._set_perms(broker_name, lambda perm: PERM_READ | PERM_WRITE)

    def _set_perms(self, broker_name: str, new_perm: Callable[[int], int]) -> int:
        with self._lock:
            count = 0
            for by_broker in self._topic_queue.values():
                queue_data = by_broker.get(broker_name)
                if queue_data is not None:
                    by_broker[broker_name] = replace(queue_data, perm=new_perm(queue_data.perm))
                    count += 1
        log.info("perm of broker %s changed in %d topic(s)", broker_name, count)
        return count

    def delete_topic(self, topic: str) -> None:
        """Drop a topic's routes (admin deleteTopic); brokers that still have it re-add it
        when their data version changes."""
        with self._lock:
            if self._topic_queue.pop(topic, None) is not None:
                log.info("topic %s deleted", topic)

    def live_brokers(self) -> dict[str, dict[str, Any]]:
        """brokerAddr → ``{"lastUpdateTimestamp", "dataVersion", "haServerAddr",
        "connectionId"}``, for status displays."""
        with self._lock:
            return {
                addr: {
                    "lastUpdateTimestamp": live.last_update_timestamp,
                    "dataVersion": live.data_version,
                    "haServerAddr": live.ha_server_addr,
                    "connectionId": live.connection_id,
                }
                for addr, live in sorted(self._broker_live.items())
            }
