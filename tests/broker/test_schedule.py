"""Delay levels with real processes: the schedule agent delivers each delayed message once,
no earlier than its level's delay, across restarts and SIGKILLs (the store checked
afterwards by the independent decoder)."""

from __future__ import annotations

import collections
import itertools
import os
import signal
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from waiting import wait_for

import shmq
from e2e_helpers import cluster, shm_entries
from shmq.config import parse_delay_levels
from shmq.delay_topics import SCHEDULE_TOPIC
from shmq.errors import ConfigError
from spec_decoder import walk_commitlog

LEVELS = "1s 2s 3s"
PRECISION_MS = 1500  # the agent is woken at the due time; a loaded 2-core host adds a little


def stored(store: str) -> list[dict]:
    records, _ = walk_commitlog(os.path.join(store, "commitlog"))
    return records


def deliveries(store: str, topic: str) -> collections.Counter:
    return collections.Counter(r["body"].decode() for r in stored(store) if r["topic"] == topic)


def send_delayed(namesrv: str, topic: str, count: int, level: int, prefix: str = "d") -> None:
    with shmq.Producer("delay-producer", namesrv) as producer:
        for i in range(count):
            producer.send(shmq.Message(topic, f"{prefix}{i}".encode(), delay_level=level))


@pytest.fixture(scope="module")
def c(tmp_path_factory):
    """One broker for the tests that neither restart nor kill it (each has its topics)."""
    before = shm_entries()
    with cluster(tmp_path_factory.mktemp("delays"), messageDelayLevel=LEVELS) as c:
        c.create_topic("Timed", 4)
        yield c
    assert shm_entries() - before == set()


def schedule_pid(c) -> int:
    return c.runtime_info()["agents"]["schedule"]["pid"]


def test_parse_delay_levels_as_rocketmq():
    assert parse_delay_levels("1s 5s 2m 1h 1d") == (
        1000, 5000, 120_000, 3_600_000, 86_400_000
    )  # fmt: skip
    for bad in ("", "1x", "s", "0s", "1.5s", "-1s"):
        with pytest.raises(ConfigError, match="messageDelayLevel"):
            parse_delay_levels(bad)


def test_delayed_messages_arrive_after_their_delay_across_a_restart(tmp_path):
    before = shm_entries()
    with cluster(tmp_path, messageDelayLevel=LEVELS, defaultTopicQueueNums=2) as c:
        c.create_topic("Delayed", 2)
        sent_at = time.time() * 1000
        send_delayed(c.namesrv, "Delayed", 20, level=3)  # 3 s
        send_delayed(c.namesrv, "Delayed", 20, level=1, prefix="s")  # 1 s
        with shmq.Producer("cap", c.namesrv) as producer:  # above the last level: capped
            producer.send(shmq.Message("Delayed", b"capped", delay_level=18))
        assert c.stop_broker() == 0  # in the middle: the 1 s ones may be out, not the 3 s
        c.start_broker()
        wait_for(lambda: len(deliveries(c.store, "Delayed")) == 41, interval=0.2,
                 what="the 41 delayed messages delivered")  # fmt: skip
        assert c.stop_broker() == 0
        records = stored(c.store)
        scheduled = [r for r in records if r["topic"] == SCHEDULE_TOPIC]
        assert len(scheduled) == 41
        assert {r["queue_id"] for r in scheduled} == {0, 2}
        delivered = [r for r in records if r["topic"] == "Delayed"]
        bodies = collections.Counter(r["body"].decode() for r in delivered)
        assert set(bodies) == {f"d{i}" for i in range(20)} | {f"s{i}" for i in range(20)} | {
            "capped"
        }
        assert max(bodies.values()) == 1
        by_body = {r["body"].decode(): r for r in scheduled}
        for r in delivered:
            origin = by_body[r["body"].decode()]
            delay = {0: 1000, 2: 3000}[origin["queue_id"]]
            assert r["store_timestamp"] >= origin["store_timestamp"] + delay
            assert r["properties"]["REAL_TOPIC"] == "Delayed"
            assert int(r["properties"]["REAL_QID"]) == r["queue_id"]
            assert "DELAY" not in r["properties"]
            assert r["born_timestamp"] == origin["born_timestamp"]
            assert r["properties"]["UNIQ_KEY"] == origin["properties"]["UNIQ_KEY"]
        late = [r["store_timestamp"] - sent_at for r in delivered if r["body"] == b"s0"]
        assert late and late[0] >= 1000
        with open(os.path.join(c.store, "config", "delayOffset.json")) as f:
            assert '"offsetTable"' in f.read()
    assert shm_entries() - before == set()


def test_a_delayed_message_is_consumed_after_its_delay(c):
    c.create_topic("DelayedC", 1)
    got: list[tuple[float, bytes]] = []
    consumer = shmq.PushConsumer("delay-group", c.namesrv)
    consumer.subscribe("DelayedC", "*")

    def listener(msgs, _ctx):
        got.extend((time.time(), m.body) for m in msgs)
        return shmq.ConsumeResult.CONSUME_SUCCESS

    consumer.register_message_listener(listener)
    consumer.start()
    try:
        sent = time.time()
        send_delayed(c.namesrv, "DelayedC", 1, level=2)
        wait_for(lambda: got, what="the delayed message consumed")
    finally:
        consumer.shutdown()
    assert [b for _, b in got] == [b"d0"]
    lateness_ms = (got[0][0] - sent) * 1000 - 2000
    assert -50 <= lateness_ms <= PRECISION_MS


def test_a_delayed_send_answers_with_the_queue_it_was_sent_to(c):
    """As RocketMQ's broker answers: the real topic and queue, not the schedule queue."""
    c.create_topic("DelayedQ", 4)
    with shmq.Producer("delay-q-p", c.namesrv) as producer:
        last = lambda queues, _msg, _arg: queues[-1]  # noqa: E731
        sync = producer.send(shmq.Message("DelayedQ", b"s", delay_level=2), selector=last)
        later = producer.send_async(shmq.Message("DelayedQ", b"a", delay_level=2),
                                    selector=last).result(10)  # fmt: skip
    for result in (sync, later):
        assert result.send_status is shmq.SendStatus.SEND_OK
        assert (result.message_queue.topic, result.message_queue.queue_id) == ("DelayedQ", 3)


@pytest.mark.slow
@pytest.mark.crash
@pytest.mark.parametrize("victim", ["schedule", "broker"])
@pytest.mark.parametrize("kind", ["level", "timer"])
def test_sigkill_during_delivery_delivers_each_delayed_message_once(tmp_path, victim, kind):
    before = shm_entries()
    count = 3000
    with cluster(tmp_path, messageDelayLevel="1s 2s", defaultTopicQueueNums=2) as c:
        c.create_topic("DelayedK", 2)
        started = time.monotonic()
        with shmq.Producer("bulk-delay", c.namesrv) as producer:
            futures = []
            for i in range(count):  # over ~2 s, so deliveries go on from 2 s to 4 s
                if kind == "level":
                    msg = shmq.Message("DelayedK", f"k{i}".encode(), delay_level=2)
                else:
                    at = int(time.time() * 1000) + 2000
                    msg = shmq.Message("DelayedK", f"k{i}".encode(), deliver_time_ms=at)
                futures.append(producer.send_async(msg))
                time.sleep(max(0.0, started + 2.0 * i / count - time.monotonic()))
            for future in futures:
                future.result(30)
        time.sleep(max(0.0, started + 3.0 - time.monotonic()))  # in the middle of delivery
        if victim == "schedule":
            first = schedule_pid(c)
            os.kill(first, signal.SIGKILL)
            restarted = wait_for(lambda: (pid := schedule_pid(c)) != first and pid,
                                 what="the schedule agent restarted")  # fmt: skip
            os.kill(restarted, signal.SIGKILL)  # and its successor, as soon as it runs
        else:
            c.kill_supervisor()
            c.start_broker()
        wait_for(lambda: sum(deliveries(c.store, "DelayedK").values()) >= count, interval=0.2,
                 what=f"{count} deliveries")  # fmt: skip
        time.sleep(1.0)  # a test of absence: anything delivered twice would show by now
        if victim == "schedule":
            assert c.runtime_info()["agents"]["schedule"]["restarts"] >= 1
        assert c.stop_broker() == 0
        bodies = deliveries(c.store, "DelayedK")
        assert set(bodies) == {f"k{i}" for i in range(count)}
        assert max(bodies.values()) == 1
    assert shm_entries() - before == set()


@settings(
    max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(delays=st.lists(st.integers(0, 2500), min_size=1, max_size=60))
def test_timer_messages_arrive_in_time_order_within_the_precision(c, delays):
    tag = f"x{time.monotonic_ns()}-"
    with shmq.Producer("timer-p", c.namesrv) as producer:
        now = int(time.time() * 1000)
        for i, d in enumerate(delays):
            producer.send(shmq.Message("Timed", f"{tag}{i}".encode(), deliver_time_ms=now + d))

    def delivered() -> list[dict]:
        got = [r for r in stored(c.store)
               if r["topic"] == "Timed" and r["body"].startswith(tag.encode())]  # fmt: skip
        return got if len(got) >= len(delays) else []

    got = wait_for(delivered, interval=0.1, what=f"{len(delays)} timer messages")
    assert sorted(r["body"].decode() for r in got) == sorted(
        f"{tag}{i}" for i in range(len(delays))
    )
    due = [int(r["properties"]["TIMER_DELIVER_MS"]) for r in got]  # in delivery order
    late = [r["store_timestamp"] - d for r, d in zip(got, due, strict=True)]
    assert min(late) >= 0, "delivered before its time"
    assert max(late) <= PRECISION_MS
    for earlier, later in itertools.pairwise(due):
        assert later >= earlier - 1000  # time order, within the precision
