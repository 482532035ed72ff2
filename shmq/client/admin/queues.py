"""A queue's consume-queue units and a group's consume time span, the part of ``Admin``
behind mqadmin ``queryCq`` and ``queryConsumeTimeSpan``, the brokers' system topics,
``cleanUnusedTopic``, ``cleanExpiredCQ`` and ``deleteExpiredCommitLog``: a mixin over
``Admin``'s ``_call``, ``_broker``, ``_targets`` and ``_topic_brokers``."""

from __future__ import annotations

from typing import Any

from shmq.client.types import MessageQueue
from shmq.errors import ClientError
from shmq.remoting.protocol import RequestCode


class QueueQueries:
    """Consume-queue inspection (needs ``Admin``'s helpers)."""

    _call: Any
    _broker: Any
    _targets: Any
    _topic_brokers: Any

    def query_consume_queue(
        self,
        topic: str,
        queue_id: int,
        index: int,
        count: int = 10,
        group: str | None = None,
        broker: str | None = None,
    ) -> dict[str, Any]:
        """Up to ``count`` consume-queue units of ``topic``'s queue ``queue_id`` from queue
        offset ``index``: RocketMQ's ``QueryConsumeQueueResponseBody``, ``{"minQueueIndex",
        "maxQueueIndex", "queueData": [{"physicOffset", "physicSize", "tagsCode", "eval",
        …}]}``, with ``subscriptionData`` and ``filterData`` when ``group`` is given
        (``eval``: the group's tag filter takes the unit), and ``remark`` when ``index``
        lies outside the queue (no units then). ``broker`` (a name or an address) may be
        left out when a single broker serves the topic."""
        if broker is not None:
            target = self._broker(broker)
        else:
            targets = sorted(set(self._topic_brokers(topic)))
            if len(targets) > 1:
                names = ", ".join(name for name, _ in targets)
                raise ClientError(f"topic {topic} is on several brokers ({names}): name one")
            target = targets[0]
        fields_: dict[str, Any] = {"topic": topic, "queueId": queue_id, "index": index,
                                   "count": count}  # fmt: skip
        if group is not None:
            fields_["consumerGroup"] = group
        response, body = self._call(target, RequestCode.QUERY_CONSUME_QUEUE, fields_)
        if response.remark:
            body["remark"] = response.remark
        return body

    def consume_time_span(self, topic: str, group: str) -> list[dict[str, Any]]:
        """Per queue of ``topic`` on every broker serving it, sorted: ``message_queue``,
        the store times (ms) of its first and last message (``min_timestamp``,
        ``max_timestamp``) and of the last one ``group`` consumed (``consume_timestamp``),
        and ``delay_ms``, how long ago the next one to consume was stored (0 when the
        group is at the end). -1: no such message."""
        rows = []
        for target in self._topic_brokers(topic):
            body = self._call(target, RequestCode.QUERY_CONSUME_TIME_SPAN,
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
        """The system topics of ``broker`` (default: every master of ``cluster``, or of the
        only cluster): RocketMQ's set plus each broker's cluster and broker names."""
        topics: set[str] = set()
        for target in self._targets(broker, cluster):
            body = self._call(target, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)[1]
            topics.update(body.get("topicList", []))
        return sorted(topics)

    def clean_unused_topic(
        self, broker: str | None = None, cluster: str | None = None
    ) -> dict[str, list[str]]:
        """Purge, on ``broker`` (default: every master of ``cluster``, or of the only
        cluster), the stored messages of topics that have no topic config there (mqadmin
        ``cleanUnusedTopic``): broker name → the topics purged."""
        return self._purge(RequestCode.CLEAN_UNUSED_TOPIC, broker, cluster)

    def clean_expired_consume_queue(
        self, broker: str | None = None, cluster: str | None = None
    ) -> dict[str, list[str]]:
        """Purge, on ``broker`` (as ``clean_unused_topic``), the consume queues of topics
        without a topic config there whose messages all expired (mqadmin
        ``cleanExpiredCQ``): broker name → the topics purged."""
        return self._purge(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE, broker, cluster)

    def delete_expired_commitlog(
        self, broker: str | None = None, cluster: str | None = None
    ) -> list[str]:
        """Have ``broker`` (as ``clean_unused_topic``) delete its expired CommitLog files now
        and for its next cleanup rounds, whatever ``deleteWhen`` says (RocketMQ 5's mqadmin
        ``deleteExpiredCommitLog``): the brokers asked. Files newer than
        ``fileReservedTime`` stay."""
        targets = self._targets(broker, cluster)
        for target in targets:
            self._call(target, RequestCode.DELETE_EXPIRED_COMMITLOG)
        return [name for name, _ in targets]

    def _purge(self, code: int, broker: str | None, cluster: str | None) -> dict[str, list[str]]:
        purged = {}
        for target in self._targets(broker, cluster):
            body = self._call(target, code)[1] or {}
            purged[target[0]] = list(body.get("topics", []))
        return purged
