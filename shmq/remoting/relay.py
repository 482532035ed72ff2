"""Relaying a client connection to another server, frame by frame, on the server's loop:
the broker's data server (``shmq.broker.data_server``) serves SEND and PULL itself and hands
every other frame of a client to the broker's control server.

Every client connection C gets one link L of its own, an outgoing connection on the same
event loop (never a thread). L's first frame is a ``RELAY_HELLO`` naming C's address and
whether it speaks TLS, with the secret both servers were given (the control server takes
C's identity only then, ``hello_accepted``). Then frames pass as the bytes they arrived as,
never decoded and encoded again: what C sends that is relayed goes to L, everything L sends
(responses, and the broker's own requests to the client: a transaction check-back,
NOTIFY_CONSUMER_IDS_CHANGED) goes to C, whole frames only, so the data server's own
answers on C never cut into one. Opaques are left as they are: one link per client, so
they cannot collide. C closing closes L and L closing closes C; a link that cannot connect
closes C. Each side stops reading while the other does not take its bytes (asyncio's
write-buffer water marks), so a relayed connection buffers at most a frame and the
water mark per direction.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
from collections.abc import Callable

from shmq.remoting.codes import RequestCode
from shmq.remoting.protocol import RemotingCommand

log = logging.getLogger(__name__)

# the client's side of a link: write whole frames to it, stop (True) or resume reading it,
# abort it (``RemotingServer``'s, on its loop)
ClientSide = tuple[Callable[[bytes], None], Callable[[bool], None], Callable[[], None]]


def hello(peer: str, tls: bool, token: str) -> bytes:
    """The frame a link opens with: the client's ``ip:port``, TLS, the shared secret."""
    request = RemotingCommand.request(
        RequestCode.RELAY_HELLO, {"peer": peer, "tls": str(tls).lower(), "token": token},
        oneway=True,
    )  # fmt: skip
    return request.encode()


def hello_accepted(request: RemotingCommand, token: str | None) -> tuple[str, bool] | None:
    """The client's ``(peer, tls)`` a ``RELAY_HELLO`` names, or None when it does not
    carry ``token`` (compared in constant time) or this server takes no relays."""
    if not token:
        return None
    offered = request.ext_fields.get("token", "")
    peer = request.ext_fields.get("peer", "")
    if not peer or not hmac.compare_digest(offered.encode(), token.encode()):
        return None
    return peer, request.ext_fields.get("tls") == "true"


class RelayLink(asyncio.Protocol):
    """The link of one client connection (see the module docstring). ``to_client(frame)``
    writes a whole frame to the client, ``pause_client(bool)`` stops or resumes reading
    the client, ``close_client()`` aborts it; all run on the loop, as every method here."""

    def __init__(self, first: bytes, client: ClientSide, peer: str) -> None:
        self.to_client, self.pause_client, self.close_client = client
        self.peer = peer
        self.transport: asyncio.Transport | None = None
        self._pending: list[bytes] = [first]  # written once connected, the hello first
        self._buf = bytearray()
        self._closed = False

    async def connect(self, loop: asyncio.AbstractEventLoop, host: str, port: int) -> None:
        try:
            await loop.create_connection(lambda: self, host, port)
        except OSError as exc:
            log.warning("closing %s: no link to %s:%d: %s", self.peer, host, port, exc)
            self._closed = True
            self.close_client()

    def forward(self, frame: bytes) -> None:
        """Send one whole frame to the other server (queued until the link connects)."""
        if self._closed:
            return
        if self.transport is None:
            self._pending.append(frame)
        else:
            self.transport.write(frame)

    def close(self) -> None:
        """The client went away: the link goes too (what was written is still sent)."""
        self._closed = True
        if self.transport is not None:
            self.transport.close()

    def pause(self, paused: bool) -> None:
        """The client does not take what the link reads (or takes it again)."""
        if self.transport is not None and not self.transport.is_closing():
            with contextlib.suppress(RuntimeError):
                (self.transport.pause_reading if paused else self.transport.resume_reading)()

    # -- asyncio's callbacks -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        if self._closed:  # the client left while the link connected
            transport.close()
            return
        self.transport = transport
        transport.write(b"".join(self._pending))
        self._pending = []

    def data_received(self, data: bytes) -> None:
        """Whole frames go to the client as they complete."""
        buf = self._buf
        buf += data
        end = 0
        while len(buf) - end >= 4:
            length = int.from_bytes(buf[end : end + 4], "big")
            if len(buf) - end - 4 < length:
                break
            end += 4 + length
        if end:
            self.to_client(bytes(buf[:end]))
            del buf[:end]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._closed:
            log.debug("the link of %s closed: %s", self.peer, exc)
            self._closed = True
            self.close_client()

    def pause_writing(self) -> None:
        self.pause_client(True)

    def resume_writing(self) -> None:
        self.pause_client(False)


class RelayTo:
    """A server's relay (``RemotingServer.relay``): the other server's ``host:port``, the
    secret of the hello, and ``serves(request, connection)``: True for a request this
    server handles itself, False for one it relays. ``serves`` runs on the loop as each
    request is read, in order, so it must not block. ``owed(connection)``, when given,
    returns a frame of the relaying server's own that must reach the other server before
    anything else relayed for that connection next (its requests, its link's close), or
    None; it may run on the loop or in a worker."""

    def __init__(
        self, address: str, token: str, serves: Callable[[RemotingCommand, object], bool],
        owed: Callable[[object], bytes | None] = lambda _conn: None,
    ) -> None:  # fmt: skip
        host, _, port = address.rpartition(":")
        self.host, self.port = host, int(port)
        self.token = token
        self.serves = serves
        self.owed = owed
