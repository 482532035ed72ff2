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

import logging
import random
import threading

from shmq.broker.ring_puts import put_records, refusal
from shmq.broker.subscription.groups import SubscriptionGroupConfig
from shmq.broker.topic.config import PERM_READ, PERM_WRITE, TopicConfig
from shmq.codec import record as rec
from shmq.codec.delay_levels import SCHEDULE_TOPIC, schedule_properties
from shmq.codec.record_rebuild import edit_properties, property_value, rebuild_record
from shmq.ipc.ring_appender import RingAppender
from shmq.message import offset_msg_id
from shmq.names import dlq_topic, retry_topic
from shmq.remoting.protocol import RemotingCommand, ResponseCode, ResponseError

log = logging.getLogger(__name__)

DLQ_NUMS_PER_GROUP = 1
_RETRY_TOPIC, _ORIGIN_ID = b"RETRY_TOPIC", b"ORIGIN_MESSAGE_ID"
_REAL_TOPIC, _REAL_QID, _DELAY = b"REAL_TOPIC", b"REAL_QID", b"DELAY"
_SCHEDULE = SCHEDULE_TOPIC.encode()


class SendBack:
    """The broker side of send-back: looks up, rebuilds, appends, answers."""

    def __init__(self, broker, ring_appender: RingAppender) -> None:
        self.broker = broker
        self.ring = ring_appender
        self.lock = threading.Lock()  # one appender per ring
        self.levels = len(broker.config.store.delay_levels_ms)

    def group_config(self, group: str) -> SubscriptionGroupConfig:
        """The group's settings, created with the defaults when absent and
        ``autoCreateSubscriptionGroup`` is on (else SUBSCRIPTION_GROUP_NOT_EXIST)."""
        groups = self.broker.subscription_groups
        cfg = groups.get(group)
        if cfg is None:
            if not self.broker.config.auto_create_subscription_group:
                raise ResponseError(
                    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                    f"subscription group {group} does not exist and "
                    "autoCreateSubscriptionGroup is false",
                )
            cfg = SubscriptionGroupConfig(group)
            groups.update(cfg)
        return cfg

    def ensure_topic(self, topic: str, queues: int) -> TopicConfig:
        """A retry or DLQ topic, created readable and writable when absent
        (``createTopicInSendMessageBackMethod``)."""
        cfg = self.broker.topics.get(topic)
        if cfg is None:
            cfg = TopicConfig(topic, queues, queues, PERM_READ | PERM_WRITE)
            self.broker.create_topic(cfg)
            log.info("created %s with %d queue(s)", topic, queues)
        return cfg

    def handle(self, request: RemotingCommand, _conn) -> RemotingCommand:
        group = request.ext_group("group")
        offset = request.ext_int("offset")
        delay_level = request.ext_int("delayLevel")
        group_cfg = self.group_config(group)
        max_times = group_cfg.retry_max_times
        if request.ext_fields.get("maxReconsumeTimes") is not None:
            max_times = request.ext_int("maxReconsumeTimes")
        if not group_cfg.retry_queue_nums:
            return RemotingCommand.response_to(request)  # retries are off for the group
        batch = self.broker.control.store_reader().record_at(offset) if offset >= 0 else None
        if batch is None:
            raise ResponseError(
                ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {offset}"
            )
        buf, row = batch.buf, batch.rows[0]
        s, n = int(row[rec.R_PROPS_START]), int(row[rec.R_PROPS_LEN])
        props = buf[s : s + n].tobytes()
        topic = batch.topic(0)
        reconsume = int(row[rec.R_RECONSUME])
        add = {}
        if property_value(props, _RETRY_TOPIC) is None:
            add["RETRY_TOPIC"] = topic
        if property_value(props, _ORIGIN_ID) is None:
            host_at = int(row[rec.R_STORE_HOST])
            host_len = 20 if int(row[rec.R_SYSFLAG]) & rec.SYSFLAG_STOREHOST_V6 else 8
            store_host = buf[host_at : host_at + host_len].tobytes()
            add["ORIGIN_MESSAGE_ID"] = offset_msg_id(store_host, offset)
        props = edit_properties(props, remove={_REAL_TOPIC, _REAL_QID, _DELAY}, add=add)
        if reconsume >= max_times or delay_level < 0:
            target = self.ensure_topic(dlq_topic(group), DLQ_NUMS_PER_GROUP)
            target_topic, qid = target.topic_name, 0
        else:
            target = self.ensure_topic(retry_topic(group), group_cfg.retry_queue_nums)
            target_topic = target.topic_name
            qid = random.randrange(target.write_queue_nums)
            level = delay_level or 3 + reconsume
            qid, extra = schedule_properties(target_topic, qid, level, self.levels)
            target_topic, props = SCHEDULE_TOPIC, props + extra
        record = rebuild_record(buf, row, target_topic.encode(), qid, props, reconsume + 1)
        self._append(record)
        return RemotingCommand.response_to(request)

    def _append(self, record: bytearray) -> None:
        (answer,) = put_records(self.ring, self.lock, [record], "send back")
        error = refusal(answer, "send back")
        if error is not None:
            raise error
