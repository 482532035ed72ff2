"""Fixtures of the broker tests: an in-process supervisor (its agents are real processes)
and a namesrv, stopped and checked for leaked shared memory at teardown."""

from __future__ import annotations

import pytest

from e2e_helpers import shm_entries
from shmq.broker.broker_config import BrokerConfig
from shmq.broker.supervisor import Broker
from shmq.namesrv.server import NameServer


@pytest.fixture
def make_broker(tmp_path):
    started = []
    before = shm_entries()

    def factory(**conf) -> tuple[Broker, str]:
        ns = NameServer("127.0.0.1", 0)
        ns.start()
        cfg = BrokerConfig().replace(
            namesrv_addr=ns.address,
            listen_port=0,
            store_path_root_dir=str(tmp_path / f"store{len(started)}"),
            mapped_file_size_commit_log=1 << 20,
            **conf,
        )
        broker = Broker(cfg)
        started.append((broker, ns))
        broker.start()
        return broker, ns.address

    yield factory
    for broker, ns in started:
        broker.stop()
        ns.stop()
    assert shm_entries() - before == set()
