"""Automatic failover (controller mode) with real processes: the master is SIGKILLed, the
controller in the namesrv promotes the in-sync slave, producers follow it, nothing acked is
lost, and the old master rejoins as a slave of the new one. The group stays SYNC: once the
old master caught up it is in sync again, and a second failover back to it loses nothing
acknowledged either."""

from __future__ import annotations

import os
import signal
import time

import pytest
from test_ha import TOPIC, commitlog_bytes, ha_status, sigkill_broker
from test_slave_reads import topics_of
from waiting import wait_for

from e2e_helpers import cluster, free_port, pull_all, shm_entries
from shmq import Message, Producer
from shmq.client.types import SendStatus
from shmq.errors import ShmqError
from shmq.remoting.client import RemotingClient
from shmq.remoting.codes import RequestCode

CONTROLLER = ("--enable-controller-in-namesrv", "--controller-heartbeat-timeout-ms", "5000",
              "--scan-interval-ms", "500")  # fmt: skip
SWITCH_BOUND_S = 60.0  # a generous bound, not a performance claim


def send_ok(producer: Producer, body: bytes) -> bool:
    try:
        return producer.send(Message(TOPIC, body)).send_status == SendStatus.SEND_OK
    except ShmqError:
        return False


def controller_state(c) -> dict:
    """The controller's record of broker-a (master, role, alone flag, epochs)."""
    with RemotingClient() as client:
        _, body = client.invoke_json(c.namesrv, RequestCode.CONTROLLER_GET_SYNC_STATE_DATA)
    return body["broker-a"]


def fail_over(c, p: Producer, dead: str, acked: list[bytes], label: str) -> None:
    """SIGKILL ``dead`` (the master), wait until sends succeed again, send 100 more."""
    sigkill_broker(c, dead)
    started = time.monotonic()
    first = f"first after {label}".encode()
    wait_for(lambda: send_ok(p, first), timeout=SWITCH_BOUND_S, what="a send to the promoted slave")
    print(f"failover ({label}): sends succeed again {time.monotonic() - started:.2f} s after"
          " the master died")  # fmt: skip
    acked.append(first)
    after = [f"after {label} {i}".encode() for i in range(100)]
    assert all(send_ok(p, body) for body in after)
    acked += after


@pytest.mark.slow
def test_controller_failover_promotes_the_slave_and_the_old_master_rejoins(tmp_path):
    before = shm_entries()
    conf = {"enableControllerMode": "true", "brokerHeartbeatInterval": 500}
    controller = (*CONTROLLER, "--controller-store-path", str(tmp_path / "controller"))
    with cluster(tmp_path, controller, brokerRole="SYNC_MASTER", haListenPort=free_port(),
                 **conf) as c:  # fmt: skip
        c.create_topic(TOPIC, 2)
        c.add_broker("slave", brokerName="broker-a", brokerId=1, brokerRole="SLAVE",
                     haListenPort=free_port())  # fmt: skip
        wait_for(lambda: c.runtime_info()["ha_slaves"] == 1, what="the slave to connect")
        wait_for(lambda: TOPIC in topics_of(c, "slave"), what="the slave to copy the topic")
        with Producer("fo-p", c.namesrv, send_timeout=3, poll_name_server_interval=1.0) as p:
            acked = [f"before-{i}".encode() for i in range(300)]
            assert all(send_ok(p, body) for body in acked)
            wait_for(lambda: not controller_state(c)["alone"], what="the slave in sync")

            fail_over(c, p, "broker-a", acked, "the first switch")
            info = c.runtime_info("slave")  # a SYNC group's promoted master stays SYNC,
            assert (info["broker_role"], info["broker_id"]) == ("SYNC_MASTER", 0)
            assert controller_state(c)["alone"]  # acknowledging alone, recorded so
            assert ha_status(c, "slave")["ackAlone"]

            got = pull_all(c.namesrv, "fo-reader", TOPIC, set(acked))
            assert set(acked) <= got

            c.start_broker("broker-a")  # asks the controller: a slave now, truncated, following
            old = wait_for(
                lambda: c.runtime_info()["broker_role"] == "SLAVE" and c.runtime_info(),
                what="the old master to rejoin as a slave",
            )
            assert old["broker_id"] > 0
            status = wait_for(
                lambda: (s := ha_status(c, "slave"))["slaves"] and s,
                what="the old master to connect as a slave",
            )
            assert len(status["slaves"]) == 1

            def same_end():
                new, old = c.runtime_info("slave"), c.runtime_info()
                end = new["write_offset"]
                return end if old["write_offset"] == end else 0

            end = wait_for(same_end, what="the old master to catch up")
            assert commitlog_bytes(c.store, end) == commitlog_bytes(c.brokers["slave"].store, end)

            # caught up, the old master is in sync again: the new master's sends wait for
            # its acks, and it is electable; a second failover back to it loses nothing
            wait_for(lambda: not controller_state(c)["alone"], what="the old master in sync")
            assert not ha_status(c, "slave")["ackAlone"]
            more = [f"in sync again {i}".encode() for i in range(100)]
            assert all(send_ok(p, body) for body in more)
            acked += more
            fail_over(c, p, "slave", acked, "the second switch")
            assert c.runtime_info()["broker_role"] == "SYNC_MASTER"
        assert set(acked) <= pull_all(c.namesrv, "fo-reader-2", TOPIC, set(acked))
        c.start_broker("slave")  # rejoins in turn (and removes what the killed one left)
        wait_for(
            lambda: c.runtime_info("slave")["broker_role"] == "SLAVE",
            what="the second old master to rejoin as a slave",
        )
    assert shm_entries() <= before


def broker_pids(c, name: str) -> list[int]:
    """The broker's supervisor and agent processes."""
    agents = c.runtime_info(name)["agents"].values()
    return [c.brokers[name].proc.pid] + [a["pid"] for a in agents if a["pid"]]


def signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        os.kill(pid, sig)


@pytest.mark.slow
def test_with_two_slaves_only_a_slave_of_the_sync_state_set_is_elected(tmp_path):
    """A SYNC group with two slaves: sends wait for both (allAckInSyncStateSet). Slave 2 is
    frozen, and once the master closes its silent connection it leaves the set and sends are
    acknowledged with slave 1's acks only. Then the master and slave 1 die: slave 2 is alive
    and at the epoch, but it lacks acknowledged sends, so the controller elects nobody
    (counting in-sync slaves instead of naming them would elect it and lose them). Once slave
    1 is back it is elected, and every acknowledged send is there."""
    before = shm_entries()
    conf = {"enableControllerMode": "true", "brokerHeartbeatInterval": 500,
            "haHousekeepingInterval": 3000, "haSendHeartbeatInterval": 500}  # fmt: skip
    controller = (*CONTROLLER, "--controller-store-path", str(tmp_path / "controller"))
    with cluster(tmp_path, controller, brokerRole="SYNC_MASTER", haListenPort=free_port(),
                 **conf) as c:  # fmt: skip
        c.create_topic(TOPIC, 2)
        for i in (1, 2):
            c.add_broker(f"slave{i}", brokerName="broker-a", brokerId=i, brokerRole="SLAVE",
                         haListenPort=free_port())  # fmt: skip
        slave1, slave2 = c.brokers["slave1"].address, c.brokers["slave2"].address
        wait_for(
            lambda: controller_state(c)["syncStateSet"] == sorted([slave1, slave2]),
            what="both slaves in the sync state set",
        )
        status = ha_status(c, "broker-a")["slaves"]
        assert len(status) == 2 and all(s["inSyncStateSet"] for s in status)
        with Producer("fo2-p", c.namesrv, send_timeout=3, poll_name_server_interval=1.0) as p:
            acked = [f"both-{i}".encode() for i in range(200)]
            assert all(send_ok(p, body) for body in acked)
            frozen = broker_pids(c, "slave2")
            signal_all(frozen, signal.SIGSTOP)
            try:
                wait_for(
                    lambda: controller_state(c)["syncStateSet"] == [slave1],
                    timeout=30,
                    what="the frozen slave out of the sync state set",
                )
                wait_for(lambda: send_ok(p, b"probe"), timeout=30, what="sends acknowledged again")
                more = [f"slave-1-only-{i}".encode() for i in range(200)]
                assert all(send_ok(p, body) for body in more)
                acked += more
                sigkill_broker(c, "broker-a")
                sigkill_broker(c, "slave1")
            finally:
                signal_all(frozen, signal.SIGCONT)
            # the controller finds the master silent: slave 2 is alive, but not a member, so
            # nobody leads (slave 1 may have been elected while its last heartbeat still
            # counted, and then found silent in turn)
            wait_for(lambda: not controller_state(c)["masterAddr"], timeout=30, what="the election")
            time.sleep(2.0)  # a test of absence: several scans later, still nobody
            state = controller_state(c)
            assert state["masterAddr"] == ""
            assert slave2 not in [master for _, _, master in state["epochs"]]
            assert c.runtime_info("slave2")["broker_role"] == "SLAVE"
            c.start_broker("slave1")  # a member is back: it is elected
            wait_for(
                lambda: c.runtime_info("slave1")["broker_role"] == "SYNC_MASTER",
                timeout=SWITCH_BOUND_S,
                what="slave 1 elected",
            )
            assert controller_state(c)["masterAddr"] == slave1
        assert set(acked) <= pull_all(c.namesrv, "fo2-reader", TOPIC, set(acked))
        c.start_broker("broker-a")  # the old master rejoins (and removes what the dead left)
        wait_for(
            lambda: c.runtime_info()["broker_role"] == "SLAVE",
            timeout=SWITCH_BOUND_S,
            what="the old master to rejoin as a slave",
        )
    assert shm_entries() <= before
