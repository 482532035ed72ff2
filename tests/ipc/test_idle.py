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


def test_an_idle_agent_parks_longer_and_longer_and_work_brings_it_back(sem):
    """``park_max_us``: each park that found nothing doubles the next one's bound, up to
    the maximum; the first work restores ``park_us``. A post still ends a park at once."""
    idle = IdleStrategy(IdleConfig("park", park_us=1_000, park_max_us=8_000), sem)
    took = []
    for _ in range(6):
        start = time.perf_counter()
        idle.idle(0)
        took.append(time.perf_counter() - start)
    bounds_ms = (1, 2, 4, 8, 8, 8)
    assert all(t >= ms / 1e3 for t, ms in zip(took, bounds_ms, strict=True)), took
    assert idle._park_s == 0.008  # capped
    idle.idle(1)  # work: back to 1 ms
    idle.idle(0)
    assert idle._park_s == 0.002  # that park was 1 ms, the next 2 ms
    sem.release()  # a post ends the longest park at once
    idle = IdleStrategy(IdleConfig("park", park_us=1_000_000, park_max_us=8_000_000), sem)
    start = time.perf_counter()
    idle.idle(0)
    assert time.perf_counter() - start < 0.5


def test_without_park_max_a_park_keeps_its_bound(sem):
    idle = IdleStrategy(IdleConfig("park", park_us=1_000), sem)
    for _ in range(5):
        idle.idle(0)
    assert idle._park_s == 0.001


def test_after_work_it_parks_at_once_when_the_next_pass_would_park(sem):
    """A pass with work is followed by a park, not by an empty pass, when the strategy
    would park after that pass anyway: the parked flag is set before ``has_work`` looks (a
    waker that published meanwhile posts, or ``has_work`` sees it). Without the flag or
    ``has_work``, or while work comes back sooner than a spin, the empty pass stays."""
    flags: list[bool] = []
    idle = IdleStrategy(IdleConfig("backoff", spin_us=50, park_us=100), sem, flags.append)
    idle._gap = 1.0  # work has lately come back after long gaps (a paced stream)
    idle.idle(1, lambda: False)
    assert (idle.parks, flags) == (1, [True, False])
    idle.idle(1, lambda: True)  # something came meanwhile: the next pass, not a park
    assert idle.parks == 1 and flags[-1] is False
    idle.idle(1)  # no has_work: the next pass decides
    assert idle.parks == 1
    spinning = IdleStrategy(IdleConfig("backoff", spin_us=50, park_us=100), sem, flags.append)
    spinning._gap = 10e-6  # work keeps coming back within a spin
    spinning.idle(1, lambda: False)
    assert spinning.parks == 0
    unflagged = IdleStrategy(IdleConfig("park", park_us=100), sem)
    unflagged.idle(1, lambda: False)
    assert unflagged.parks == 0
    parking = IdleStrategy(IdleConfig("park", park_us=100), sem, flags.append)
    parking.idle(1, lambda: False)
    assert parking.parks == 1
