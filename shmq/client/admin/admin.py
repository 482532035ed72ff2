"""Cluster administration (RocketMQ's ``DefaultMQAdminExt``): what ``shmq admin`` runs.

Topics, routes, queue and consume statistics, consumer connections, message queries,
offset resets, subscription groups and broker status, over the control plane: the namesrv
for routes and cluster membership, each broker for its own part. Results are plain lists and
dicts (messages in ``message_to_json``'s shape, the body base64-encoded) or the small frozen
dataclasses of ``admin_types``, each with ``to_json()`` giving RocketMQ's field names.
Dead-letter queues: ``client.dlq``; pending transactions: ``client.transaction_status``.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from shmq.client.admin.config import BrokerConfigs
from shmq.client.admin.messages import DEFAULT_QUERY_NUM, MessageQueries
from shmq.client.admin.namesrv import NamesrvAdmin
from shmq.client.admin.offsets import GroupOffsets
from shmq.client.admin.queues import QueueQueries
from shmq.client.admin.stats import BrokerStats
from shmq.client.admin.types import ConsumerProgress, QueueProgress, QueueStatus
from shmq.client.consumer import dlq
from shmq.client.route import split_addrs
from shmq.client.transaction import status as transaction_status
from shmq.errors import (
    ClientError,
    ConfigError,
    NoRouteError,
    RemotingConnectError,
    RemotingError,
    ResponseError,
)
from shmq.names import dlq_topic, is_system_topic, retry_topic, system_topic_refusal
from shmq.remoting.admin_bodies import queue_entries, runtime_stats
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RequestCode, ResponseCode

Rc = ResponseCode

MASTER_ID = "0"
RUNNING_INFO_TIMEOUT_S = 8.0  # the broker gives a consumer 5 s to answer, then says so

# update_sub_group's settings → RocketMQ's SubscriptionGroupConfig JSON keys.
SUB_GROUP_SETTINGS = {
    "consume_enable": "consumeEnable",
    "consume_from_min_enable": "consumeFromMinEnable",
    "consume_broadcast_enable": "consumeBroadcastEnable",
    "retry_queue_nums": "retryQueueNums",
    "retry_max_times": "retryMaxTimes",
    "broker_id": "brokerId",
    "which_broker_when_consume_slowly": "whichBrokerWhenConsumeSlowly",
    "notify_consumer_ids_changed_enable": "notifyConsumerIdsChangedEnable",
}


class Admin(MessageQueries, BrokerConfigs, NamesrvAdmin, GroupOffsets, BrokerStats, QueueQueries):
    """Administers the brokers registered with the namesrv(s) ``namesrv`` (``;``-separated).

    Calls that touch several brokers go to the master of every broker name involved: the
    brokers of the topic's route, or those of ``cluster`` (when the namesrv knows a single
    cluster, that one by default), or just ``broker`` (a name or a ``host:port`` address).
    Failures raise shmq's exceptions (``NoRouteError``, ``ResponseError`` with the broker's
    code, ``ClientError``, ``RemotingError``), their messages naming the topic, group or
    broker.

    Example::

        with Admin("127.0.0.1:9876") as admin:
            admin.update_topic("Orders", read_queue_nums=4, write_queue_nums=4)
            for q in admin.topic_status("Orders"):
                print(q.broker_name, q.queue_id, q.min_offset, q.max_offset)
            progress = admin.consumer_progress("OrderReaders", "Orders")
            print("lag", progress.diff_total)
            admin.reset_offset("OrderReaders", "Orders", int(time.time() * 1000) - 3600_000)
    """

    def __init__(self, namesrv: str = "127.0.0.1:9876", *, timeout: float = 5.0) -> None:
        self.namesrv_addrs = split_addrs(namesrv)
        self.client = RemotingClient(connect_timeout=min(3.0, timeout), default_timeout=timeout)
        self._store_hosts: dict[str, str] = {}  # broker address → its storeHost

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- requests -------------------------------------------------------------------------------

    def _namesrv(self, code: int, ext_fields: dict[str, Any] | None = None) -> Any:
        """The first namesrv's JSON answer (the next one is asked when one cannot be
        reached)."""
        return self._first_namesrv(code, ext_fields or {}).json_body()

    def _call(
        self,
        broker: tuple[str, str],
        code: int,
        ext_fields: dict[str, Any] | None = None,
        body: Any = None,
        timeout: float | None = None,
    ) -> tuple[Any, Any]:
        """A request to ``(broker name, address)``: (response, JSON body); a
        ``ResponseError`` names the broker."""
        name, addr = broker
        try:
            return self.client.invoke_json(addr, code, ext_fields, body, timeout)
        except ResponseError as exc:
            if name in exc.remark:
                raise
            raise ResponseError(exc.code, f"broker {name} ({addr}): {exc.remark}") from None

    # -- brokers --------------------------------------------------------------------------------

    def cluster_info(self) -> dict[str, Any]:
        """The namesrv's ``ClusterInfo``: ``{"brokerAddrTable": {name: {"cluster",
        "brokerName", "brokerAddrs": {id: addr}}}, "clusterAddrTable": {cluster: [names]}}``."""
        return self._namesrv(RequestCode.GET_BROKER_CLUSTER_INFO) or {}

    def _masters(self, cluster: str | None = None) -> list[tuple[str, str]]:
        """``(broker name, master address)`` of ``cluster``'s brokers (every cluster's when
        None), sorted by name."""
        info = self.cluster_info()
        clusters = info.get("clusterAddrTable", {})
        if cluster is not None and cluster not in clusters:
            known = ", ".join(sorted(clusters)) or "none"
            raise ClientError(
                f"cluster {cluster} is not registered with namesrv"
                f" {';'.join(self.namesrv_addrs)} (clusters: {known})"
            )
        names = clusters[cluster] if cluster is not None else info.get("brokerAddrTable", {})
        out = []
        for name in sorted(names):
            addr = info.get("brokerAddrTable", {}).get(name, {}).get("brokerAddrs", {})
            if MASTER_ID in addr:
                out.append((name, addr[MASTER_ID]))
        return out

    def _broker(self, broker: str) -> tuple[str, str]:
        """``(name, address)`` of a broker given by name or by ``host:port``."""
        info = self.cluster_info().get("brokerAddrTable", {})
        for name, data in info.items():
            addrs = data.get("brokerAddrs", {})
            if broker == name and MASTER_ID in addrs:
                return name, addrs[MASTER_ID]
            if broker in addrs.values():
                return name, broker
        if ":" in broker:
            return broker, broker  # not registered, but an address: ask it directly
        raise ClientError(
            f"broker {broker} is not registered with namesrv {';'.join(self.namesrv_addrs)}"
        )

    def _targets(self, broker: str | None, cluster: str | None) -> list[tuple[str, str]]:
        if broker is not None:
            return [self._broker(broker)]
        if cluster is None:
            clusters = sorted(self.cluster_info().get("clusterAddrTable", {}))
            if len(clusters) > 1:
                raise ClientError(
                    f"namesrv {';'.join(self.namesrv_addrs)} knows several clusters"
                    f" ({', '.join(clusters)}): give a cluster or a broker"
                )
        masters = self._masters(cluster)
        if not masters:
            raise ClientError(
                f"no broker is registered with namesrv {';'.join(self.namesrv_addrs)}"
                + (f" in cluster {cluster}" if cluster else "")
            )
        return masters

    def _topic_brokers(self, topic: str) -> list[tuple[str, str]]:
        """``(name, master address)`` of the brokers serving ``topic``."""
        route = self.topic_route(topic)
        masters = {
            b["brokerName"]: b["brokerAddrs"][MASTER_ID]
            for b in route.get("brokerDatas", [])
            if MASTER_ID in b.get("brokerAddrs", {})
        }
        out = [
            (q["brokerName"], masters[q["brokerName"]])
            for q in route.get("queueDatas", [])
            if q["brokerName"] in masters
        ]
        if not out:
            raise NoRouteError(f"No route info of this topic: {topic} (no master serves it)")
        return sorted(out)

    def cluster_list(self) -> list[dict[str, Any]]:
        """Every registered broker address: ``cluster``, ``brokerName``, ``brokerId``,
        ``address`` and ``status`` (its runtime info), or ``error`` when it does not
        answer."""
        info = self.cluster_info()
        cluster_of = {
            name: cluster
            for cluster, names in info.get("clusterAddrTable", {}).items()
            for name in names
        }
        out = []
        for name, data in sorted(info.get("brokerAddrTable", {}).items()):
            for broker_id, addr in sorted(data.get("brokerAddrs", {}).items(), key=_id_order):
                entry: dict[str, Any] = {
                    "cluster": cluster_of.get(name, data.get("cluster", "")),
                    "brokerName": name,
                    "brokerId": int(broker_id),
                    "address": addr,
                }
                try:
                    entry["status"] = self._runtime_stats((name, addr))
                except RemotingError as exc:
                    entry["status"], entry["error"] = None, str(exc)
                out.append(entry)
        return out

    def ha_status(self) -> list[dict[str, Any]]:
        """Every registered broker's replication state (``GET_BROKER_HA_STATUS``): a
        master's slaves with their acked offset and lag, a slave's master; ``error`` for a
        broker that does not answer."""
        out = []
        for entry in self.cluster_list():
            name, addr = entry["brokerName"], entry["address"]
            try:
                status = self._call((name, addr), RequestCode.GET_BROKER_HA_STATUS)[1]
            except RemotingError as exc:
                status = {"brokerName": name, "brokerId": entry["brokerId"], "error": str(exc)}
            out.append({"address": addr, **status})
        return out

    def broker_status(self, broker: str) -> dict[str, Any]:
        """A broker's runtime info (``shmq status``'s numbers), by name or address."""
        return self._runtime_stats(self._broker(broker))

    def _runtime_stats(self, broker: tuple[str, str]) -> dict[str, Any]:
        """shmq's numbers from the broker's runtime info ``KVTable``."""
        body = self._call(broker, RequestCode.GET_BROKER_RUNTIME_INFO)[1]
        try:
            return runtime_stats(body)
        except ValueError as exc:
            raise ClientError(f"broker {broker[0]} ({broker[1]}): {exc}") from None

    # -- topics ---------------------------------------------------------------------------------

    def update_topic(
        self,
        topic: str,
        *,
        read_queue_nums: int = 8,
        write_queue_nums: int = 8,
        perm: int = 6,
        broker: str | None = None,
        cluster: str | None = None,
    ) -> list[str]:
        """Create or change ``topic`` on ``broker``, or on every broker of ``cluster``;
        the names of the brokers changed. Each broker registers the change with the
        namesrv before it answers."""
        fields_ = {
            "topic": topic,
            "readQueueNums": read_queue_nums,
            "writeQueueNums": write_queue_nums,
            "perm": perm,
        }
        targets = self._targets(broker, cluster)
        for target in targets:
            self._call(target, RequestCode.UPDATE_AND_CREATE_TOPIC, fields_)
        return [name for name, _ in targets]

    def delete_topic(self, topic: str, cluster: str | None = None) -> list[str]:
        """Delete ``topic`` from the brokers of ``cluster`` (default: those serving it),
        with its stored messages and its groups' offsets there, and from every namesrv;
        the names of the brokers that had it. Created again, the topic starts empty, its
        queue offsets past every old one (see the README).

        The namesrvs go first: a broker that creates the topic again meanwhile (a
        producer's auto-create) registers it after that, and its new route stays."""
        if is_system_topic(topic):
            raise ResponseError(Rc.SYSTEM_ERROR, system_topic_refusal(topic))
        targets = self._masters(cluster) if cluster is not None else self._topic_brokers(topic)
        failed = []
        for addr in self.namesrv_addrs:
            try:
                self.client.invoke_json(addr, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic})
            except RemotingError as exc:
                failed.append(exc)
        if len(failed) == len(self.namesrv_addrs):
            raise RemotingConnectError(
                f"no namesrv of {';'.join(self.namesrv_addrs)} took the deletion of topic "
                f"{topic}, so no broker was asked: {failed[-1]}"
            )
        deleted = []
        for target in targets:
            try:
                self._call(target, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})
                deleted.append(target[0])
            except ResponseError as exc:
                if exc.code != Rc.TOPIC_NOT_EXIST:
                    raise
        if not deleted:
            where = f"cluster {cluster}" if cluster is not None else "its brokers"
            raise ResponseError(Rc.TOPIC_NOT_EXIST, f"topic {topic} does not exist on {where}")
        return deleted

    def topic_list(self) -> list[str]:
        """Every topic the namesrv routes (system topics included), sorted."""
        body = self._namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER) or {}
        return sorted(body.get("topicList", []))

    def topic_route(self, topic: str) -> dict[str, Any]:
        """The namesrv's ``TopicRouteData``: ``queueDatas`` (per broker: queue counts,
        perm) and ``brokerDatas`` (per broker: cluster and addresses by id)."""
        try:
            return self._namesrv(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        except ResponseError as exc:
            if exc.code == Rc.TOPIC_NOT_EXIST:
                raise NoRouteError(
                    f"No route info of this topic: {topic} (namesrv {';'.join(self.namesrv_addrs)})"
                ) from None
            raise

    def topic_status(self, topic: str) -> list[QueueStatus]:
        """Min and max offset and last store time of every queue of ``topic``, sorted by
        broker and queue."""
        out = []
        for target in self._topic_brokers(topic):
            body = self._call(target, RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic})[1]
            out += [
                QueueStatus(
                    e["topic"],
                    e["brokerName"],
                    e["queueId"],
                    e["minOffset"],
                    e["maxOffset"],
                    e["lastUpdateTimestamp"],
                )
                for e in queue_entries(body["offsetTable"])
            ]
        return sorted(out, key=lambda q: (q.broker_name, q.queue_id))

    def topic_consume_by_who(self, topic: str) -> list[str]:
        """The groups that have offsets on ``topic`` or online members subscribing it."""
        groups: set[str] = set()
        for target in self._topic_brokers(topic):
            body = self._call(target, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic})[1]
            groups |= set(body.get("groupList", []))
        return sorted(groups)

    # -- consumers ------------------------------------------------------------------------------

    def consumer_progress(self, group: str, topic: str | None = None) -> ConsumerProgress:
        """Per queue: broker offset, committed offset and lag, over every broker (of
        ``topic``'s route when given). ``ClientError`` when the group has no offsets."""
        targets = self._topic_brokers(topic) if topic is not None else self._masters()
        fields_ = {"consumerGroup": group, "topic": topic}
        queues = []
        tps = 0.0
        for target in targets:
            body = self._call(target, RequestCode.GET_CONSUME_STATS, fields_)[1]
            tps += float(body.get("consumeTps", 0.0))
            queues += [QueueProgress.from_entry(e) for e in queue_entries(body["offsetTable"])]
        if not queues:
            on = f" on topic {topic}" if topic is not None else ""
            raise ClientError(
                f"no consume stats of group {group}{on}: it has committed no offset"
                " (maybe it consumed nothing yet)"
            )
        queues.sort(key=lambda q: (q.topic, q.broker_name, q.queue_id))
        return ConsumerProgress(group, tuple(queues), tps, self._dlq_messages(group))

    def _dlq_messages(self, group: str) -> int:
        """Messages in the group's dead-letter queue (0 without one)."""
        try:
            return sum(q.max_offset - q.min_offset for q in self.topic_status(dlq_topic(group)))
        except NoRouteError:
            return 0

    def query_dlq(self, group: str, max_num: int = DEFAULT_QUERY_NUM) -> list[dict[str, Any]]:
        """What is in the group's dead-letter queue, and why (``dlq.query_dlq``)."""
        return dlq.query_dlq(self, group, max_num)

    def resend_dlq(self, group: str, msg_id: str | None = None) -> list[dict[str, Any]]:
        """Send DLQ messages (one, or all) back to their original topic
        (``dlq.resend_dlq``)."""
        return dlq.resend_dlq(self, group, msg_id)

    def trans_status(
        self, group: str | None = None, broker: str | None = None, cluster: str | None = None
    ) -> list[dict[str, Any]]:
        """Half messages pending per producer group (``transaction_status.trans_status``)."""
        return transaction_status.trans_status(self._call, self._targets(broker, cluster), group)

    def resume_check_half_message(self, msg_id: str) -> str:
        """Check a discarded half message again (``transaction_status``); its offset id."""
        return transaction_status.resume_check_half_message(self, msg_id)

    def _connections(self, group: str) -> list[tuple[tuple[str, str], dict[str, Any]]]:
        """``(broker, ConsumerConnection)`` of each master where ``group`` has members."""
        found = []
        for target in self._masters():
            try:
                body = self._call(
                    target, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group}
                )[1]
            except ResponseError as exc:
                if exc.code == Rc.CONSUMER_NOT_ONLINE:
                    continue
                raise
            found.append((target, body))
        return found

    def consumer_connection(self, group: str) -> dict[str, Any]:
        """The group's online members over every broker (RocketMQ's
        ``ConsumerConnection``: ``connectionSet``, ``subscriptionTable``, ``consumeType``,
        ``messageModel``, ``consumeFromWhere``). ``ResponseError`` CONSUMER_NOT_ONLINE when
        none is online."""
        merged: dict[str, Any] | None = None
        clients: dict[str, dict[str, Any]] = {}
        for _, body in self._connections(group):
            if merged is None:
                merged = {**body, "subscriptionTable": {}}
            merged["subscriptionTable"].update(body.get("subscriptionTable", {}))
            for conn in body.get("connectionSet", []):
                clients.setdefault(conn["clientId"], conn)
        if merged is None:
            raise ResponseError(
                Rc.CONSUMER_NOT_ONLINE, f"the consumer group {group} is not online on any broker"
            )
        merged["connectionSet"] = [clients[c] for c in sorted(clients)]
        return merged

    def producer_connection(self, group: str) -> dict[str, Any]:
        """The group's producers over every master (RocketMQ's ``ProducerConnection``:
        ``connectionSet``, one per client id); ``ResponseError`` when no broker has one."""
        clients: dict[str, dict[str, Any]] = {}
        for target in self._masters():
            try:
                body = self._call(target, RequestCode.GET_PRODUCER_CONNECTION_LIST,
                                  {"producerGroup": group})[1]  # fmt: skip
            except ResponseError as exc:
                if exc.code == Rc.SYSTEM_ERROR:  # the group is not on this broker
                    continue
                raise
            for conn in body.get("connectionSet", []):
                clients.setdefault(conn["clientId"], conn)
        if not clients:
            raise ResponseError(Rc.SYSTEM_ERROR, f"the producer group[{group}] not exist")
        return {"connectionSet": [clients[c] for c in sorted(clients)]}

    def consumer_status(
        self, group: str, client_id: str | None = None, jstack: bool = False
    ) -> dict[str, dict[str, Any]]:
        """Each online member's ``ConsumerRunningInfo`` (``mqadmin consumerStatus``), asked
        through a broker it heartbeats to, by client id (only ``client_id``'s, if given):
        ``properties``, ``subscriptionSet``, ``mqTable`` (one dict per held queue, with
        ``topic``, ``brokerName``, ``queueId`` and RocketMQ's ``ProcessQueueInfo``
        fields), ``statusTable``, ``userConsumerInfo`` and, with ``jstack``, a thread dump.
        ``ResponseError`` CONSUMER_NOT_ONLINE when the group (or that member) is not
        online; CONSUME_MSG_TIMEOUT when a member does not answer in time."""
        where: dict[str, tuple[str, str]] = {}
        for target, body in self._connections(group):
            for conn in body.get("connectionSet", []):
                where.setdefault(conn["clientId"], target)
        if client_id is not None:
            where = {c: t for c, t in where.items() if c == client_id}
        if not where:
            who = f"consumer {client_id} of group {group}" if client_id else f"group {group}"
            raise ResponseError(Rc.CONSUMER_NOT_ONLINE, f"the {who} is not online on any broker")
        out = {}
        for cid, target in sorted(where.items()):
            fields = {"consumerGroup": group, "clientId": cid, "jstackEnable": jstack}
            info = self._call(target, RequestCode.GET_CONSUMER_RUNNING_INFO, fields,
                              timeout=RUNNING_INFO_TIMEOUT_S)[1]  # fmt: skip
            out[cid] = {**info, "mqTable": queue_entries(info.get("mqTable", {}))}
        return out

    # -- subscription groups --------------------------------------------------------------------

    def _sub_groups(self, target: tuple[str, str]) -> dict[str, dict[str, Any]]:
        body = self._call(target, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)[1]
        return body.get("subscriptionGroupTable", {})

    def update_sub_group(
        self,
        group: str,
        *,
        broker: str | None = None,
        cluster: str | None = None,
        **settings: Any,
    ) -> dict[str, dict[str, Any]]:
        """Create ``group``'s subscription group, or change the given ``settings``
        (``consume_enable``, ``consume_from_min_enable``, ``consume_broadcast_enable``,
        ``retry_queue_nums``, ``retry_max_times``, ``broker_id``,
        ``which_broker_when_consume_slowly``, ``notify_consumer_ids_changed_enable``) on
        ``broker`` or every broker of ``cluster``. Returns broker name → the config."""
        unknown = sorted(set(settings) - set(SUB_GROUP_SETTINGS))
        if unknown:
            raise ConfigError(
                f"unknown subscription group setting(s) {', '.join(unknown)};"
                f" known: {', '.join(SUB_GROUP_SETTINGS)}"
            )
        changes = {SUB_GROUP_SETTINGS[k]: v for k, v in settings.items() if v is not None}
        out = {}
        for target in self._targets(broker, cluster):
            config = {
                **self._sub_groups(target).get(group, {"groupName": group}),
                **changes,
            }
            self._call(target, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=config)
            out[target[0]] = self._sub_groups(target).get(group, config)
        return out

    def examine_sub_group(
        self, group: str, *, broker: str | None = None, cluster: str | None = None
    ) -> dict[str, dict[str, Any]]:
        """Broker name → ``group``'s subscription group config, where it exists."""
        out = {}
        for target in self._targets(broker, cluster):
            config = self._sub_groups(target).get(group)
            if config is not None:
                out[target[0]] = config
        if not out:
            raise ResponseError(
                Rc.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group {group} does not exist"
            )
        return out

    def delete_sub_group(
        self,
        group: str,
        *,
        broker: str | None = None,
        cluster: str | None = None,
        remove_offset: bool = False,
    ) -> list[str]:
        """Delete ``group``'s subscription group (and with ``remove_offset`` its committed
        offsets) on ``broker`` or every broker of ``cluster``; the brokers that had it.
        Without ``broker``, the group's retry and dead-letter topics are deleted as well,
        with their messages, as mqadmin's ``deleteSubGroup -c`` does."""
        deleted = []
        fields_ = {"groupName": group, "removeOffset": remove_offset}
        for target in self._targets(broker, cluster):
            try:
                self._call(target, RequestCode.DELETE_SUBSCRIPTIONGROUP, fields_)
                deleted.append(target[0])
            except ResponseError as exc:
                if exc.code != Rc.SUBSCRIPTION_GROUP_NOT_EXIST:
                    raise
        if not deleted:
            raise ResponseError(
                Rc.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group {group} does not exist"
            )
        if broker is None:
            for topic in (retry_topic(group), dlq_topic(group)):
                try:
                    self.delete_topic(topic, cluster)
                except NoRouteError:
                    continue  # no broker has it
                except ResponseError as exc:
                    if exc.code != Rc.TOPIC_NOT_EXIST:
                        raise
        return deleted


def _id_order(item: tuple[str, str]) -> int:
    return int(item[0])
