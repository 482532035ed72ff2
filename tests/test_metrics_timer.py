"""The timing wheel's metrics against a real broker (issue 54): RocketMQ 5's timer dequeue
lag and latency and the timer message snapshot, which the schedule agent publishes in the
counters as it works (not from ``timercheck``, which an idle broker leaves behind)."""

from __future__ import annotations

import time

import pytest
from test_metrics_backlogs import scrape, send, value
from waiting import wait_for

from e2e_helpers import embedded
from shmq.ipc import counters as cn

TOPIC = "TimerMetricsT"
BOUNDS = [str(b) for b in cn.TIMER_BOUNDS_S]


@pytest.fixture
def mq(tmp_path):
    conf = {"metrics_exporter_type": "PROM", "metrics_prom_exporter_port": 0}
    with embedded(str(tmp_path / "store"), **conf) as mq:
        mq.create_topic(TOPIC, 1)
        yield mq


def snapshot(found: dict) -> dict[str, float | None]:
    return {b: value(found, "rocketmq_timer_message_snapshot", timer_bound_s=b) for b in BOUNDS}


def wheel_idle(found: dict) -> bool:
    return (
        value(found, "rocketmq_timer_dequeue_lag") == 0
        and value(found, "rocketmq_timer_dequeue_latency") == 0
        and set(snapshot(found).values()) == {0}
    )


def test_near_timers_are_counted_then_delivered(mq):
    """Messages due in 3 s are on the wheel and in the 5 s bucket; once delivered, the wheel
    is empty again and nothing is behind."""
    assert wheel_idle(scrape(mq)), "a broker that never had a timer message"
    send(mq, TOPIC, 3, deliver_time_ms=int(time.time() * 1000) + 3000)

    near = {b: 3 if b == "5" else 0 for b in BOUNDS}

    def counted() -> bool:  # the snapshot is taken at most twice a second
        found = scrape(mq)
        return value(found, "rocketmq_timer_dequeue_lag") == 3 and snapshot(found) == near

    wait_for(counted, what="3 timer messages on the wheel, due within 5 s", interval=0.05)
    wait_for(lambda: wheel_idle(scrape(mq)), what="the timer messages delivered")
    found = scrape(mq)
    assert value(found, "rocketmq_messages_in_total", topic=TOPIC) == 3
    assert wheel_idle(found)


def test_far_timers_sit_in_their_buckets(mq):
    """Two hours ahead counts in the 4 h bucket (after 1 h); two days ahead is on the wheel
    (the lag) but in no bucket, as RocketMQ's snapshot covers 24 h. Nothing is due, so
    nothing is late."""
    now = int(time.time() * 1000)
    send(mq, TOPIC, 2, deliver_time_ms=now + 2 * 3600_000)
    send(mq, TOPIC, 1, deliver_time_ms=now + 2 * 86400_000)
    wait_for(lambda: value(scrape(mq), "rocketmq_timer_dequeue_lag") == 3,
             what="3 timer messages on the wheel")  # fmt: skip
    want = {b: 2 if b == "14400" else 0 for b in BOUNDS}
    wait_for(lambda: snapshot(scrape(mq)) == want, what="2 messages in the 14400 s bucket")
    assert value(scrape(mq), "rocketmq_messages_in_total", topic=TOPIC) is None
