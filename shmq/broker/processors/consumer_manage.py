"""GET_CONSUMER_LIST_BY_GROUP, QUERY_CONSUMER_OFFSET and UPDATE_CONSUMER_OFFSET: RocketMQ's
``ConsumerManageProcessor``.

Committed offsets live in ``offset.consumer_offsets`` (consumerOffset.json), which only
grows with the store's own topics and queues, never with whatever names requests carry.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import ClassVar

from shmq.broker.processors.processor import Processor
from shmq.broker.processors.responses import json_response
from shmq.errors import ResponseError
from shmq.ipc import counters as cn
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode
from shmq.remoting.server import Connection
from shmq.store.consume_queue import is_blank_unit

Rc = ResponseCode


class ConsumerManageProcessor(Processor):
    """The three codes above."""

    CODES: ClassVar[Mapping[int, str]] = {
        RequestCode.GET_CONSUMER_LIST_BY_GROUP: "consumer_list",
        RequestCode.QUERY_CONSUMER_OFFSET: "query_offset",
        RequestCode.UPDATE_CONSUMER_OFFSET: "update_offset",
    }

    def consumer_list(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        group = request.ext_group("consumerGroup")
        ids = self.ctx.consumers.client_ids(group)
        if not ids:
            raise ResponseError(Rc.SYSTEM_ERROR, f"the consumer group {group} has no consumer")
        return json_response(request, {"consumerIdList": ids})

    def query_offset(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """The group's committed offset; without one, RocketMQ 4.9's answer
        (``ConsumerManageProcessor.queryConsumerOffset``): 0 when the queue's min offset is
        0 and its first message is not "in disk", i.e. the queue is empty or that message
        lies within ``accessMessageInMemoryMaxRatio`` % of physical RAM of the CommitLog's
        end (``checkInDiskByConsumeOffset``), so a new group reads a young queue from its
        start whatever its ConsumeFromWhere; QUERY_NOT_FOUND otherwise."""
        ctx = self.ctx
        topic, queue_id = request.ext_topic(), request.ext_int("queueId")
        offset = ctx.offsets.query(request.ext_group("consumerGroup"), topic, queue_id)
        if offset >= 0:
            return RemotingCommand.response_to(request, ext_fields={"offset": offset})
        # the GET_MIN_OFFSET answer for the same topic and queue
        low = ctx.store.min_offset(topic, queue_id)
        first = self._young_queue_start(topic, queue_id, low)
        if first is not None:
            ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
            in_memory = ram * ctx.config.store.access_message_in_memory_max_ratio // 100
            end = cn.load(ctx.counters.words, cn.WRITE_OFFSET)
            if first < 0 or end - first <= in_memory:
                return RemotingCommand.response_to(request, ext_fields={"offset": low})
        return RemotingCommand.response_to(
            request,
            Rc.QUERY_NOT_FOUND,
            "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
        )

    def _young_queue_start(self, topic: str, queue_id: int, low: int) -> int | None:
        """For a queue that still holds its first message, the CommitLog offset of that
        message (-1 when the queue has none yet); None for a queue whose start was cleaned
        up. The first message is at offset 0, or after blank units (``StoreView.min_offset``):
        the one that starts a deleted topic's next life (``topic_purge``)."""
        store = self.ctx.store
        with store.reading() as reader:
            if low > 0:
                before, _ = reader.units(topic, queue_id, low - 1, low)
                if not (before.size and is_blank_unit(int(before["offset"][0]),
                                                      int(before["size"][0]))):  # fmt: skip
                    return None
            if store.max_offset(topic, queue_id) <= low:
                return -1
            first, _ = reader.units(topic, queue_id, low, low + 1)
            return int(first["offset"][0]) if first.size else None

    def update_offset(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """Commit an offset of an existing topic's queue: consumerOffset.json only grows with
        the store's own topics, never with whatever names requests carry."""
        group, topic = request.ext_group("consumerGroup"), request.ext_topic()
        queue_id = request.ext_int("queueId")
        cfg = self.ctx.topics.get(topic)
        if cfg is None:
            raise ResponseError(Rc.TOPIC_NOT_EXIST, f"topic {topic} does not exist")
        if not 0 <= queue_id < max(cfg.read_queue_nums, cfg.write_queue_nums):
            raise ResponseError(
                Rc.SYSTEM_ERROR, f"queueId {queue_id} is outside topic {topic}'s queues"
            )
        self.ctx.offsets.commit(group, topic, queue_id, request.ext_int("commitOffset"))
        return RemotingCommand.response_to(request)
