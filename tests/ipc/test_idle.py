"""``IdleStrategy``: an agent with nothing to do parks unless work has lately come back
sooner than a spin, and stays awake after ``linger`` (a sync sender is about to come back
with its next message, later than the recent gaps would allow a spin)."""

from __future__ import annotations

import os

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
