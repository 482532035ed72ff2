"""Two hosts simulated: a producer and a consumer in a process with its own /dev/shm (so its
host id differs from the broker's and ``transport="auto"`` must take TCP), on loopback, and
in a network namespace reaching the broker over a veth pair. The data goes over TCP: the
clients chose TCP for the broker, and the broker never gave the process a ring slot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest
from waiting import wait_for

from e2e_helpers import ROOT
from shmq.client.admin.admin import Admin
from shmq.errors import NoRouteError

CHILD = os.path.join(os.path.dirname(__file__), "other_host.py")
N = 40


def private_shm(cmd: list[str]) -> list[str]:
    """``cmd`` in a mount namespace with its own /dev/shm (a user namespace when not root)."""
    shell = 'mount -t tmpfs tmpfs /dev/shm && exec "$@"'
    flags = ["-m", "--propagation", "private"] if os.geteuid() == 0 else ["-Urm"]
    return ["unshare", *flags, "sh", "-c", shell, "sh", *cmd]


def can_unshare() -> str | None:
    probe = subprocess.run(private_shm(["true"]), capture_output=True, text=True)
    return None if probe.returncode == 0 else probe.stderr.strip() or "unshare failed"


def run_far_clients(make_broker, ip: str, prefix: list[str]) -> None:
    broker, namesrv = make_broker(host=ip)
    with Admin(namesrv) as admin:
        admin.update_topic("FarTopic", read_queue_nums=2, write_queue_nums=2)
        wait_for(lambda: admin.topic_route("FarTopic"), ignore=NoRouteError,
                 what="a route for FarTopic")  # fmt: skip
    env = {**os.environ, "PYTHONPATH": ROOT}
    done = subprocess.run([*prefix, *private_shm([sys.executable, CHILD, namesrv,
                                                  "FarTopic", str(N)])],
                          capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["producer_tcp"] == {broker.address: True}
    assert seen["consumer_tcp"] == {broker.address: True}
    assert seen["bodies"] == sorted(f"far-{i}" for i in range(N))
    groups = {slot["group"] for slot in broker.clients.stats()}  # the broker's own agents'
    assert not groups & {"other-host-producer", "other-host-consumer"}  # no shm slot


def test_other_host_on_loopback_goes_over_tcp(make_broker):
    problem = can_unshare()
    if problem:
        pytest.skip(f"no private /dev/shm for the other host: {problem}")
    run_far_clients(make_broker, "127.0.0.1", [])


@pytest.fixture
def network_namespace():
    """A network namespace joined to this one by a veth pair: ``(its name, this side's
    address)``; removed at teardown, after the broker (a fixture asked for later) stopped."""
    if os.geteuid() != 0:
        pytest.skip("a network namespace with a veth pair needs root")
    tag = uuid.uuid4().hex[:6]
    netns, host_if, far_if = f"shmq{tag}", f"vsh{tag}a", f"vsh{tag}b"
    host_ip, far_ip = "10.213.77.1", "10.213.77.2"
    setup = [
        ["ip", "netns", "add", netns],
        ["ip", "link", "add", host_if, "type", "veth", "peer", "name", far_if],
        ["ip", "link", "set", far_if, "netns", netns],
        ["ip", "addr", "add", f"{host_ip}/24", "dev", host_if],
        ["ip", "link", "set", host_if, "up"],
        ["ip", "netns", "exec", netns, "ip", "addr", "add", f"{far_ip}/24", "dev", far_if],
        ["ip", "netns", "exec", netns, "ip", "link", "set", far_if, "up"],
        ["ip", "netns", "exec", netns, "ip", "link", "set", "lo", "up"],
    ]
    try:
        for cmd in setup:
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                pytest.skip(f"no network namespace here: {' '.join(cmd)}: {done.stderr.strip()}")
        yield netns, host_ip
    finally:
        subprocess.run(["ip", "link", "del", host_if], capture_output=True)
        subprocess.run(["ip", "netns", "del", netns], capture_output=True)


def test_other_host_in_a_network_namespace_goes_over_tcp(network_namespace, make_broker):
    netns, host_ip = network_namespace
    run_far_clients(make_broker, host_ip, ["ip", "netns", "exec", netns])
