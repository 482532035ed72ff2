"""The broker's registry of producers that heartbeat over TCP (RocketMQ's
``ProducerManager``).

A producer's HEART_BEAT names its groups; the broker keeps, per group, each client id's
connection, last heartbeat, language and version, so it can send that producer requests of
its own: a transaction check-back (``transaction.service``) or a reply to its request
(``processors.reply``). A member is forgotten when it unregisters or its connection
closes. Producers on the broker's host hold a ring instead (``client.slots``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from shmq.broker.client.consumer_manager import ClientChannel
from shmq.remoting.server import Connection

# the open connection with an id (``RemotingServer.connection``), None once it closed
OpenConnection = Callable[[int], Connection | None]


class ProducerManager:
    """``{group: {client id: ClientChannel}}``; thread-safe. ``open_connection`` tells
    which remembered connections are still open."""

    def __init__(self, open_connection: OpenConnection) -> None:
        self.open_connection = open_connection
        self._groups: dict[str, dict[str, ClientChannel]] = {}
        self._lock = threading.Lock()

    def register(self, group: str, channel: ClientChannel) -> None:
        """A heartbeat of ``channel``'s client as a producer of ``group``."""
        with self._lock:
            self._groups.setdefault(group, {})[channel.client_id] = channel

    def unregister(self, group: str, client_id: str) -> None:
        with self._lock:
            if group in self._groups:
                self._groups[group].pop(client_id, None)

    def connection_closed(self, conn: Connection) -> None:
        """Forget every member that used ``conn``."""
        with self._lock:
            for members in self._groups.values():
                for cid in [c for c, ch in members.items() if ch.conn.id == conn.id]:
                    del members[cid]

    def find_connection(self, client_id: str) -> Connection | None:
        """The open connection ``client_id`` heartbeats on as a producer (RocketMQ's
        ``findChannel``), None when it does not."""
        conn_id = None
        with self._lock:
            for members in self._groups.values():
                if client_id in members:
                    conn_id = members[client_id].conn.id
                    break
        return None if conn_id is None else self.open_connection(conn_id)

    def members(self) -> list[ClientChannel]:
        """Every producer client of every group (one per group it heartbeats for)."""
        with self._lock:
            return [ch for members in self._groups.values() for ch in members.values()]

    def channels(self, group: str) -> list[dict[str, Any]]:
        """RocketMQ's ``Connection`` of each member of ``group``."""
        with self._lock:
            return [ch.to_json() for ch in self._groups.get(group, {}).values()]

    def live_connections(self, group: str) -> list[Connection]:
        """The open connections of ``group``'s members."""
        with self._lock:
            members = list(self._groups.get(group, {}).values())
        conns = [self.open_connection(channel.conn.id) for channel in members]
        return [conn for conn in conns if conn is not None]
