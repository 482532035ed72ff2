"""QUERY_MESSAGE and VIEW_MESSAGE_BY_ID: RocketMQ's ``QueryMessageProcessor``.

A query by key looks the key up in the IndexFiles (``store.index``), opened read-only for
the request, and answers the messages of the topic that carry the key, leaving out those
of a deleted topic's past life (below the queue's min offset). A view reads the message at
a CommitLog offset (an offset message id's).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import ClassVar

from shmq.broker.processors.processor import Processor
from shmq.broker.processors.responses import json_response
from shmq.errors import ResponseError
from shmq.message import message_to_json
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode
from shmq.remoting.server import Connection
from shmq.store.index.service import IndexService

Rc = ResponseCode


class QueryMessageProcessor(Processor):
    """The two codes above."""

    CODES: ClassVar[Mapping[int, str]] = {
        RequestCode.QUERY_MESSAGE: "query_message",
        RequestCode.VIEW_MESSAGE_BY_ID: "view_message",
    }

    def view_message(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        offset = request.ext_int("offset")
        msg = self.ctx.store.view(offset)
        if msg is None:
            raise ResponseError(Rc.SYSTEM_ERROR, f"no message at CommitLog offset {offset}")
        return json_response(request, message_to_json(msg))

    def query_message(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        ctx = self.ctx
        store = ctx.config.store
        topic, key = request.ext_topic(), request.ext("key")
        max_num = request.ext_int("maxNum")
        begin = int(request.ext_fields.get("beginTimestamp", 0))
        end = int(request.ext_fields.get("endTimestamp", time.time() * 1000 + 1000))
        index = IndexService(
            os.path.join(ctx.root, "index"),
            store.max_hash_slot_num,
            store.max_index_num,
            store.max_msgs_num_batch,
        )
        try:
            index.load(True, 0)
            offsets = index.query(topic, key, max_num, begin, end)
        finally:
            index.close()
        with ctx.store.reading() as reader:
            messages = [reader.view(phys) for phys in offsets]
        found = []
        starts: dict[int, int] = {}  # queue id -> min offset
        for msg in messages:
            if msg is None or msg.topic != topic or key not in (*msg.keys, msg.uniq_key):
                continue
            if msg.queue_id not in starts:
                starts[msg.queue_id] = ctx.store.min_offset(topic, msg.queue_id)
            if msg.queue_offset >= starts[msg.queue_id]:  # not of a deleted topic's past
                found.append(message_to_json(msg))
        if not found:
            raise ResponseError(Rc.QUERY_NOT_FOUND, f"no message of {topic} with key {key}")
        return json_response(request, {"messages": found})
