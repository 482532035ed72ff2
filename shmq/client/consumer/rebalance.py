"""Which queues this consumer reads, and where it starts in each (RocketMQ's
``RebalanceImpl``).

Every member of a group computes its own share from the same two lists, the topic's queues
and the group's live client ids, with the group's allocation strategy, so the shares never
overlap as long as the members agree on the lists. Broadcasting takes every queue.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime

from shmq.client.consumer.allocate import AllocateMessageQueueStrategy
from shmq.client.consumer.offset_store import OffsetStore
from shmq.client.instance import ClientInstance
from shmq.client.types import ConsumeFromWhere, MessageModel, MessageQueue
from shmq.errors import ConfigError, NoRouteError
from shmq.names import RETRY_GROUP_TOPIC_PREFIX

log = logging.getLogger(__name__)

TIMESTAMP_FORMAT = "%Y%m%d%H%M%S"  # RocketMQ's consumeTimestamp: yyyyMMddHHmmss


def default_consume_timestamp() -> str:
    """Half an hour ago, as RocketMQ's default ``consumeTimestamp``."""
    return datetime.fromtimestamp(time.time() - 1800).strftime(TIMESTAMP_FORMAT)


def parse_consume_timestamp(text: str) -> int:
    """``yyyyMMddHHmmss`` (local time) → epoch milliseconds."""
    try:
        return int(datetime.strptime(text, TIMESTAMP_FORMAT).timestamp() * 1000)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"consume_timestamp {text!r} is not yyyyMMddHHmmss") from exc


class Rebalance:
    def __init__(
        self,
        instance: ClientInstance,
        model: MessageModel,
        strategy: AllocateMessageQueueStrategy,
        offsets: OffsetStore,
        consume_from_where: ConsumeFromWhere,
        consume_timestamp: str,
    ) -> None:
        self.instance = instance
        self.model = model
        self.strategy = strategy
        self.offsets = offsets
        self.consume_from_where = consume_from_where
        self.consume_timestamp_ms = parse_consume_timestamp(consume_timestamp)
        self._missing: set[str] = set()

    def allocate(self, topic: str) -> set[MessageQueue] | None:
        """This consumer's queues of ``topic``; None when it cannot tell now (no route, no
        member list), so the caller keeps what it has."""
        try:
            mq_all = self.instance.reader.queues(topic)
        except NoRouteError as exc:
            if topic not in self._missing:
                self._missing.add(topic)
                log.warning("rebalance of %s: %s", self.instance.group, exc)
            return None
        self._missing.discard(topic)
        if self.model is MessageModel.BROADCASTING:
            return set(mq_all)
        cids = self.instance.consumer_ids(topic)
        if not cids:
            return None
        if self.instance.client_id not in cids:
            log.info(
                "%s is not yet listed in group %s", self.instance.client_id, self.instance.group
            )
        mine = self.strategy.allocate(self.instance.group, self.instance.client_id, mq_all, cids)
        return set(mine)

    def start_offset(self, mq: MessageQueue) -> int:
        """Where to start reading ``mq``: the stored offset, else per ConsumeFromWhere
        (RocketMQ's ``computePullFromWhere``).

        With LAST_OFFSET a new group still sees a young queue from its beginning: the
        broker answers the offset query with 0 while the queue's first message is in
        memory (RocketMQ 4.9's quirk, ``ConsumerManageProcessor.query_offset``); a group's
        retry queue is always read from its beginning.
        """
        stored = self.offsets.read(mq, from_store=True)
        if stored >= 0:
            return stored
        reader = self.instance.reader
        if mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):  # every retry is consumed
            return reader.min_offset(mq)
        if self.consume_from_where is ConsumeFromWhere.FIRST_OFFSET:
            return reader.min_offset(mq)
        if self.consume_from_where is ConsumeFromWhere.TIMESTAMP:
            return reader.search_offset(mq, self.consume_timestamp_ms)
        return reader.max_offset(mq)

    def correct(self, mq: MessageQueue, offset: int) -> int:
        """``offset`` moved into ``[min, max]`` of ``mq``, with a log line when it was
        outside (RocketMQ's OFFSET_ILLEGAL handling)."""
        reader = self.instance.reader
        high = reader.max_offset(mq)
        if offset > high:
            log.warning(
                "offset %d of %s is past its max %d; continuing at %d", offset, mq, high, high
            )
            return high
        low = reader.min_offset(mq) if offset < high else 0
        if offset < low:
            log.warning(
                "offset %d of %s is below its min %d; continuing at %d", offset, mq, low, low
            )
            return low
        return offset
