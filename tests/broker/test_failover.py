"""Automatic failover (controller mode) with real processes: the master is SIGKILLed, the
controller in the namesrv promotes the in-sync slave, producers follow it, nothing acked is
lost, and the old master rejoins as a slave of the new one. The group stays SYNC: once the
old master caught up it is in sync again, and a second failover back to it loses nothing
acknowledged either."""

from __future__ import annotations

import time

import pytest
from test_ha import TOPIC, commitlog_bytes, ha_status, sigkill_broker, wait_until
from test_slave_reads import topics_of

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
    wait_until(lambda: send_ok(p, first), SWITCH_BOUND_S, "a send to the promoted slave")
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
        wait_until(lambda: c.runtime_info()["ha_slaves"] == 1, what="the slave to connect")
        wait_until(lambda: TOPIC in topics_of(c, "slave"), what="the slave to copy the topic")
        with Producer("fo-p", c.namesrv, send_timeout=3, poll_name_server_interval=1.0) as p:
            acked = [f"before-{i}".encode() for i in range(300)]
            assert all(send_ok(p, body) for body in acked)
            wait_until(lambda: not controller_state(c)["alone"], what="the slave in sync")

            fail_over(c, p, "broker-a", acked, "the first switch")
            info = c.runtime_info("slave")  # a SYNC group's promoted master stays SYNC,
            assert (info["broker_role"], info["broker_id"]) == ("SYNC_MASTER", 0)
            assert controller_state(c)["alone"]  # acknowledging alone, recorded so
            assert ha_status(c, "slave")["ackAlone"]

            got = pull_all(c.namesrv, "fo-reader", TOPIC, set(acked))
            assert set(acked) <= got

            c.start_broker("broker-a")  # asks the controller: a slave now, truncated, following
            old = wait_until(
                lambda: c.runtime_info()["broker_role"] == "SLAVE" and c.runtime_info(),
                what="the old master to rejoin as a slave",
            )
            assert old["broker_id"] > 0
            status = wait_until(lambda: (s := ha_status(c, "slave"))["slaves"] and s,
                                what="the old master to connect as a slave")  # fmt: skip
            assert len(status["slaves"]) == 1

            def same_end():
                new, old = c.runtime_info("slave"), c.runtime_info()
                end = new["write_offset"]
                return end if old["write_offset"] == end else 0

            end = wait_until(same_end, what="the old master to catch up")
            assert commitlog_bytes(c.store, end) == commitlog_bytes(c.brokers["slave"].store, end)

            # caught up, the old master is in sync again: the new master's sends wait for
            # its acks, and it is electable; a second failover back to it loses nothing
            wait_until(lambda: not controller_state(c)["alone"], what="the old master in sync")
            assert not ha_status(c, "slave")["ackAlone"]
            more = [f"in sync again {i}".encode() for i in range(100)]
            assert all(send_ok(p, body) for body in more)
            acked += more
            fail_over(c, p, "slave", acked, "the second switch")
            assert c.runtime_info()["broker_role"] == "SYNC_MASTER"
        assert set(acked) <= pull_all(c.namesrv, "fo-reader-2", TOPIC, set(acked))
        c.start_broker("slave")  # rejoins in turn (and removes what the killed one left)
        wait_until(lambda: c.runtime_info("slave")["broker_role"] == "SLAVE",
                   what="the second old master to rejoin as a slave")  # fmt: skip
    assert shm_entries() <= before
