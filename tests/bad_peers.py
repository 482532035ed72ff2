"""Hostile TCP peers for transport tests: one that closes, one that answers garbage, one
that never answers (the ``peer`` fixture of ``tests/conftest.py`` makes them), and the
producer's TCP sends pointed at one (``sends``)."""

from __future__ import annotations

import collections
import socket
import struct
import threading

from shmq.client.route import BrokerQueues
from shmq.client.transport.tcp_send import TcpSends
from shmq.client.types import MessageQueue


class Peer:
    """A one-connection TCP server that does ``behaviour(conn)`` with each connection."""

    def __init__(self, behaviour) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.behaviour = behaviour
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self.behaviour, args=(conn,), daemon=True).start()

    def close(self) -> None:
        self.sock.close()
        for conn in self.conns:
            conn.close()


def closes(conn: socket.socket) -> None:
    conn.recv(65536)
    conn.close()


def garbage(conn: socket.socket) -> None:
    conn.recv(65536)
    conn.sendall(struct.pack(">i", 12) + b"\x01\x00\x00\x05not a header")


def silent(conn: socket.socket) -> None:
    try:
        while conn.recv(65536):
            pass
    except OSError:  # closed by the test
        pass


def sends(
    address: str, timeout: float = 0.5, retries: int = 0
) -> tuple[TcpSends, BrokerQueues, MessageQueue]:
    """``TcpSends`` to a broker at ``address`` (retrying async sends on it), a queue of it."""
    broker = BrokerQueues("b", address, 1, 1, 6)
    tcp = TcpSends("g", send_timeout=timeout, default_topic_queue_nums=4,
                   max_message_size=1 << 20, retries=retries, fault=lambda *a: None,
                   invalidate=lambda t: None, route=lambda mq: broker,
                   stats=collections.Counter())  # fmt: skip
    return tcp, broker, MessageQueue("T", "b", 0)
