"""Topics as mqadmin's ``updateTopic``, ``updateTopicPerm``, ``deleteTopic``, ``topicList``,
``topicStatus``, ``topicClusterList``, ``topicConsumeByWho`` and ``allocateMQ`` see them:
created and changed on brokers, deleted from the namesrvs and the brokers, listed, their
queues' offsets and clusters, and how a group's consumers would share their queues.
``Admin`` documents each call."""

from __future__ import annotations

from typing import Any

from shmq.client.admin.remote import Remote
from shmq.client.admin.types import QueueStatus
from shmq.client.consumer.allocate import AllocateAveragely
from shmq.client.types import MessageQueue
from shmq.errors import ClientError, RemotingConnectError, RemotingError, ResponseError
from shmq.names import is_system_topic, system_topic_refusal
from shmq.remoting.admin_bodies import queue_entries
from shmq.remoting.protocol import RequestCode, ResponseCode

PERM_READ = 4
ALLOCATE_GROUP = "aa"  # the group name allocateMQ hands the strategy


def subscribe_queues(topic: str, route: dict[str, Any]) -> list[MessageQueue]:
    """The queues a consumer of ``topic`` reads, sorted (RocketMQ's
    ``topicRouteData2TopicSubscribeInfo``): ``readQueueNums`` of each readable broker."""
    return sorted(
        MessageQueue(topic, q["brokerName"], i)
        for q in route.get("queueDatas", [])
        if q["perm"] & PERM_READ
        for i in range(q["readQueueNums"])
    )


class Topics:
    """Topic configs, routes and queue offsets."""

    def __init__(self, remote: Remote) -> None:
        self._remote = remote

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
        fields = {
            "topic": topic,
            "readQueueNums": read_queue_nums,
            "writeQueueNums": write_queue_nums,
            "perm": perm,
        }
        targets = self._remote.targets(broker, cluster)
        for target in targets:
            self._remote.call(target, RequestCode.UPDATE_AND_CREATE_TOPIC, fields)
        return [name for name, _ in targets]

    def update_topic_perm(
        self, topic: str, perm: int, broker: str | None = None, cluster: str | None = None
    ) -> list[dict[str, Any]]:
        route = {q["brokerName"]: q for q in self._remote.topic_route(topic).get("queueDatas", [])}
        targets = self._remote.targets(broker, cluster)
        serving = [(name, addr) for name, addr in targets if name in route]
        if not serving:
            where = ", ".join(name for name, _ in targets)
            raise ClientError(
                f"topic {topic} is not on {where} (it is on {', '.join(sorted(route))})"
            )
        rows = []
        for name, addr in serving:
            queues = route[name]
            row = {"brokerName": name, "brokerAddr": addr, "oldPerm": queues["perm"],
                   "perm": perm, "readQueueNums": queues["readQueueNums"],
                   "writeQueueNums": queues["writeQueueNums"],
                   "changed": queues["perm"] != perm}  # fmt: skip
            if row["changed"]:  # the broker's queue counts stay as they are
                fields = {"topic": topic, "readQueueNums": queues["readQueueNums"],
                          "writeQueueNums": queues["writeQueueNums"], "perm": perm}  # fmt: skip
                self._remote.call((name, addr), RequestCode.UPDATE_AND_CREATE_TOPIC, fields)
            rows.append(row)
        return rows

    def topic_cluster_list(self, topic: str) -> list[str]:
        route = self._remote.topic_route(topic)
        serving = {q["brokerName"] for q in route.get("queueDatas", [])}
        clusters = self._remote.cluster_info().get("clusterAddrTable", {})
        return sorted(c for c, names in clusters.items() if serving & set(names))

    def allocate_mq(self, topic: str, client_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
        queues = subscribe_queues(topic, self._remote.topic_route(topic))
        strategy = AllocateAveragely()
        return {
            cid: [{"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id}
                  for mq in strategy.allocate(ALLOCATE_GROUP, cid, queues, client_ids)]
            for cid in client_ids
        }  # fmt: skip

    def delete_topic(self, topic: str, cluster: str | None = None) -> list[str]:
        # The namesrvs go first: a broker that creates the topic again meanwhile (a
        # producer's auto-create) registers it after that, and its new route stays.
        if is_system_topic(topic):
            raise ResponseError(ResponseCode.SYSTEM_ERROR, system_topic_refusal(topic))
        remote = self._remote
        targets = remote.masters(cluster) if cluster is not None else remote.topic_brokers(topic)
        failed = []
        for addr in remote.namesrv_addrs:
            try:
                remote.ask(addr, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic})
            except RemotingError as exc:
                failed.append(exc)
        if len(failed) == len(remote.namesrv_addrs):
            raise RemotingConnectError(
                f"no namesrv of {remote.namesrvs} took the deletion of topic {topic}, so no"
                f" broker was asked: {failed[-1]}"
            )
        deleted = []
        for target in targets:
            try:
                remote.call(target, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})
                deleted.append(target[0])
            except ResponseError as exc:
                if exc.code != ResponseCode.TOPIC_NOT_EXIST:
                    raise
        if not deleted:
            where = f"cluster {cluster}" if cluster is not None else "its brokers"
            raise ResponseError(
                ResponseCode.TOPIC_NOT_EXIST, f"topic {topic} does not exist on {where}"
            )
        return deleted

    def topic_list(self) -> list[str]:
        response = self._remote.first_namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        return sorted((response.json_body() or {}).get("topicList", []))

    def topic_status(self, topic: str) -> list[QueueStatus]:
        out = []
        for target in self._remote.topic_brokers(topic):
            body = self._remote.call(target, RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic})[1]
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
        groups: set[str] = set()
        for target in self._remote.topic_brokers(topic):
            body = self._remote.call(
                target, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic}
            )[1]
            groups |= set(body.get("groupList", []))
        return sorted(groups)
