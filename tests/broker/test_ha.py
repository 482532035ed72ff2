"""Master/slave replication with real processes: a namesrv, a master and a slave broker on
separate stores, crashed with SIGKILL, checked by comparing their files."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import struct
import time

import pytest
from waiting import wait_for

from e2e_helpers import cluster, free_port, pull_all, shm_entries, shmq
from shmq import Message, Producer
from shmq.client.types import SendStatus
from shmq.errors import ResponseError
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RequestCode, ResponseCode
from spec_decoder import read_consume_queue

TOPIC = "HaTopic"
SLAVE = {"brokerName": "broker-a", "brokerId": 1, "brokerRole": "SLAVE"}


def ha_status(c, name: str) -> dict:
    with RemotingClient() as client:
        _, status = client.invoke_json(c.brokers[name].address, RequestCode.GET_BROKER_HA_STATUS)
    return status


def caught_up(c) -> int:
    """Until the slave's whole-record write offset equals the master's and both brokers
    dispatched everything; that offset."""

    def same():
        master, slave = c.runtime_info(), c.runtime_info("slave")
        end = master["write_offset"]
        offsets = (master["dispatched_offset"], slave["write_offset"], slave["dispatched_offset"])
        return end if offsets == (end, end, end) else 0

    return wait_for(same, what="the slave to catch up")


def commitlog_bytes(store: str, end: int) -> bytes:
    directory = os.path.join(store, "commitlog")
    data = bytearray()
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), "rb") as f:
            data += f.read()
    return bytes(data[:end])


def assert_replica(c, end: int) -> None:
    """The slave's CommitLog equals the master's up to ``end`` and its consume queues point
    at the same messages."""
    assert commitlog_bytes(c.brokers["slave"].store, end) == commitlog_bytes(c.store, end)
    for qid in range(2):
        master = read_consume_queue(c.store, TOPIC, qid)
        slave = read_consume_queue(c.brokers["slave"].store, TOPIC, qid)
        assert master and slave == master


def sigkill_broker(c, name: str) -> None:
    """SIGKILL the broker's supervisor and every agent process (no clean stop at all)."""
    agents = c.runtime_info(name)["agents"]
    proc = c.brokers[name].proc
    proc.kill()
    for agent in agents.values():
        if agent["pid"]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(agent["pid"], signal.SIGKILL)
    proc.wait(10)
    c.procs.remove(proc)
    c.brokers[name].proc = None


def read_log(tmp_path, name: str) -> str:
    with open(os.path.join(str(tmp_path), name)) as f:
        return f.read()


def send_many(producer: Producer, count: int, tag: str) -> list:
    return [producer.send(Message(TOPIC, f"{tag}-{i}".encode() * 120)) for i in range(count)]


@pytest.mark.slow
def test_async_master_slave_replica_is_byte_identical_and_survives_sigkill(tmp_path):
    before = shm_entries()
    with cluster(tmp_path, brokerRole="ASYNC_MASTER", haListenPort=free_port()) as c:
        c.create_topic(TOPIC, 2)
        c.add_broker("slave", **SLAVE)
        connected(c)  # before the sends: a slave that connects later starts at the last file
        with Producer("ha-p", c.namesrv) as producer:
            sent = send_many(producer, 1500, "a")  # ~1.2 MB: the CommitLog rolls a file
            assert {r.send_status for r in sent} == {SendStatus.SEND_OK}
            end = caught_up(c)
            assert end > 1 << 20
            assert_replica(c, end)
            status = ha_status(c, "broker-a")
            assert [s["inSync"] for s in status["slaves"]] == [True]
            assert status["slaves"][0]["ackOffset"] == end
            cli = shmq("admin", "ha-status", "-n", c.namesrv, "--json")
            assert cli.returncode == 0, cli.stderr
            roles = {(b["brokerId"], b["brokerRole"]) for b in json.loads(cli.stdout)}
            assert roles == {(0, "ASYNC_MASTER"), (1, "SLAVE")}

            # the master's HA port takes garbage and a slave ahead of it without harm
            port = status["haPort"]
            for bad in (struct.pack(">q", -8), struct.pack(">q", end + 4096)):
                with socket.create_connection(("127.0.0.1", port)) as s:
                    s.sendall(bad)
                    s.settimeout(5)
                    assert s.recv(100) == b""  # the master closed it
            assert producer.send(Message(TOPIC, b"still served")).send_status == SendStatus.SEND_OK

            sigkill_broker(c, "slave")
            send_many(producer, 300, "b")  # written while the slave is down
            c.start_broker("slave")
            end = caught_up(c)
            assert_replica(c, end)
        slave_log = read_log(tmp_path, "slave.log")
        resumed = re.findall(r"connected to the master's HA service \S+ at offset (\d+)", slave_log)
        assert int(resumed[-1]) > 0  # it caught up from its own max offset
        master_log = read_log(tmp_path, "broker.log")
        assert "negative offset" in master_log and "is ahead of the master's" in master_log
    assert shm_entries() <= before


def agent_pid(c, name: str, kind: str) -> int:
    return wait_for(lambda: c.runtime_info(name)["agents"][kind]["pid"], what=f"{kind} pid")


def connected(c) -> None:
    wait_for(lambda: c.runtime_info()["ha_slaves"] == 1, what="the slave to connect")


def reconnected(c, tmp_path, ha_pid: int) -> None:
    """The slave's first report reached the master's HA agent ``ha_pid`` (a restarted one:
    the counters its predecessor published, SIGKILLed, still say a slave is connected and
    in sync until the new agent's first pass) and the slave has acknowledged all."""
    wait_for(
        lambda: any(
            f"shmq.ha[{ha_pid}]" in line and " reports " in line
            for line in read_log(tmp_path, "broker.log").splitlines()
        ),
        what="the slave to report to the restarted HA agent",
    )

    def caught_up() -> bool:
        info = c.runtime_info()
        return info["ha_slaves"] == 1 and info["confirmed_offset"] >= info["write_offset"]

    wait_for(caught_up, what="the slave to catch up")


@pytest.mark.slow
def test_sync_master_acks_only_what_the_slave_holds(tmp_path):
    before = shm_entries()
    ha = free_port()  # listenPort + 1 may be an ephemeral port in use by the time of a restart
    with cluster(tmp_path, brokerRole="SYNC_MASTER", syncFlushTimeout=1000, haListenPort=ha) as c:
        c.create_topic(TOPIC, 2)
        with Producer("ha-sync", c.namesrv, send_timeout=10) as producer:
            # no slave: SLAVE_NOT_AVAILABLE at once, never SEND_OK
            started = time.monotonic()
            assert producer.send(Message(TOPIC, b"alone")).send_status == (
                SendStatus.SLAVE_NOT_AVAILABLE
            )
            assert time.monotonic() - started < 1.0

            c.add_broker("slave", **SLAVE)
            connected(c)
            assert producer.send(Message(TOPIC, b"paired")).send_status == SendStatus.SEND_OK

            # a slave that does not acknowledge: FLUSH_SLAVE_TIMEOUT after syncFlushTimeout
            slave_ha = agent_pid(c, "slave", "ha")
            os.kill(slave_ha, signal.SIGSTOP)
            try:
                started = time.monotonic()
                status = producer.send(Message(TOPIC, b"unacked")).send_status
                waited = time.monotonic() - started
            finally:
                os.kill(slave_ha, signal.SIGCONT)
            assert status == SendStatus.FLUSH_SLAVE_TIMEOUT
            assert 0.9 < waited < 3.0

            # the master's HA agent SIGKILLed alone (the slave held back meanwhile): at once
            # no slave counts, so a send is SLAVE_NOT_AVAILABLE without waiting for an ack
            # from the dead agent's slave; the agent is restarted and replication resumes
            master_ha = agent_pid(c, "broker-a", "ha")
            os.kill(slave_ha, signal.SIGSTOP)
            try:
                os.kill(master_ha, signal.SIGKILL)
                wait_for(
                    lambda: c.runtime_info()["agents"]["ha"]["restarts"] == 1,
                    what="the supervisor to see the HA agent's death",
                )
                started = time.monotonic()
                status = producer.send(Message(TOPIC, b"slave gone")).send_status
                waited = time.monotonic() - started
            finally:
                os.kill(slave_ha, signal.SIGCONT)
            assert (status, waited < 0.9) == (SendStatus.SLAVE_NOT_AVAILABLE, True)
            restarted = wait_for(
                lambda: (pid := agent_pid(c, "broker-a", "ha")) != master_ha and pid,
                what="a restart",
            )
            reconnected(c, tmp_path, restarted)
            assert producer.send(Message(TOPIC, b"resumed")).send_status == SendStatus.SEND_OK

            # a run of acked sends (sync, async, bulk), then the master dies at once
            acked = [f"sync-{i}".encode() for i in range(200)
                     if producer.send(Message(TOPIC, f"sync-{i}".encode())).send_status
                     == SendStatus.SEND_OK]  # fmt: skip
            futures = [(f"async-{i}".encode(),
                        producer.send_async(Message(TOPIC, f"async-{i}".encode())))
                       for i in range(500)]  # fmt: skip
            acked += [body for body, f in futures if f.result(10).send_status == SendStatus.SEND_OK]
            bodies = [f"bulk-{i}".encode() for i in range(2000)]
            if producer.send_bulk(TOPIC, bodies).send_status == SendStatus.SEND_OK:
                acked += bodies
        assert len(acked) >= 2700 - 10
        sigkill_broker(c, "broker-a")

        # every acknowledged message is on the slave; a consumer reads them all from it
        got = pull_all(c.namesrv, "ha-reader", TOPIC, set(acked))
        assert set(acked) <= got
        c.start_broker("broker-a")  # recovers, and removes what the killed one left in /dev/shm
        connected(c)
    assert shm_entries() <= before


@pytest.mark.slow
def test_a_slave_refuses_a_bad_stream_and_keeps_its_store(tmp_path):
    """A fake master sends what a real one never does; each time the slave logs the problem,
    drops the connection and stores nothing of it."""
    before = shm_entries()
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(30)
    fake = f"127.0.0.1:{server.getsockname()[1]}"
    streams = [
        (struct.pack(">qi", -1, 0), "negative offset"),
        (struct.pack(">qi", 12345, 0), "not at a CommitLog file's start"),
        (struct.pack(">qi", 0, (1 << 20) + 8) + bytes((1 << 20) + 8), "crosses the end"),
        (struct.pack(">qi", 0, 100) + bytes(range(100)), None),  # not records: never published
    ]
    with server, cluster(tmp_path, brokerRole="SLAVE", brokerId=1, haMasterAddress=fake) as c:
        for data, problem in streams:
            conn, _ = server.accept()
            with conn:
                conn.settimeout(10)
                assert struct.unpack(">q", conn.recv(8))[0] == 0  # an empty slave reports 0
                conn.sendall(data)
                if problem:
                    assert conn.recv(100) == b""  # the slave hung up
                    wait_for(lambda p=problem: p in read_log(tmp_path, "broker.log"), what=problem)
                else:
                    assert struct.unpack(">q", conn.recv(8))[0] == 100  # received, reported
        assert c.runtime_info()["write_offset"] == 0
        with RemotingClient() as client, pytest.raises(ResponseError) as refused:
            client.invoke_json(
                c.main.address, RequestCode.REGISTER_PRODUCER, {"pid": 1, "group": "g"}
            )
        assert refused.value.code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert "slave" in str(refused.value)
    assert shm_entries() <= before
