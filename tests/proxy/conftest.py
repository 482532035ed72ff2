"""A broker with its gRPC proxy, one per test module (each test uses topics and groups of
its own), and gRPC clients of it that are closed at teardown."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from grpc_client import Client

from e2e_helpers import embedded
from shmq import EmbeddedBroker

TOPICS = {"Normal": 4, "Fifo": 4, "Delay": 2, "Trans": 2, "Batch": 2, "Recv": 2, "Ack": 1,
          "Invisible": 1, "Expiry": 1, "Dlq": 1, "Tags": 1, "Never": 1, "FifoRecv": 2,
          "Admin": 1, "Sql": 2}  # fmt: skip


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[EmbeddedBroker]:
    """A fresh broker with its gRPC proxy."""
    conf = {"proxy_enable": True, "grpc_server_port": 0, "transaction_time_out": 1000,
            "transaction_check_interval": 1000, "enable_property_filter": True}  # fmt: skip
    with embedded(str(tmp_path_factory.mktemp("proxy") / "store"), **conf) as mq:
        for topic, queues in TOPICS.items():
            mq.create_topic(topic, queues)
        yield mq


@pytest.fixture(scope="module")
def proxy(broker) -> str:
    """The ``ip:port`` of the broker's proxy."""
    return broker.grpc_address


@pytest.fixture
def client(proxy) -> Iterator:
    """``client()`` makes a gRPC client (a client id of its own unless given)."""
    with contextlib.ExitStack() as stack:

        def make(client_id: str | None = None) -> Client:
            made = Client(proxy, client_id)
            stack.callback(made.close)
            return made

        yield make
