"""CONSUMER_SEND_MSG_BACK: a consumer hands a message it failed to consume back to the
broker, which stores it again for a later retry or, after too many, in the dead-letter
queue (RocketMQ 4.9's ``SendMessageProcessor.asyncConsumerSendMsgBack``).

The broker looks the original up by its CommitLog offset and writes a copy to
``%RETRY%<group>`` with delay level ``3 + reconsumeTimes`` (unless the consumer asked for
another), through the schedule topic like any delayed message; once ``reconsumeTimes``
reaches the group's maximum (or the level asked for is negative) the copy goes to
``%DLQ%<group>`` instead, at once. The copy keeps body, flag, properties and born time, adds
``RETRY_TOPIC`` (the original topic) and ``ORIGIN_MESSAGE_ID``, and counts one more
reconsume. Copies are appended through the control plane's own ring, as a producer's
(``ring_puts``).
"""

from __future__ import annotations

import random
import threading

from shmq.broker.context import BrokerContext
from shmq.broker.ring_puts import broker_ring, put_records, refusal
from shmq.codec import record as rec
from shmq.codec.record_rebuild import edit_properties, property_value, rebuild_record
from shmq.delay_topics import SCHEDULE_TOPIC, schedule_properties
from shmq.message import offset_msg_id
from shmq.names import dlq_topic, retry_topic
from shmq.remoting.protocol import (
    VERSION_V3_4_9,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    ResponseError,
)
from shmq.remoting.server import Connection, RemotingServer

DLQ_NUMS_PER_GROUP = 1
_RETRY_TOPIC, _ORIGIN_ID = b"RETRY_TOPIC", b"ORIGIN_MESSAGE_ID"
_REAL_TOPIC, _REAL_QID, _DELAY = b"REAL_TOPIC", b"REAL_QID", b"DELAY"
_SCHEDULE = SCHEDULE_TOPIC.encode()


class SendBack:
    """The broker side of send-back: looks up, rebuilds, appends (through a ring of the
    broker's own), answers."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.ring = broker_ring(ctx, "shmq-send-back")
        self.lock = threading.Lock()  # one appender per ring
        self.levels = len(ctx.config.store.delay_levels_ms)

    def register(self, server: RemotingServer) -> None:
        server.register(RequestCode.CONSUMER_SEND_MSG_BACK, self.handle)

    def close(self) -> None:
        self.ring.close()

    def handle(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        ctx = self.ctx
        group = request.ext_group("group")
        offset = request.ext_int("offset")
        delay_level = request.ext_int("delayLevel")
        group_cfg = ctx.subscription_groups.find(group, ctx.config.auto_create_subscription_group)
        max_times = group_cfg.retry_max_times
        if (
            request.version >= VERSION_V3_4_9
            and request.ext_fields.get("maxReconsumeTimes") is not None
        ):
            max_times = request.ext_int("maxReconsumeTimes")
        if not group_cfg.retry_queue_nums:
            return RemotingCommand.response_to(request)  # retries are off for the group
        batch = None
        if offset >= 0:
            with ctx.store.reading() as reader:
                batch = reader.record_at(offset)
        if batch is None:
            raise ResponseError(
                ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {offset}"
            )
        buf, row = batch.buf, batch.rows[0]
        s, n = int(row["props_start"]), int(row["props_len"])
        props = buf[s : s + n].tobytes()
        topic = batch.topic(0)
        reconsume = int(row["reconsume_times"])
        add = {}
        if property_value(props, _RETRY_TOPIC) is None:
            add["RETRY_TOPIC"] = topic
        if property_value(props, _ORIGIN_ID) is None:
            host_at = int(row["store_host"])
            host_len = 20 if int(row["sysflag"]) & rec.SYSFLAG_STOREHOST_V6 else 8
            store_host = buf[host_at : host_at + host_len].tobytes()
            add["ORIGIN_MESSAGE_ID"] = offset_msg_id(store_host, offset)
        props = edit_properties(props, remove={_REAL_TOPIC, _REAL_QID, _DELAY}, add=add)
        dead = reconsume >= max_times or delay_level < 0
        if dead:
            target = ctx.topic_publisher.ensure(dlq_topic(group), DLQ_NUMS_PER_GROUP)
            target_topic, qid = target.topic_name, 0
        else:
            target = ctx.topic_publisher.ensure(retry_topic(group), group_cfg.retry_queue_nums)
            target_topic = target.topic_name
            qid = random.randrange(target.write_queue_nums)
            level = delay_level or 3 + reconsume
            qid, extra = schedule_properties(target_topic, qid, level, self.levels)
            target_topic, props = SCHEDULE_TOPIC, props + extra
        record = rebuild_record(buf, row, target_topic.encode(), qid, props, reconsume + 1)
        self._append(record)
        if dead:
            ctx.events.dead_lettered(group, property_value(props, _RETRY_TOPIC) or topic)
        return RemotingCommand.response_to(request)

    def _append(self, record: bytearray) -> None:
        (answer,) = put_records(self.ring, self.lock, [record], "send back")
        error = refusal(answer, "send back")
        if error is not None:
            raise error
