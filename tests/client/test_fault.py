"""Latency fault tolerance and RocketMQ 4.9's queue selection, with a fake clock."""

from __future__ import annotations

import itertools
import random

import pytest

from shmq.client.producer.fault import (
    LATENCY_MAX,
    NOT_AVAILABLE_DURATION,
    LatencyFaultTolerance,
    select_one_message_queue,
)
from shmq.client.types import MessageQueue
from shmq.errors import ConfigError


class FakeClock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def queues(*brokers: tuple[str, int]) -> list[MessageQueue]:
    return [MessageQueue("T", name, q) for name, n in brokers for q in range(n)]


def counter(start: int = 0):
    it = itertools.count(start)
    return lambda: next(it)


def test_defaults_are_rocketmq_49_tables():
    assert LATENCY_MAX == (50, 100, 550, 1000, 2000, 3000, 15000)
    assert NOT_AVAILABLE_DURATION == (0, 0, 30000, 60000, 120000, 180000, 600000)


@pytest.mark.parametrize(
    ("latency", "duration"),
    [
        (0, 0),
        (49, 0),
        (50, 0),
        (549, 0),
        (550, 30000),
        (999, 30000),
        (1000, 60000),
        (2000, 120000),
        (2999, 120000),
        (3000, 180000),
        (14999, 180000),
        (15000, 600000),
        (10**9, 600000),
    ],
)
def test_not_available_duration_is_the_largest_threshold_reached(latency, duration):
    assert LatencyFaultTolerance().compute_not_available_duration(latency) == duration


def test_update_marks_unavailable_for_the_duration_and_back_after():
    clock = FakeClock()
    faults = LatencyFaultTolerance(clock=clock)
    assert faults.is_available("broker-a")  # unknown brokers are available
    assert faults.update("broker-a", 700) == 30000
    assert not faults.is_available("broker-a")
    clock.now += 29999
    assert not faults.is_available("broker-a")
    clock.now += 1
    assert faults.is_available("broker-a")
    assert faults.update("broker-a", 20) == 0  # fast again: available at once
    assert faults.is_available("broker-a")


def test_a_failed_send_counts_as_30000_ms_and_keeps_its_real_latency():
    clock = FakeClock()
    faults = LatencyFaultTolerance(clock=clock)
    assert faults.update("broker-b", 3, isolation=True) == 600000
    (item,) = faults.items()
    assert (item.name, item.current_latency) == ("broker-b", 3)
    assert item.start_timestamp == clock.now + 600000
    clock.now += 599999
    assert not faults.is_available("broker-b")
    clock.now += 1
    assert faults.is_available("broker-b")


def test_custom_tables_and_their_validation():
    faults = LatencyFaultTolerance((10, 20), (5, 7), clock=FakeClock())
    assert [faults.compute_not_available_duration(x) for x in (9, 10, 25)] == [0, 5, 7]
    with pytest.raises(ConfigError, match="equal length"):
        LatencyFaultTolerance((1, 2), (1,))
    with pytest.raises(ConfigError, match="ascend"):
        LatencyFaultTolerance((5, 1), (1, 2))


def test_pick_one_at_least_takes_the_better_half_in_turn():
    clock = FakeClock()
    faults = LatencyFaultTolerance(clock=clock, rng=random.Random(7))
    assert faults.pick_one_at_least() is None
    faults.update("only", 5000)
    assert faults.pick_one_at_least() == "only"  # half of one is zero: item 0
    faults.remove("only")
    # all unavailable; sorted by latency: a (600), b (1500), c (2500), d (16000)
    for name, latency in (("d", 16000), ("b", 1500), ("c", 2500), ("a", 600)):
        faults.update(name, latency)
    picks = {faults.pick_one_at_least() for _ in range(20)}
    assert picks == {"a", "b"}
    # an available broker sorts first whatever its latency
    clock.now += 30000  # a's 30 s are over, the others are still out
    assert faults.is_available("a") and not faults.is_available("b")
    faults.update("c", 2500)
    clock.now += 1
    seen = [faults.pick_one_at_least() for _ in range(4)]
    assert set(seen) == {"a", "b"} and seen[0] != seen[1]  # alternates over the half


def test_selection_without_faults_is_round_robin_and_avoids_the_last_broker():
    qs = queues(("broker-a", 2), ("broker-b", 2))
    nxt = counter(5)
    picked = [select_one_message_queue(qs, None, nxt) for _ in range(8)]
    assert picked == [qs[(5 + i) % 4] for i in range(8)]
    # retry after broker-a failed: the first position on another broker
    nxt = counter(0)  # positions 0, 1 are broker-a, 2 is broker-b
    assert select_one_message_queue(qs, "broker-a", nxt) == qs[2]
    # a single broker: plain round robin even on a retry
    single = queues(("broker-a", 3))
    nxt = counter(0)
    assert select_one_message_queue(single, "broker-a", nxt) == single[0]


def test_selection_with_faults_skips_unavailable_brokers():
    clock = FakeClock()
    faults = LatencyFaultTolerance(clock=clock)
    qs = queues(("broker-a", 2), ("broker-b", 2))
    faults.update("broker-a", 0, isolation=True)
    nxt = counter(0)
    picked = {select_one_message_queue(qs, None, nxt, faults) for _ in range(6)}
    assert {mq.broker_name for mq in picked} == {"broker-b"}
    assert picked == set(qs[2:])  # still round robin over broker-b's queues
    # the last broker is not a filter on this path (RocketMQ 4.9)
    nxt = counter(2)
    assert select_one_message_queue(qs, "broker-b", nxt, faults) == qs[2]
    clock.now += 600000
    nxt = counter(0)
    assert select_one_message_queue(qs, None, nxt, faults) == qs[0]


def test_selection_with_every_broker_out_picks_one_at_least():
    clock = FakeClock()
    faults = LatencyFaultTolerance(clock=clock, rng=random.Random(1))
    qs = queues(("broker-a", 2), ("broker-b", 3))
    faults.update("broker-a", 20000)  # both out; broker-b has the lower latency
    faults.update("broker-b", 700)
    nxt = counter(0)
    # the N tries use one index; then one for selectOneMessageQueue(), one for the queue id
    assert select_one_message_queue(qs, None, nxt, faults) == MessageQueue("T", "broker-b", 2)
    assert nxt() == 3


def test_a_picked_broker_without_queues_is_forgotten():
    clock = FakeClock()
    faults = LatencyFaultTolerance(clock=clock)
    qs = queues(("broker-a", 2))
    faults.update("broker-a", 5, isolation=True)
    faults.update("gone", 1, isolation=True)  # the best of the two, but not in the route
    nxt = counter(0)
    assert select_one_message_queue(qs, None, nxt, faults) == qs[1]  # plain round robin
    assert {i.name for i in faults.items()} == {"broker-a"}
