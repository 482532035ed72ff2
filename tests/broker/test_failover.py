"""Automatic failover (controller mode) with real processes: the master is SIGKILLed, the
controller in the namesrv promotes the in-sync slave, producers follow it, nothing acked is
lost, and the old master rejoins as a slave of the new one."""

from __future__ import annotations

import time

import pytest
from test_ha import TOPIC, commitlog_bytes, ha_status, sigkill_broker, wait_until
from test_slave_reads import topics_of

from e2e_helpers import cluster, free_port, pull_all, shm_entries
from shmq import Message, Producer
from shmq.client.types import SendStatus
from shmq.errors import ShmqError

CONTROLLER = ("--enable-controller-in-namesrv", "--controller-heartbeat-timeout-ms", "5000",
              "--scan-interval-ms", "500")  # fmt: skip
SWITCH_BOUND_S = 60.0  # a generous bound, not a performance claim


def send_ok(producer: Producer, body: bytes) -> bool:
    try:
        return producer.send(Message(TOPIC, body)).send_status == SendStatus.SEND_OK
    except ShmqError:
        return False


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

            sigkill_broker(c, "broker-a")
            started = time.monotonic()
            wait_until(lambda: send_ok(p, b"first after the switch"), SWITCH_BOUND_S,
                       "a send to the promoted slave")  # fmt: skip
            switch_s = time.monotonic() - started
            print(f"failover: sends succeed again {switch_s:.2f} s after the master died")
            acked.append(b"first after the switch")
            after = [f"after-{i}".encode() for i in range(100)]
            assert all(send_ok(p, body) for body in after)
            acked += after
        info = c.runtime_info("slave")
        assert (info["broker_role"], info["broker_id"]) == ("ASYNC_MASTER", 0)

        got = pull_all(c.namesrv, "fo-reader", TOPIC, set(acked))
        assert set(acked) <= got

        c.start_broker("broker-a")  # asks the controller: a slave now, truncated, following
        old = wait_until(lambda: c.runtime_info()["broker_role"] == "SLAVE" and c.runtime_info(),
                         what="the old master to rejoin as a slave")  # fmt: skip
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
    assert shm_entries() <= before
