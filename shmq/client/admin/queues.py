"""A queue's consume-queue units and a group's consume time span (mqadmin ``queryCq``,
RocketMQ's ``queryConsumeTimeSpan``), and the brokers' own topics and files: their system
topics, ``cleanUnusedTopic``, ``cleanExpiredCQ`` and ``deleteExpiredCommitLog``. ``Admin``
documents each call."""

from __future__ import annotations

from typing import Any

from shmq.client.admin.remote import Remote
from shmq.client.types import MessageQueue
from shmq.errors import ClientError
from shmq.remoting.protocol import RequestCode


class QueueQueries:
    """Consume-queue inspection and the brokers' clean-ups."""

    def __init__(self, remote: Remote) -> None:
        self._remote = remote

    def query_consume_queue(
        self,
        topic: str,
        queue_id: int,
        index: int,
        count: int = 10,
        group: str | None = None,
        broker: str | None = None,
    ) -> dict[str, Any]:
        if broker is not None:
            target = self._remote.broker(broker)
        else:
            targets = sorted(set(self._remote.topic_brokers(topic)))
            if len(targets) > 1:
                names = ", ".join(name for name, _ in targets)
                raise ClientError(f"topic {topic} is on several brokers ({names}): name one")
            target = targets[0]
        fields: dict[str, Any] = {"topic": topic, "queueId": queue_id, "index": index,
                                  "count": count}  # fmt: skip
        if group is not None:
            fields["consumerGroup"] = group
        response, body = self._remote.call(target, RequestCode.QUERY_CONSUME_QUEUE, fields)
        if response.remark:
            body["remark"] = response.remark
        return body

    def consume_time_span(self, topic: str, group: str) -> list[dict[str, Any]]:
        rows = []
        for target in self._remote.topic_brokers(topic):
            body = self._remote.call(target, RequestCode.QUERY_CONSUME_TIME_SPAN,
                                     {"topic": topic, "group": group})[1]  # fmt: skip
            for span in body.get("consumeTimeSpanSet", []):
                mq = span["messageQueue"]
                rows.append({
                    "message_queue": MessageQueue(mq["topic"], mq["brokerName"], mq["queueId"]),
                    "min_timestamp": span["minTimeStamp"],
                    "max_timestamp": span["maxTimeStamp"],
                    "consume_timestamp": span["consumeTimeStamp"],
                    "delay_ms": span["delayTime"],
                })  # fmt: skip
        return sorted(rows, key=lambda r: r["message_queue"])

    def system_topics(self, broker: str | None = None, cluster: str | None = None) -> list[str]:
        topics: set[str] = set()
        for target in self._remote.targets(broker, cluster):
            body = self._remote.call(target, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)[1]
            topics.update(body.get("topicList", []))
        return sorted(topics)

    def clean_unused_topic(
        self, broker: str | None = None, cluster: str | None = None
    ) -> dict[str, list[str]]:
        return self._purge(RequestCode.CLEAN_UNUSED_TOPIC, broker, cluster)

    def clean_expired_consume_queue(
        self, broker: str | None = None, cluster: str | None = None
    ) -> dict[str, list[str]]:
        return self._purge(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE, broker, cluster)

    def delete_expired_commitlog(
        self, broker: str | None = None, cluster: str | None = None
    ) -> list[str]:
        targets = self._remote.targets(broker, cluster)
        for target in targets:
            self._remote.call(target, RequestCode.DELETE_EXPIRED_COMMITLOG)
        return [name for name, _ in targets]

    def _purge(self, code: int, broker: str | None, cluster: str | None) -> dict[str, list[str]]:
        purged = {}
        for target in self._remote.targets(broker, cluster):
            body = self._remote.call(target, code)[1] or {}
            purged[target[0]] = list(body.get("topics", []))
        return purged
