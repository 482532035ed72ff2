"""``IdleStrategy``: an agent with nothing to do parks unless work has lately come back
sooner than a spin, and stays awake after ``linger`` (a sync sender is about to come back
with its next message, later than the recent gaps would allow a spin)."""

from __future__ import annotations

import os
import time

import pytest

from shmq.ipc.idle import IdleConfig, IdleStrategy
from shmq.ipc.segment import create_semaphore, unlink_semaphore


@pytest.fixture
def sem():
    name = f"/shmq-test-idle-{os.getpid()}"
    sem = create_semaphore(name)
    yield sem
    sem.close()
    unlink_semaphore(name)


def test_an_idle_backoff_agent_parks_after_a_long_gap(sem):
    idle = IdleStrategy(IdleConfig("backoff", spin_us=50, park_us=100), sem)
    idle.idle(0)
    assert idle.parks == 1


def test_after_linger_it_stays_awake_instead_of_parking(sem):
    idle = IdleStrategy(IdleConfig("backoff", spin_us=50, park_us=100, linger_us=1_000_000), sem)
    idle.idle(1)
    idle.linger()
    for _ in range(100):
        idle.idle(0)
    assert idle.parks == 0


def test_linger_is_off_at_zero_and_for_the_park_strategy(sem):
    for config in (
        IdleConfig("backoff", spin_us=50, park_us=100, linger_us=0),
        IdleConfig("park", park_us=100, linger_us=1_000_000),
    ):
        idle = IdleStrategy(config, sem)
        idle.linger()
        idle.idle(0)
        assert idle.parks == 1, config


def test_a_pass_of_a_few_records_sleeps_before_the_next_one(sem):
    """``batch_linger_us``: a pass of ``batch_min`` .. ``batch_max`` - 1 records sleeps,
    unparked (nobody posts it), so the next pass takes what accumulated."""
    idle = IdleStrategy(IdleConfig("backoff", batch_linger_us=20_000, batch_min=4), sem)
    for work, slept in ((1, False), (3, False), (4, True), (4095, True), (4096, False)):
        before = idle.batch_lingers
        start = time.perf_counter()
        idle.idle(work)
        assert idle.batch_lingers - before == slept, work
        if slept:
            assert time.perf_counter() - start >= 0.02  # it slept the linger
    assert idle.parks == 0


def test_a_pass_that_answered_a_waiting_client_never_sleeps(sem):
    idle = IdleStrategy(IdleConfig("backoff", batch_linger_us=1_000_000, batch_min=2), sem)
    idle.linger()  # the pass answered a sync send
    idle.idle(100)
    assert idle.batch_lingers == 0
    idle.idle(100)  # the next pass answered nobody waiting: it sleeps (1 s)
    assert idle.batch_lingers == 1


def test_batch_linger_is_off_by_default(sem):
    idle = IdleStrategy(IdleConfig("backoff"), sem)
    idle.idle(100)
    assert idle.batch_lingers == 0


def test_linger_only_while_answered_senders_come_back_within_it(sem):
    """An occasional sync send costs no lingering: once the answers lately came further
    apart than ``linger_us``, the agent parks after one; quick returns bring it back."""
    idle = IdleStrategy(IdleConfig("backoff", spin_us=0, park_us=100, linger_us=50_000), sem)
    for _ in range(5):  # a sender that comes back 200 ms after each answer
        idle.linger()
        time.sleep(0.2)
    idle.idle(1)
    idle.linger()
    idle.idle(0)
    assert idle.parks == 1  # the gaps averaged above 50 ms: no linger
    for _ in range(200):  # one that comes back at once
        idle.linger()
    parks = idle.parks
    for _ in range(10):
        idle.idle(0)
    assert idle.parks == parks  # lingering again
