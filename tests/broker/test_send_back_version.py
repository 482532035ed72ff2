"""CONSUMER_SEND_MSG_BACK's ``maxReconsumeTimes`` counts only from clients of version
V3_4_9 (121) on, as in RocketMQ; an older client's message is retried up to the group's
``retryMaxTimes`` (16) whatever its header says. Raw frames, through the independent
wire client, with the client version in the request header."""

from __future__ import annotations

import wire_client as wc
from test_remoting_send import send
from waiting import wait_for

CONSUMER_SEND_MSG_BACK, GET_MAX_OFFSET = 36, 30
SCHEDULE_TOPIC, LEVEL_3_QUEUE = "SCHEDULE_TOPIC_XXXX", 2  # delay level 3 + reconsumeTimes 0


def max_offset(c: wc.WireClient, topic: str, queue_id: int) -> int:
    resp = c.call(GET_MAX_OFFSET, {"topic": topic, "queueId": str(queue_id)})
    return int(resp.ext["offset"]) if resp.code == wc.SUCCESS else 0


def send_back(broker, group: str, version: int) -> tuple[int, int]:
    """A fresh message handed back by a client of ``version`` asking for no retries
    (``maxReconsumeTimes`` 0): how many copies reached the group's DLQ and the retry
    schedule, once one did."""
    sent = send(broker, "BackVersion", 0, {})
    assert sent.code == wc.SUCCESS, sent
    commit_log_offset = int(sent.ext["msgId"][-16:], 16)  # an offset msg id ends with it
    with wc.WireClient(broker.address) as c, wc.WireClient(broker.address, version=version) as m:
        scheduled = max_offset(c, SCHEDULE_TOPIC, LEVEL_3_QUEUE)
        resp = m.call(CONSUMER_SEND_MSG_BACK, {
            "offset": str(commit_log_offset), "group": group, "delayLevel": "0",
            "originMsgId": sent.ext["msgId"], "originTopic": "BackVersion", "unitMode": "false",
            "maxReconsumeTimes": "0"})  # fmt: skip
        assert resp.code == wc.SUCCESS, resp

        def copies() -> tuple[int, int] | None:  # once reput dispatched the one copy
            found = (max_offset(c, f"%DLQ%{group}", 0),
                     max_offset(c, SCHEDULE_TOPIC, LEVEL_3_QUEUE) - scheduled)  # fmt: skip
            return found if any(found) else None

        return wait_for(copies, what=f"the copy of group {group}'s message")


def test_a_client_before_v3_4_9_gets_the_groups_retry_max_times(shared_broker):
    broker, _ = shared_broker
    assert send_back(broker, "back-old", 120) == (0, 1)  # retried, not dead-lettered


def test_a_client_from_v3_4_9_on_gets_its_own_max_reconsume_times(shared_broker):
    broker, _ = shared_broker
    assert send_back(broker, "back-new", 121) == (1, 0)
