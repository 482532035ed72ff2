"""TLS between real processes: a namesrv in each mode, a broker that enforces TLS serving
sends, pulls and admin requests of TLS clients only, and a slave replicating from its
master over TLS."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from waiting import wait_for

from e2e_helpers import cluster, free_port, shm_entries, spawn, stop, tls_certs, wait_port
from shmq import Message, Producer, PullConsumer
from shmq.client.types import SendStatus
from shmq.errors import RemotingConnectError
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RequestCode
from shmq.remoting.security.tls import TlsOptions

TOPIC = "TlsTopic"


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> tuple[str, str]:
    return tls_certs(str(tmp_path_factory.mktemp("certs")))


def namesrv(tmp_path, *args: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [sys.executable, "-m", "shmq_cli.main", "namesrv", "--port", str(port), *args]
    proc = spawn(cmd, os.path.join(str(tmp_path), f"namesrv-{port}.log"))
    wait_port(port, proc)
    return proc, f"127.0.0.1:{port}"


def namesrv_args(mode: str, certs: tuple[str, str]) -> tuple[str, ...]:
    return ("--tls-server-mode", mode, "--tls-server-cert-path", certs[0],
            "--tls-server-key-path", certs[1])  # fmt: skip


def served(addr: str, tls: TlsOptions | None) -> bool:
    """Whether ``addr`` answers a request over TLS (``tls``) or plain TCP."""
    with RemotingClient(tls=tls) as client:
        try:
            client.invoke_json(addr, RequestCode.GET_BROKER_CLUSTER_INFO)
        except RemotingConnectError:
            return False
    return True


@pytest.mark.parametrize(
    ("mode", "plain", "tls"),
    [("permissive", True, True), ("enforcing", False, True), ("disabled", True, False)],
)
def test_a_namesrv_serves_what_its_mode_says(tmp_path, certs, mode, plain, tls):
    proc, addr = namesrv(tmp_path, *namesrv_args(mode, certs))
    try:
        assert served(addr, None) is plain
        assert served(addr, TlsOptions(ca_file=certs[0])) is tls
    finally:
        assert stop(proc) == 0


def test_an_enforcing_broker_serves_tls_clients_only(tmp_path, certs):
    tls = TlsOptions(ca_file=certs[0])
    before = shm_entries()
    conf = {"tlsServerMode": "enforcing", "tlsServerCertPath": certs[0],
            "tlsServerKeyPath": certs[1], "useTLS": "true"}  # fmt: skip
    with cluster(tmp_path, namesrv_args("enforcing", certs), tls=tls, **conf) as c:
        assert not served(c.main.address, None)
        assert not served(c.namesrv, None)
        c.create_topic(TOPIC, 2)
        # a client that never finishes its handshake, and one that never speaks, hold no one
        stalled = socket.create_connection(("127.0.0.1", c.broker_port))
        stalled.sendall(b"\x16\x03\x01")
        silent = socket.create_connection(("127.0.0.1", c.broker_port))
        with Producer("tls-p", c.namesrv, transport="tcp", tls=tls) as producer:
            results = [producer.send(Message(TOPIC, f"m{i}".encode())) for i in range(20)]
            assert {r.send_status for r in results} == {SendStatus.SEND_OK}
        got: set[bytes] = set()
        with PullConsumer("tls-c", c.namesrv, transport="tcp", tls=tls,
                          consume_from_where="FIRST_OFFSET") as consumer:  # fmt: skip
            consumer.subscribe(TOPIC)
            consumer.start()

            def all_came() -> bool:
                got.update(m.body for m in consumer.poll(0.5))
                return len(got) == 20

            wait_for(all_came, timeout=60, interval=0, what="20 messages pulled over TLS")
        assert c.runtime_info()["write_offset"] > 0
        stalled.close()
        silent.close()
    assert shm_entries() <= before


def test_a_slave_replicates_from_its_master_over_tls(tmp_path, certs):
    tls = TlsOptions(ca_file=certs[0])
    before = shm_entries()
    conf = {"tlsServerMode": "enforcing", "tlsServerCertPath": certs[0],
            "tlsServerKeyPath": certs[1], "useTLS": "true", "brokerRole": "ASYNC_MASTER",
            "haListenPort": free_port()}  # fmt: skip
    with cluster(tmp_path, namesrv_args("permissive", certs), tls=tls, **conf) as c:
        c.create_topic(TOPIC, 2)
        c.add_broker("slave", brokerName="broker-a", brokerId=1, brokerRole="SLAVE")
        wait_for(lambda: c.runtime_info()["ha_slaves"] == 1, what="the slave to connect")
        with Producer("tls-ha", c.namesrv, tls=tls) as producer:
            for i in range(300):
                assert producer.send(Message(TOPIC, b"x" * 1000 + str(i).encode())).send_status \
                    == SendStatus.SEND_OK  # fmt: skip

        def caught_up() -> bool:
            master, slave = c.runtime_info(), c.runtime_info("slave")
            return master["write_offset"] == slave["write_offset"] > 300_000

        wait_for(caught_up, what="the slave to catch up over TLS")
        with open(os.path.join(str(tmp_path), "broker.log")) as f:
            assert "speaks TLS" in f.read()
    assert shm_entries() <= before
