"""A consumer group's offsets across brokers, as mqadmin sees them: its progress and lag
(``consumerProgress``), moving them (``resetOffsetByTime``), what the members hold
(``getConsumerStatus``), copying them (``cloneGroupOffset``) and every group's of a broker at
once (``brokerConsumeStats``). ``Admin`` documents each call."""

from __future__ import annotations

from typing import Any

from shmq.client.admin.remote import Remote
from shmq.client.admin.topics import Topics
from shmq.client.admin.types import ConsumerProgress, QueueProgress
from shmq.client.types import MessageQueue
from shmq.errors import ClientError, NoRouteError, ResponseError
from shmq.names import dlq_topic
from shmq.remoting.admin_bodies import queue_entries, queue_items
from shmq.remoting.protocol import RequestCode, ResponseCode


class GroupOffsets:
    """Progress, moves, copies and broker-wide consume stats of groups' offsets; ``topics``
    counts what waits in a group's dead-letter queue."""

    def __init__(self, remote: Remote, topics: Topics) -> None:
        self._remote = remote
        self._topics = topics

    def consumer_progress(self, group: str, topic: str | None = None) -> ConsumerProgress:
        remote = self._remote
        targets = remote.topic_brokers(topic) if topic is not None else remote.masters()
        fields = {"consumerGroup": group, "topic": topic}
        queues = []
        tps = 0.0
        for target in targets:
            body = remote.call(target, RequestCode.GET_CONSUME_STATS, fields)[1]
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
            status = self._topics.topic_status(dlq_topic(group))
        except NoRouteError:
            return 0
        return sum(q.max_offset - q.min_offset for q in status)

    def reset_offset(
        self, group: str, topic: str, timestamp_ms: int, force: bool = True,
        cluster: str | None = None,
    ) -> dict[MessageQueue, int]:  # fmt: skip
        table: dict[MessageQueue, int] = {}
        fields = {"topic": topic, "group": group, "timestamp": timestamp_ms, "isForce": force}
        unknown: ResponseError | None = None
        targets = self._remote.topic_brokers(topic)
        if cluster is not None:
            members = {name for name, _ in self._remote.masters(cluster)}
            targets = [t for t in targets if t[0] in members]
            if not targets:
                raise ClientError(f"no broker of cluster {cluster} serves topic {topic}")
        for target in targets:
            try:
                body = self._remote.call(target, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                                         fields)[1]  # fmt: skip
            except ResponseError as exc:
                if exc.code != ResponseCode.CONSUMER_NOT_ONLINE:
                    raise
                unknown = exc  # the group never consumed there: nothing to move
                continue
            for t, b, q, offset in queue_items(body["offsetTable"]):
                table[MessageQueue(t, b, q)] = int(offset)
        if not table and unknown is not None:
            raise unknown
        return dict(sorted(table.items()))

    def consumer_offsets(
        self, group: str, topic: str, client_id: str | None = None
    ) -> dict[str, dict[MessageQueue, int]]:
        fields = {"topic": topic, "group": group}
        if client_id is not None:
            fields["clientAddr"] = client_id
        out: dict[str, dict[MessageQueue, int]] = {}
        for target in self._remote.topic_brokers(topic):
            body = self._remote.call(target, RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
                                     fields)[1]  # fmt: skip
            for member, table in body.get("consumerTable", {}).items():
                queues = out.setdefault(member, {})
                for t, b, q, offset in queue_items(table):
                    queues[MessageQueue(t, b, q)] = int(offset)
        return {member: dict(sorted(table.items())) for member, table in sorted(out.items())}

    def clone_group_offset(
        self, src_group: str, dest_group: str, topic: str, offline: bool = False
    ) -> list[str]:
        fields = {"srcGroup": src_group, "destGroup": dest_group, "topic": topic,
                  "offline": offline}  # fmt: skip
        targets = self._remote.topic_brokers(topic)
        for target in targets:
            self._remote.call(target, RequestCode.CLONE_GROUP_OFFSET, fields)
        return [name for name, _ in targets]

    def broker_consume_stats(
        self, broker: str | None = None, cluster: str | None = None, order_only: bool = False
    ) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for target in self._remote.targets(broker, cluster):
            body = self._remote.call(target, RequestCode.GET_BROKER_CONSUME_STATS,
                                     {"isOrder": order_only})[1]  # fmt: skip
            groups: dict[str, list[QueueProgress]] = {}
            for entry in body["consumeStatsList"]:
                for group, stats in entry.items():
                    queues = groups.setdefault(group, [])
                    for topic_stats in stats:
                        queues += [QueueProgress.from_entry(e)
                                   for e in queue_entries(topic_stats["offsetTable"])]  # fmt: skip
            out[target[0]] = {"brokerAddr": body["brokerAddr"], "totalDiff": body["totalDiff"],
                              "groups": groups}  # fmt: skip
        return out
