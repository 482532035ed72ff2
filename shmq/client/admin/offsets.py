"""A consumer group's offsets across brokers, the part of ``Admin`` that moves them
(mqadmin ``resetOffsetByTime``), copies them (``cloneGroupOffset``), reads them for every
group of a broker at once (``brokerConsumeStats``) and asks the members what they hold
(``getConsumerStatus``): a mixin over ``Admin``'s ``_call``, ``_topic_brokers`` and
``_targets``."""

from __future__ import annotations

from typing import Any

from shmq.client.admin.types import QueueProgress
from shmq.client.types import MessageQueue
from shmq.errors import ResponseError
from shmq.remoting.admin_bodies import queue_entries, queue_items
from shmq.remoting.protocol import RequestCode, ResponseCode

Rc = ResponseCode


class GroupOffsets:
    """Offset moves, copies and broker-wide consume stats (needs ``Admin``'s helpers)."""

    _call: Any
    _targets: Any
    _topic_brokers: Any

    def reset_offset(
        self, group: str, topic: str, timestamp_ms: int, force: bool = True
    ) -> dict[MessageQueue, int]:
        """Move ``group``'s offsets on ``topic`` to the first message stored at or after
        ``timestamp_ms`` (-1: the end of each queue); without ``force`` only queues whose
        committed offset is beyond that move. The brokers commit the offsets and tell the
        group's online consumers. Returns the resulting offset of every queue (of the
        brokers where the group has offsets or members; ``ResponseError``
        CONSUMER_NOT_ONLINE when it has them nowhere)."""
        table: dict[MessageQueue, int] = {}
        fields_ = {"topic": topic, "group": group, "timestamp": timestamp_ms, "isForce": force}
        unknown: ResponseError | None = None
        for target in self._topic_brokers(topic):
            try:
                body = self._call(target, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields_)[1]
            except ResponseError as exc:
                if exc.code != Rc.CONSUMER_NOT_ONLINE:
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
        """What each online member of ``group`` (only ``client_id`` when given) holds as
        its offsets on ``topic``, by client id (mqadmin ``getConsumerStatus``): asked
        through every broker of the topic's route, merged. ``ResponseError`` SYSTEM_ERROR
        when no member is online."""
        fields_ = {"topic": topic, "group": group}
        if client_id is not None:
            fields_["clientAddr"] = client_id
        out: dict[str, dict[MessageQueue, int]] = {}
        for target in self._topic_brokers(topic):
            body = self._call(target, RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
                              fields_)[1]  # fmt: skip
            for member, table in body.get("consumerTable", {}).items():
                queues = out.setdefault(member, {})
                for t, b, q, offset in queue_items(table):
                    queues[MessageQueue(t, b, q)] = int(offset)
        return {member: dict(sorted(table.items())) for member, table in sorted(out.items())}

    def clone_group_offset(
        self, src_group: str, dest_group: str, topic: str, offline: bool = False
    ) -> list[str]:
        """Give ``dest_group`` a copy of ``src_group``'s committed offsets on ``topic`` on
        every broker of its route (mqadmin ``cloneGroupOffset``); unless ``offline``, a
        broker where ``src_group`` is online but does not subscribe to ``topic`` keeps
        ``dest_group``'s. Returns the broker names asked."""
        fields_ = {"srcGroup": src_group, "destGroup": dest_group, "topic": topic,
                   "offline": offline}  # fmt: skip
        targets = self._topic_brokers(topic)
        for target in targets:
            self._call(target, RequestCode.CLONE_GROUP_OFFSET, fields_)
        return [name for name, _ in targets]

    def broker_consume_stats(
        self, broker: str | None = None, cluster: str | None = None, order_only: bool = False
    ) -> dict[str, dict[str, Any]]:
        """Every subscription group's progress on each master (mqadmin
        ``brokerConsumeStats``): by broker name, ``{"brokerAddr", "totalDiff", "groups":
        {group: [QueueProgress]}}`` (a group with no offsets there has none); with
        ``order_only``, ordered topics only."""
        out: dict[str, dict[str, Any]] = {}
        for target in self._targets(broker, cluster):
            body = self._call(target, RequestCode.GET_BROKER_CONSUME_STATS,
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
