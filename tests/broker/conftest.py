"""Fixtures of the broker tests: an in-process supervisor (its agents are real processes)
and a namesrv, stopped and checked for leaked shared memory at teardown."""

from __future__ import annotations

import pytest

from e2e_helpers import shm_entries, start_broker


@pytest.fixture
def make_broker(tmp_path):
    started = []
    before = shm_entries()

    def factory(**conf) -> tuple:
        broker, ns = start_broker(str(tmp_path / f"store{len(started)}"), **conf)
        started.append((broker, ns))
        return broker, ns.address

    yield factory
    for broker, ns in started:
        broker.stop()
        ns.stop()
    assert shm_entries() - before == set()


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    """One broker for a whole test module (each test uses topics of its own): a broker
    start costs seconds."""
    before = shm_entries()
    broker, ns = start_broker(str(tmp_path_factory.mktemp("shared") / "store"))
    yield broker, ns.address
    broker.stop()
    ns.stop()
    assert shm_entries() - before == set()
