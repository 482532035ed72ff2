"""Fixtures of the broker tests: an in-process supervisor (its agents are real processes)
and a namesrv, stopped and checked for leaked shared memory at teardown."""

from __future__ import annotations

import pytest

from e2e_helpers import shm_entries
from shmq.broker.broker_config import BrokerConfig
from shmq.broker.supervisor import Broker
from shmq.namesrv.server import NameServer


def start_broker(root: str, **conf) -> tuple[Broker, NameServer]:
    """A namesrv and a broker on ``root`` with 1 MiB CommitLog files."""
    ns = NameServer("127.0.0.1", 0)
    ns.start()
    cfg = BrokerConfig().replace(
        namesrv_addr=ns.address,
        listen_port=0,
        store_path_root_dir=root,
        mapped_file_size_commit_log=1 << 20,
        **conf,
    )
    broker = Broker(cfg)
    try:
        broker.start()
    except BaseException:
        ns.stop()
        raise
    return broker, ns


@pytest.fixture
def make_broker(tmp_path):
    started = []
    before = shm_entries()

    def factory(**conf) -> tuple[Broker, str]:
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
