"""The bytes a RemotingServer holds for request frames are bounded over all connections
(issue 53, item 3), with real sockets against a server in this process: stalled partial
frames reserve no more than the budget (``buffered_bytes``, not RSS: deterministic), the
frames past it are closed with a warning naming the peer and the budget, and a normal
client is served throughout."""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
import threading

import pytest
from waiting import wait_for

from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RemotingCommand
from shmq.remoting.server import Connection, RemotingServer

ECHO = 1001  # a test-only request code
MAX_FRAME = 1 << 20
BUDGET = 4 * MAX_FRAME
STALLED = 16  # each announces MAX_FRAME bytes and sends 15/16 of them


def echo(req: RemotingCommand, _conn: Connection) -> RemotingCommand:
    return RemotingCommand.response_to(req, body=req.body[::-1])


@pytest.fixture
def server():
    srv = RemotingServer(
        port=0, name="budget", max_frame=MAX_FRAME, max_buffered_bytes=BUDGET,
        frame_timeout=60,  # the stalled frames hold their budget for the whole test
    )  # fmt: skip
    srv.register(ECHO, echo)
    srv.start()
    yield srv
    srv.stop()


def closed_by_server(sock: socket.socket) -> bool:
    sock.settimeout(0.001)
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def stall(sock: socket.socket) -> None:
    """Announce the largest frame, send 15/16 of it and stop (the server may close the
    connection meanwhile: the rest of the send then fails)."""
    with contextlib.suppress(OSError):
        sock.sendall(struct.pack(">i", MAX_FRAME) + b"\0" * (MAX_FRAME * 15 // 16))


def served(srv: RemotingServer, body: bytes) -> bool:
    with RemotingClient(default_timeout=5.0) as client:
        response = client.invoke(srv.address, RemotingCommand.request(ECHO, {}, body))
    return response.body == body[::-1]


def test_stalled_partial_frames_hold_no_more_than_the_budget(server, caplog):
    caplog.set_level(logging.WARNING, logger="shmq.remoting.server")
    socks = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(STALLED)]
    senders = [threading.Thread(target=stall, args=(s,), daemon=True) for s in socks]
    peak = 0
    try:
        for t in senders:
            t.start()

        def settled() -> bool:
            nonlocal peak
            peak = max(peak, server.buffered_bytes)
            closed = sum(closed_by_server(s) for s in socks)
            return closed == STALLED - BUDGET // MAX_FRAME and server.buffered_bytes == BUDGET

        wait_for(settled, timeout=30, what="the frames past the budget closed")
        assert peak <= BUDGET
        assert served(server, b"small request" * 10)  # a normal client is still served
        assert server.buffered_bytes == BUDGET
        refusals = [r.getMessage() for r in caplog.records if "does not fit" in r.getMessage()]
        assert len(refusals) == STALLED - BUDGET // MAX_FRAME
        assert f"the {BUDGET} bytes the server buffers" in refusals[0]
        assert "closing 127.0.0.1:" in refusals[0]
    finally:
        for s in socks:
            s.close()
        for t in senders:
            t.join(10)
    # their connections closed: the budget is free again, and a large frame fits
    wait_for(lambda: server.buffered_bytes == 0, what="the budget released")
    assert served(server, b"x" * (MAX_FRAME // 2))
    # released by the server's thread once it answered, before it reads the next frame
    wait_for(lambda: server.buffered_bytes == 0, what="the large frame's bytes released")


def test_an_announced_length_past_the_max_frame_reserves_nothing(server):
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(struct.pack(">i", 2**31 - 1) + b"\0" * 100)
        sock.settimeout(10)
        assert sock.recv(1) == b""  # closed at once: the length is checked first
    assert server.buffered_bytes == 0
    assert served(server, b"after")


def test_a_budget_below_the_max_frame_is_refused():
    with pytest.raises(ValueError, match="below max_frame"):
        RemotingServer(max_frame=MAX_FRAME, max_buffered_bytes=MAX_FRAME - 1)
