"""The master's HA transfer when the slave's socket fills: every CommitLog byte goes out once,
in order, in RocketMQ's frames (at most 32 KiB, never across a file), whatever sendmsg took.
No broker processes: the agent's send path on a loopback TCP pair with small buffers."""

from __future__ import annotations

import random
import selectors
import socket
from types import SimpleNamespace

import numpy as np

from shmq.broker.agents import ha_service as hs
from shmq.codec import ha_frames as hf

FILE = 192 * 1024  # not a multiple of the batch size: a batch ends at each file's end
BATCH = 32 * 1024


class Files:
    """``find_file`` over numpy views of ``data`` cut into files, as the mapped file queue."""

    def __init__(self, data: np.ndarray) -> None:
        self.data = data

    def find_file(self, offset: int):
        start = offset - offset % FILE
        if start >= len(self.data):
            return None
        view = self.data[start : start + FILE]
        return SimpleNamespace(file_from_offset=start, size=FILE, buf=view)


def service(data: np.ndarray) -> hs.HAService:
    """An HA service with only what the send path uses (no shared memory, no listener)."""
    svc = hs.HAService.__new__(hs.HAService)
    svc.batch = BATCH
    svc.heartbeat_s = 60.0
    svc.idle = SimpleNamespace(selector=selectors.DefaultSelector())
    svc.commitlog = SimpleNamespace(queue=Files(data))
    svc.conns = {}
    svc._table_dirty = False
    return svc


def tcp_pair() -> tuple[socket.socket, socket.socket]:
    """Small buffers, so the master's socket fills. And small segments: with loopback's
    64 KiB ones, a slave that read a few KiB never announces the room (less than a
    segment), and every send waited for the master's window probe, about 0.1 s each."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        slave = socket.socket()
        slave.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 1024)
        slave.connect(server.getsockname())
        master, _ = server.accept()
    master.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    slave.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    master.setblocking(False)
    slave.settimeout(10)
    return master, slave


def frames(stream: bytes) -> list[tuple[int, bytes]]:
    out, pos = [], 0
    while pos < len(stream):
        offset, size = hf.parse_header(stream, pos, BATCH)
        out.append((offset, stream[pos + hf.HEADER_SIZE : pos + hf.HEADER_SIZE + size]))
        pos += hf.HEADER_SIZE + size
    return out


def test_a_full_socket_cuts_no_byte_twice_and_loses_none():
    rng = random.Random(7)
    data = np.frombuffer(rng.randbytes(3 * FILE + 5000), dtype=np.uint8)
    write = len(data)
    svc = service(data)
    master, slave = tcp_pair()
    conn = hs.HAConnection(master, ("127.0.0.1", 1))
    conn.next_transfer = 0
    svc.conns[master.fileno()] = conn
    svc.idle.selector.register(master, selectors.EVENT_READ)
    stream, cuts = bytearray(), 0
    try:
        while conn.next_transfer < write or conn.blocked:
            if conn.blocked:
                cuts += bool(conn.pending)
                stream += slave.recv(rng.randint(1, 20000))
                svc._flush_pending(conn)
            else:
                svc._transfer(conn, write, 0.0)
        master.shutdown(socket.SHUT_WR)
        while chunk := slave.recv(1 << 16):
            stream += chunk
    finally:
        master.close()
        slave.close()
    assert cuts > 0  # the socket took part of a batch at least once
    got = frames(bytes(stream))
    assert b"".join(body for _, body in got) == data.tobytes()
    position = 0
    for offset, body in got:
        assert offset == position
        assert 0 < len(body) <= BATCH
        assert offset // FILE == (offset + len(body) - 1) // FILE  # within one file
        position += len(body)
