"""What the data server's answered pulls still owe the control server, per connection.

Each answered pull has an account (``PullAccount``: the group's gets, where the pull left
the queue, the offset it commits). Sent one ``RELAY_PULLED`` per pull, they doubled a TCP
pull's round trip: the control server was woken for each, on the same two cores. They now
wait here, merged per queue, and go in one ``RELAY_PULLED`` over the connection's link:

- before anything else the link carries next for that connection (a request the client
  has relayed, the link's close: ``RelayTo.owed``), so the broker still sees a pull's
  commit before a later offset query or unlock of the same client;
- or ``FLUSH_S`` after the first of them at the latest, for what the broker shows meanwhile
  (consumer progress, the ready and in-flight metrics, the gets).
"""

from __future__ import annotations

import contextlib
import threading

from shmq.broker.processors.pull_account import PullAccount
from shmq.remoting.server import Connection, RemotingServer

FLUSH_S = 0.02  # the longest an account waits for the connection's next relayed frame


class PendingAccounts:
    """The accounts owed per connection; ``add`` from any thread, ``owed`` by the server's
    relay before it forwards a connection's frame (from the loop or a worker)."""

    def __init__(self, server: RemotingServer) -> None:
        self.server = server
        self._lock = threading.Lock()
        self._owed: dict[Connection, dict[tuple[str, str, int], PullAccount]] = {}

    def add(self, conn: Connection, account: PullAccount) -> None:
        """Owe ``account`` on ``conn``'s link (merged with what its queue already owes)."""
        with self._lock:
            queues = self._owed.get(conn)
            first = queues is None
            if queues is None:
                queues = self._owed[conn] = {}
            before = queues.get(account.key)
            queues[account.key] = account if before is None else before.merged(account)
        loop = self.server.loop
        if first and loop is not None:
            with contextlib.suppress(RuntimeError):  # a closed loop: the server stopped
                loop.call_soon_threadsafe(loop.call_later, FLUSH_S, self._due, conn)

    def owed(self, conn: Connection) -> bytes | None:
        """The ``RELAY_PULLED`` frame of what ``conn`` owes (now no longer owed), or None;
        the caller sends it before its own frame, the same way."""
        with self._lock:
            queues = self._owed.pop(conn, None)
        return PullAccount.request(queues.values()).encode() if queues else None

    def _due(self, conn: Connection) -> None:
        """(On the loop) send what ``conn`` still owes, ``FLUSH_S`` after its first."""
        frame = self.owed(conn)
        link = conn.link
        if frame is not None and link is not None:
            link.forward(frame)
