"""The broker's public port under abuse, against a real broker process: announced frame
lengths cost nothing until their bytes arrive, slow frames and idle connections are closed,
the number of connections is capped, and a well-behaved client is answered throughout. The
port is the data server's (a process of the broker's group, ``listening_pid``); what it
relays reaches the control server in the supervisor, whose threads are counted too."""

from __future__ import annotations

import contextlib
import socket
import struct
import time

import pytest
from waiting import wait_for

from e2e_helpers import cluster, listening_pid, shm_entries
from shmq.errors import RemotingError
from shmq.remoting.admin_bodies import runtime_stats
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import MAX_FRAME_SIZE, RemotingCommand, RequestCode

LIMITS = {
    "serverFrameTimeoutSeconds": 2,
    "serverChannelMaxIdleTimeSeconds": 4,
    "serverMaxConnections": 80,
}


@pytest.fixture(scope="module")
def c(tmp_path_factory):
    before = shm_entries()
    with cluster(tmp_path_factory.mktemp("abuse"), **LIMITS) as c:
        yield c
    assert shm_entries() - before == set()


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def connect(c) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", c.broker_port), timeout=10)
    return sock


def closed_by_server(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def answered(c, timeout: float = 3.0) -> bool:
    with RemotingClient(default_timeout=timeout) as client:
        _, info = client.invoke_json(c.main.address, RequestCode.GET_BROKER_RUNTIME_INFO)
    return runtime_stats(info)["broker"] == "broker-a"


def test_announced_lengths_cost_no_memory_and_slow_frames_are_dropped(c):
    assert answered(c)
    pid = listening_pid(c.broker_port)
    before = rss_bytes(pid)
    socks = [connect(c) for _ in range(64)]
    try:
        for s in socks:  # each announces the largest frame, then sends a few bytes only
            s.sendall(struct.pack(">i", MAX_FRAME_SIZE) + b"\0" * 100)
        time.sleep(0.5)  # a test of absence: the server read them all by now, and took no memory
        assert answered(c)
        grown = rss_bytes(pid) - before
        assert grown < 64 << 20, f"64 announced frames grew the broker by {grown >> 20} MiB"
        assert all(closed_by_server(s, within=10) for s in socks)
    finally:
        for s in socks:
            s.close()
    assert answered(c)


def test_idle_connections_are_closed(c):
    with connect(c) as idle:
        assert not closed_by_server(idle, within=1)
        assert closed_by_server(idle, within=10)


def test_a_connection_used_more_often_than_the_idle_limit_stays_open(c):
    """The frame timeout bounds one frame only: a request every 3 s (frame limit 2 s, idle
    limit 4 s) is answered on the same connection each time."""
    with RemotingClient() as client:
        ports = set()
        for i in range(3):
            if i:
                time.sleep(3)  # the pace under test: beyond the frame limit, within the idle one
            _, info = client.invoke_json(c.main.address, RequestCode.GET_BROKER_RUNTIME_INFO)
            assert runtime_stats(info)["broker"] == "broker-a"
            ports.add(client.local_address(c.main.address)[1])
        assert len(ports) == 1


def test_connections_beyond_the_limit_are_refused_and_the_rest_kept(c):
    socks = [connect(c) for _ in range(LIMITS["serverMaxConnections"] + 5)]
    try:
        refused: set[socket.socket] = set()

        def five_refused() -> bool:
            refused.update(s for s in socks if s not in refused and closed_by_server(s, 0.001))
            return len(refused) >= 5

        wait_for(five_refused, what="the connections beyond the limit refused")
        assert len(socks) - len(refused) <= LIMITS["serverMaxConnections"]
    finally:
        for s in socks:
            s.close()
    # the server forgets closed connections as their threads notice
    wait_for(lambda: answered(c), ignore=(RemotingError, OSError), interval=0.2,
             what="an answer once the connections closed")  # fmt: skip


def threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise AssertionError("no Threads")


def test_connections_cost_memory_not_threads(c):
    """Issue 53, item 4: 600 idle connections made 676 threads in the broker (one per
    connection). Here 70 idle connections (the limit is 80) and then 60 that pipeline
    runtime-info requests and never read an answer leave the broker's thread count within
    its request workers, its memory bounded, and a well-behaved client answered."""
    assert answered(c)
    pid, supervisor = listening_pid(c.broker_port), c.broker_proc.pid
    assert pid != supervisor  # the data server
    before_threads, before_rss = threads(pid), rss_bytes(pid)
    supervisor_threads = threads(supervisor)
    idle = [connect(c) for _ in range(70)]
    try:
        for s in idle:
            s.sendall(b"\0")  # past the first byte: each is served (plain TCP), not waiting
        time.sleep(0.5)  # a test of absence: a thread per connection would exist by now
        assert threads(pid) - before_threads <= 16, "a thread per idle connection"
        # each has its link to the control server: connections there cost no thread either
        assert threads(supervisor) - supervisor_threads <= 16, "a thread per relay link"
        assert answered(c)
    finally:
        for s in idle:
            s.close()
    wait_for(lambda: answered(c), ignore=(RemotingError, OSError), interval=0.2,
             what="an answer once the idle connections closed")  # fmt: skip
    request = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO).encode()
    readers_never = [connect(c) for _ in range(60)]
    try:
        for s in readers_never:
            s.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                for _ in range(200):  # or until the broker stops reading it
                    s.send(request)
        time.sleep(1.0)
        assert threads(pid) - before_threads <= 16, "a thread per slow-loris connection"
        grown = rss_bytes(pid) - before_rss
        assert grown < 128 << 20, f"60 connections that never read grew it {grown >> 20} MiB"
        assert answered(c, timeout=15)  # behind a turn of each busy connection, on 2 cores
    finally:
        for s in readers_never:
            s.close()
    wait_for(lambda: answered(c), ignore=(RemotingError, OSError), interval=0.2,
             what="an answer once the slow-loris connections closed")  # fmt: skip
