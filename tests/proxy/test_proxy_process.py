"""The gRPC proxy as a process of the broker's group: a port it cannot take fails the
broker's start with the reason (and leaves nothing behind), a proxy that dies is restarted
on the same port, and a broker stopped with its proxy leaves no process."""

from __future__ import annotations

import os
import signal
import socket

import pytest
from grpc_client import Client
from waiting import wait_for

from e2e_helpers import embedded, running
from shmq.errors import ShmqError
from shmq.proxy.v2 import definition_pb2 as pb
from shmq.proxy.v2 import service_pb2 as spb


def route(address: str, topic: str) -> int:
    c = Client(address)
    try:
        resp = c.call("QueryRoute", spb.QueryRouteRequest(topic=pb.Resource(name=topic)),
                      timeout=10)  # fmt: skip
        return resp.status.code
    finally:
        c.close()


def test_a_taken_port_fails_the_start_with_the_reason(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        store = str(tmp_path / "store")
        with (
            pytest.raises(ShmqError, match=f"127.0.0.1:{port}.*grpcServerPort"),
            embedded(store, proxy_enable=True, grpc_server_port=port),
        ):
            pass


def test_a_dead_proxy_is_restarted_on_its_port(tmp_path):
    with embedded(str(tmp_path / "store"), proxy_enable=True, grpc_server_port=0) as mq:
        mq.create_topic("Up", 1)
        address = mq.grpc_address
        assert route(address, "Up") == pb.Code.OK
        first = mq.broker.proxy.proc.pid
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: mq.broker.proxy.proc is not None and mq.broker.proxy.proc.pid != first
                 and mq.broker.proxy.address == address, what="a new proxy")  # fmt: skip
        assert wait_for(lambda: route(address, "Up") == pb.Code.OK, ignore=Exception,
                        what="the restarted proxy answering")  # fmt: skip
        second = mq.broker.proxy.proc.pid
    assert not running(second)
