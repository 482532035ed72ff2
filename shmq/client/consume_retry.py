"""Failed messages of a concurrently consuming CLUSTERING group go back to the broker
(RocketMQ's ``sendMessageBack``), which redelivers them through the group's retry topic
``%RETRY%<group>`` with growing delays and parks them in ``%DLQ%<group>`` after
``max_reconsume_times`` attempts. The group subscribes to its retry topic, and a retried
message is shown with its original topic (``RETRY_TOPIC``).

A message the broker cannot take back (it is gone, or so is its CommitLog record) stays
with the consumer, which consumes it again locally after ``reconsume_delay``. (RocketMQ's
client first re-sends it to the retry topic through a producer; on one host that producer
would reach the same broker that just failed, so shmq goes straight to the local retry.)
"""

from __future__ import annotations

import logging

from shmq.client.types import MessageQueue
from shmq.errors import RemotingError, ResponseError, ShmqError
from shmq.message import MessageExt
from shmq.remoting.protocol import RemotingCommand, RequestCode, check_response

log = logging.getLogger(__name__)

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
DEFAULT_MAX_RECONSUME_TIMES = 16  # what -1 means for a concurrent consumer
SEND_BACK_TIMEOUT_S = 3.0


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def restore_topics(msgs: list[MessageExt]) -> None:
    """Show retried messages with the topic they were first sent to (RocketMQ's
    ``resetRetryAndNamespace``)."""
    for msg in msgs:
        original = msg.properties.get("RETRY_TOPIC")
        if original:
            msg.topic = original


class MessageBack:
    """Sends failed messages back to their broker (CONSUMER_SEND_MSG_BACK)."""

    def __init__(self, instance, group: str, max_reconsume_times: int) -> None:
        self.instance = instance
        self.group = group
        self.max_reconsume_times = (
            DEFAULT_MAX_RECONSUME_TIMES if max_reconsume_times < 0 else max_reconsume_times
        )

    def send_back(
        self, msgs: list[MessageExt], mq: MessageQueue, delay_level: int
    ) -> list[MessageExt]:
        """Send ``msgs`` (read from ``mq``) back; returns those the broker did not take."""
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
            return msgs
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
            try:
                check_response(channel.invoke(request, timeout=SEND_BACK_TIMEOUT_S))
            except (RemotingError, ResponseError) as exc:
                log.warning("consumer %s: send back of %s failed (%s): consuming it again here",
                            self.group, msg.msg_id, exc)  # fmt: skip
                failed.append(msg)
        return failed
