"""Failed messages of a concurrently consuming CLUSTERING group go back to the broker
(RocketMQ's ``sendMessageBack``), which redelivers them through the group's retry topic
``%RETRY%<group>`` with growing delays and parks them in ``%DLQ%<group>`` after
``max_reconsume_times`` attempts. The group subscribes to its retry topic, and a retried
message is shown with its original topic (``RETRY_TOPIC``).

A message the broker does not take back (its broker is gone from the route or does not
answer, or its CommitLog record is gone) is sent to the retry topic by the consumer itself,
as RocketMQ's client does, through an inner producer that may reach any broker of the
group's retry topic; only when that fails too does the consumer keep the message and
consume it again locally after ``reconsume_delay``.
"""

from __future__ import annotations

import logging

from shmq.client.producer.producer import Producer
from shmq.client.producer.records import retried_record
from shmq.client.types import MessageQueue
from shmq.errors import RemotingError, ResponseError, ShmqError
from shmq.message import MessageExt
from shmq.names import retry_topic
from shmq.remoting.protocol import VERSION_V3_4_9, RemotingCommand, RequestCode, check_response

log = logging.getLogger(__name__)

DEFAULT_MAX_RECONSUME_TIMES = 16  # what -1 means for a concurrent consumer
SEND_BACK_TIMEOUT_S = 3.0
INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"  # RocketMQ's MixAll.CLIENT_INNER_PRODUCER_GROUP


def restore_topics(msgs: list[MessageExt]) -> None:
    """Show retried messages with the topic they were first sent to (RocketMQ's
    ``resetRetryAndNamespace``)."""
    for msg in msgs:
        original = msg.properties.get("RETRY_TOPIC")
        if original:
            msg.topic = original


class MessageBack:
    """Sends failed messages back to their broker (CONSUMER_SEND_MSG_BACK), or else to the
    group's retry topic through an inner producer (made on first need)."""

    def __init__(self, instance, namesrv: str, group: str, max_reconsume_times: int) -> None:
        self.instance = instance
        self.namesrv = namesrv
        self.group = group
        self.max_reconsume_times = (
            DEFAULT_MAX_RECONSUME_TIMES if max_reconsume_times < 0 else max_reconsume_times
        )
        self._producer: Producer | None = None

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close()

    def send_back(
        self, msgs: list[MessageExt], mq: MessageQueue, delay_level: int
    ) -> list[MessageExt]:
        """Send ``msgs`` (read from ``mq``) back, to the broker or else to the retry topic;
        returns those that went neither way."""
        try:
            addr = next(
                b.address
                for b in self.instance.routes.brokers(mq.topic)
                if b.broker_name == mq.broker_name
            )
            channel = self.instance.channel(addr)
        except (StopIteration, ShmqError) as exc:
            log.warning("consumer %s: cannot send %d message(s) back to %s: %s",
                        self.group, len(msgs), mq.broker_name, exc)  # fmt: skip
            return [m for m in msgs if not self._resend(m, delay_level)]
        failed = []
        for msg in msgs:
            request = RemotingCommand.request(
                RequestCode.CONSUMER_SEND_MSG_BACK,
                {
                    "offset": msg.physical_offset,
                    "group": self.group,
                    "delayLevel": delay_level,
                    "originMsgId": msg.msg_id,
                    "originTopic": msg.topic,
                    "unitMode": False,
                    "maxReconsumeTimes": self.max_reconsume_times,
                },
            )
            request.version = VERSION_V3_4_9  # so the broker reads maxReconsumeTimes
            try:
                check_response(channel.invoke(request, timeout=SEND_BACK_TIMEOUT_S))
            except (RemotingError, ResponseError) as exc:
                log.warning("consumer %s: send back of %s failed (%s): sending it to %s",
                            self.group, msg.msg_id, exc, retry_topic(self.group))  # fmt: skip
                if not self._resend(msg, delay_level):
                    failed.append(msg)
        return failed

    def _resend(self, msg: MessageExt, delay_level: int) -> bool:
        """RocketMQ's fallback: ``msg`` sent to the retry topic with delay level ``3 +
        reconsumeTimes`` (the level asked for, if any), or to the DLQ once its reconsume
        times reach the maximum; False when that fails too (it is consumed here again)."""
        level = delay_level if delay_level > 0 else 3 + msg.reconsume_times
        topic = retry_topic(self.group)
        max_times = self.max_reconsume_times if delay_level >= 0 else 0
        try:
            if self._producer is None:
                client = self.instance.reader.client
                self._producer = Producer(
                    INNER_PRODUCER_GROUP,
                    self.namesrv,
                    transport=self.instance.reader.transport.transport,
                    credentials=client.credentials,
                    tls=client.tls,
                )
            self._producer.send_record(topic, retried_record(msg, topic, level, max_times))
        except ShmqError as exc:
            log.warning("consumer %s: resending %s to %s failed (%s): consuming it again here",
                        self.group, msg.msg_id, topic, exc)  # fmt: skip
            return False
        return True
