"""The remoting server (the broker's and the namesrv's port): an event loop for the
connections, a bounded pool of workers for the requests.

Why not a thread per connection (what this was): 600 idle connections cost the broker 676
threads, and 300 slow-loris connections with pipelined pulls never read 316 threads and
+134 MB (issue 53, item 4). Here one thread runs an asyncio loop that accepts, reads,
decrypts (TLS: asyncio's SSL protocol, so one thread uses each SSL object) and writes every
connection; requests run on ``workers`` threads. A connection's requests run one at a time
and in arrival order (a producer's sends stay in order), different connections' in
parallel; a connection costs memory, not a thread.

Nothing a peer sends may cost the server more than a bound:
- a frame's length is checked before anything more is read, and its memory grows only as
  its bytes arrive; a frame must complete within ``frame_timeout`` once its length is read;
- frames over ``RECV_CHUNK`` reserve their length from the server's ``frame_budget``
  (``max_buffered_bytes`` over all connections) until their request is done; a frame that
  finds no room within ``frame_budget.wait`` closes its connection, with a warning naming
  the budget;
- a connection whose requests wait unhandled past ``MAX_INBOX_BYTES`` is not read until
  they drain: its further requests wait in the peer's socket, not in the broker; one whose
  answers wait unsent past ``MAX_UNSENT_BYTES`` (a peer that does not read them) is closed;
- a connection silent for ``idle_timeout`` (RocketMQ's ``serverChannelMaxIdleTimeSeconds``,
  120 s) is closed, at most ``max_connections`` are served at once (more are closed at
  accept), and the warnings about bad peers are rate-limited.

A connection that sends a frame the server cannot answer (a bad length, a header that is
not JSON, a response that answers nothing) is closed with one warning; a request whose
header breaks only after its opaque was read is answered with SYSTEM_ERROR and the
connection kept (``RemotingHeaderError``). Handlers may push oneway requests to a client
through ``Connection.send`` from any thread, or call a client and wait for its answer
(``Connection.invoke``: RocketMQ's ``Broker2Client.callClient``).

TLS is decided per connection by its first byte and the mode (``tls_server``), before the
connection is served; the handshake is bounded by ``handshake_timeout``.

Relays (``remoting.relay``): a server with ``relay`` set (the broker's data server) gives
each connection a link to another server and relays there, as raw frames, every request
``relay.serves`` does not take and every response it did not ask for; a server with
``relay_token`` set (the broker's control server) takes such a link's ``RELAY_HELLO`` as
the client's identity (its ``peer`` and ``tls``; it is then ``relayed``: not closed for
idleness, the relaying server watches the client) and closes a link whose hello carries
another secret. Internal requests (``register_internal``) skip ``authorize``: their
handlers check who sent them.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from shmq.errors import (
    RemotingConnectError,
    RemotingError,
    RemotingFrameError,
    ResponseError,
    ShmqError,
)
from shmq.remoting.codes import RELAY_CODES
from shmq.remoting.frame_budget import MAX_BUFFERED_BYTES, FrameBudget
from shmq.remoting.frames import RECV_CHUNK, frame_buffer
from shmq.remoting.pending import PendingCalls
from shmq.remoting.protocol import (
    MAX_FRAME_SIZE,
    RemotingCommand,
    RemotingHeaderError,
    RequestCode,
    ResponseCode,
    decode_frame,
    request_name,
)
from shmq.remoting.relay import RelayLink, RelayTo, hello, hello_accepted
from shmq.remoting.security.tls_server import (
    DISABLED,
    HANDSHAKE_TIMEOUT_S,
    TlsGate,
    TlsRefused,
    TlsServerConfig,
)

log = logging.getLogger(__name__)

STOP_TIMEOUT_S = 1.0
IDLE_TIMEOUT_S = 120.0
FRAME_TIMEOUT_S = 30.0
MAX_CONNECTIONS = 1024
WORKERS = 16  # threads that run requests, for every connection of a server
WARNINGS_PER_MINUTE = 20
LATE_ANSWERS = 16  # opaques of calls to a client that timed out, whose answer may still come
SWEEP_S = 0.25  # how often idle connections and slow frames are looked for
BUDGET_RETRY_S = 0.02  # how often a frame waiting for room in the budget looks again
MAX_INBOX_BYTES = 1 << 20  # a connection's requests read but not handled yet: their bytes
MAX_INBOX_REQUESTS = 256  # and their number
TURN = 8  # requests of one connection a worker handles before the others' turn
# a connection's answers and pushes not sent yet past which it is closed (its peer does not
# read them). Reading is never paused for unsent answers, as Netty does not: a peer that
# reads only once its own writes are done (a producer answering a burst of check-backs)
# would then never be read again, and neither side would move
MAX_UNSENT_BYTES = 16 << 20
# a request read and not handled yet: itself, the frame budget bytes it holds, its size
_Queued = tuple["RemotingCommand | _Relayed", int, int]
_END_OF_INPUT = (None, 0, 0)  # the peer sent its last request: close once it is answered
_DISCONNECTED = None  # the inbox's last entry: the disconnect callbacks run after the rest

Handler = Callable[[RemotingCommand, "Connection"], RemotingCommand | None]
# None when the request may be handled; raises (a ResponseError: its code and remark) if not
Authorizer = Callable[[RemotingCommand, "Connection"], None]
# ``observe(request code, response code, started, is long polling, result)`` as a request
# is answered (response code -1 for a oneway one; ``started``: perf_counter when its
# handling began, so a held pull's time includes its hold, as RocketMQ's rpc latency does)
Observer = Callable[[int, int, float, bool, str], None]
# requests a handler may hold unanswered until a message comes (long polling)
LONG_POLLING_CODES = frozenset(
    {RequestCode.PULL_MESSAGE, RequestCode.POP_MESSAGE, RequestCode.NOTIFICATION}
)


class _Relayed:
    """A request to relay that came behind requests of its connection still handled here:
    it waits in the inbox, so the other server sees the connection's requests in order
    (a pull's commit before the unlock that follows it)."""

    __slots__ = ("frame",)

    def __init__(self, frame: bytes) -> None:
        self.frame = frame


def _addr(host: str, port: int) -> str:
    return f"{host}:{port}"


class Connection:
    """One accepted client connection; ``send``, ``invoke`` and ``close`` are safe from any
    thread (frames go out through the server's loop, in the order they were sent)."""

    def __init__(self, conn_id: int, peer: str, loop: asyncio.AbstractEventLoop) -> None:
        self.id = conn_id
        self.peer = peer
        self.tls = False  # whether the connection speaks TLS (known once it is served)
        # a link from the broker's data server for this client (``peer``: the client's):
        # set by its RELAY_HELLO only
        self.relayed = False
        self.link: RelayLink | None = None  # (relaying server) the client's link
        self._loop = loop
        self._transport: asyncio.Transport | None = None
        self._lock = threading.Lock()
        self._outbox: list[bytes] = []
        self._flush_due = False
        self._closed = False
        self._calls = PendingCalls(peer, LATE_ANSWERS)
        # requests read and not handled yet, run by one worker at a time (``_draining``)
        self._inbox: collections.deque[_Queued | None] = collections.deque()
        self._inbox_bytes = 0
        self._draining = False
        # with the server's ``observe``: the requests being handled, by opaque: (code,
        # perf_counter when its handling began, whether it is held for long polling)
        self.observe: Observer | None = None
        self._handling: dict[int, list] = {}

    def handling(self, request: RemotingCommand) -> None:
        """A worker starts handling ``request`` (only with ``observe``)."""
        key = -request.opaque - 1 if request.is_oneway else request.opaque
        self._handling[key] = [request.code, time.perf_counter(), False]

    def handled(self, request: RemotingCommand) -> None:
        """Its handler returned no response: a oneway request is done; a request answered
        later (a held pull, a send answered once stored) stays until ``send``."""
        if request.is_oneway:
            entry = self._handling.pop(-request.opaque - 1, None)
            if entry is not None:
                self.observe(entry[0], -1, entry[1], False, "oneway")
        elif request.code in LONG_POLLING_CODES:
            entry = self._handling.get(request.opaque)
            if entry is not None:  # marked in place: ``send`` may have taken it meanwhile
                entry[2] = True

    def invoke(self, request: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send ``request`` to the client and wait for its response (any code);
        ``RemotingTimeoutError`` after ``timeout`` s, ``RemotingConnectError`` if the
        connection is or goes away first."""
        return self._calls.call(request, lambda: self.send(request), timeout)

    def answered(self, response: RemotingCommand) -> bool:
        """Hand ``response`` to the ``invoke`` waiting for it; False when nothing on this
        connection asked for it (an answer that came after its caller gave up is dropped)."""
        return self._calls.answered(response)

    def send(self, cmd: RemotingCommand) -> None:
        """Queue one frame for the connection; ``RemotingConnectError`` if it is closed.
        Frames sent while the loop has not written the last ones go out in one write."""
        if self.observe is not None and cmd.is_response:
            entry = self._handling.pop(cmd.opaque, None)
            if entry is not None:
                self.observe(entry[0], cmd.code, entry[1], entry[2], "success")
        frame = cmd.encode()
        with self._lock:
            if self._closed:
                raise RemotingConnectError(f"connection to {self.peer} is closed")
            self._outbox.append(frame)
            if self._flush_due:
                return
            self._flush_due = True
        try:
            self._loop.call_soon_threadsafe(self._flush)
        except RuntimeError as exc:  # the loop is closed: the server stopped
            raise RemotingConnectError(f"connection to {self.peer} is closed") from exc

    def forward(self, cmd: RemotingCommand) -> None:
        """Send ``cmd`` to the server this connection is relayed to, over its link (a
        relaying server's own request: what a pull it answered tells the broker)."""
        self.relay_frame(cmd.encode())

    def relay_frame(self, frame: bytes) -> None:
        """Send a whole frame over the connection's link (from any thread, in order); also
        once the client is gone: the link closes after what its last requests relay."""
        link = self.link
        if link is None:
            raise RemotingConnectError(f"connection to {self.peer} has no link")
        try:
            self._loop.call_soon_threadsafe(link.forward, frame)
        except RuntimeError as exc:  # the loop is closed: the server stopped
            raise RemotingConnectError(f"connection to {self.peer} is closed") from exc

    def write_relayed(self, frame: bytes) -> None:
        """(On the loop) write whole frames the link read."""
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.write(frame)

    def _flush(self) -> None:
        """Write what ``send`` queued (on the loop)."""
        with self._lock:
            frames, self._outbox = self._outbox, []
            self._flush_due = False
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.write(b"".join(frames) if len(frames) > 1 else frames[0])
            if transport.get_write_buffer_size() > MAX_UNSENT_BYTES:
                log.warning("closing %s: %d bytes of answers it does not read", self.peer,
                            transport.get_write_buffer_size())  # fmt: skip
                transport.abort()

    def close(self) -> None:
        """Close the connection; idempotent. A caller still waiting in ``invoke`` fails at
        once; requests already read are still handled (their answers are dropped)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._calls.fail_all()
        with contextlib.suppress(RuntimeError):  # a closed loop closed its transports
            self._loop.call_soon_threadsafe(self._abort)

    def _abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    def finish(self) -> None:
        """Close the connection once what was sent is written (the peer sent its last
        request and has its answers)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._calls.fail_all()
        with contextlib.suppress(RuntimeError):  # after a pending ``_flush``: FIFO
            self._loop.call_soon_threadsafe(self._close_when_written)

    def _close_when_written(self) -> None:
        if self._transport is not None:
            self._transport.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return f"Connection(id={self.id}, peer={self.peer})"


def _full(conn: Connection) -> bool:
    """Whether the connection's unhandled requests are over their bound."""
    return conn._inbox_bytes > MAX_INBOX_BYTES or len(conn._inbox) > MAX_INBOX_REQUESTS


class _FrameProtocol(asyncio.Protocol):
    """Reads one connection's frames on the loop and hands its requests to the server."""

    def __init__(self, server: RemotingServer, conn: Connection) -> None:
        self.server = server
        self.conn = conn
        self.transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._large: memoryview | None = None  # the payload of a frame over RECV_CHUNK
        self._large_filled = 0
        self._waiting_budget: int = 0  # the length of a large frame waiting for room
        self._budget_deadline = 0.0
        self.frame_started: float | None = None  # a frame's length is read, not its end
        self.last_read = time.monotonic()
        self._paused = {"inbox": False, "budget": False, "link": False}
        self._framed = False  # a frame was delivered: a RELAY_HELLO comes first or never

    # -- asyncio's callbacks -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.conn.tls = transport.get_extra_info("ssl_object") is not None
        self.conn._transport = transport
        self.server._protocols[self.conn.id] = self
        if self.conn.closed:  # closed (the server stops) before it was served
            transport.abort()
            return
        relay = self.server.relay
        if relay is not None:
            self.conn.link = link = RelayLink(
                hello(self.conn.peer, self.conn.tls, relay.token),
                (self.conn.write_relayed, self._link_behind, self._abort),
                self.conn.peer,
            )
            self.server.loop.create_task(link.connect(self.server.loop, relay.host, relay.port))

    def data_received(self, data: bytes) -> None:
        self.last_read = time.monotonic()
        view = memoryview(data)
        if self._large is not None:
            view = self._fill_large(view)
        if view:
            self._buf += view
        self._parse()

    def eof_received(self) -> bool:
        """The peer will send no more: a frame it began is cut off (the connection closes
        with a warning), else its requests are answered before it closes."""
        if self._large is not None or self._buf or self._waiting_budget:
            have = self._large_filled + 4 if self._large is not None else len(self._buf)
            need = len(self._large) + 4 if self._large is not None else self._needed()
            self._refuse(f"connection closed in the middle of a frame ({have} of {need} bytes"
                         " read)")  # fmt: skip
            return False
        self.server._enqueue(self.conn, _END_OF_INPUT)
        # keep writing the answers (``Connection.finish`` closes); a TLS connection cannot
        # be half closed (asyncio closes it and warns when asked to keep it)
        return not self.conn.tls

    def _needed(self) -> int:
        """The bytes of the frame begun in the buffer (its length once 4 bytes are in)."""
        buf = self._buf
        return 4 + int.from_bytes(buf[:4], "big", signed=True) if len(buf) >= 4 else 4

    def pause_writing(self) -> None:
        """The client does not read what is written: its link is not read meanwhile."""
        if self.conn.link is not None:
            self.conn.link.pause(True)

    def resume_writing(self) -> None:
        if self.conn.link is not None:
            self.conn.link.pause(False)

    def _link_behind(self, behind: bool) -> None:
        """The link does not take what the client sends (or takes it again)."""
        if behind:
            self._pause("link")
        else:
            self._resume("link")

    def connection_lost(self, exc: Exception | None) -> None:
        if self._large is not None:  # a large frame cut off: its budget is free again
            self.server.frame_budget.release(len(self._large))
            self._large = None
        self._waiting_budget = 0
        self.server._lost(self)

    # -- frames --------------------------------------------------------------------------------

    def _parse(self) -> None:
        """Hand over every whole frame buffered; start a large frame's own buffer."""
        buf = self._buf
        pos = 0
        max_frame = self.server.max_frame
        closing = self.transport.is_closing
        while (len(buf) - pos >= 4 and self._large is None and not self._waiting_budget
               and not closing()):  # fmt: skip
            length = int.from_bytes(buf[pos : pos + 4], "big", signed=True)
            if length < 4 or length > max_frame:
                self._refuse(f"frame length {length} is outside [4, {max_frame}]")
                return
            if length > RECV_CHUNK:
                del buf[:pos]
                pos = 0
                self._start_large(length)
                continue
            if len(buf) - pos - 4 < length:
                break
            with memoryview(buf) as view:
                payload = view[pos + 4 : pos + 4 + length]
                pos += 4 + length
                self.frame_started = None
                self._deliver(payload, 0)
                payload.release()
        del buf[:pos]
        begun = buf or self._large is not None or self._waiting_budget
        if begun and self.frame_started is None:  # a frame began: it must end in frame_timeout
            self.frame_started = time.monotonic()

    def _start_large(self, length: int) -> None:
        """A frame over ``RECV_CHUNK``: reserve its length from the budget (or wait, not
        reading, for room), then receive it into a buffer of its own."""
        budget = self.server.frame_budget
        if not budget.try_reserve(length):
            if not self._waiting_budget:
                self._waiting_budget = length
                self._budget_deadline = time.monotonic() + budget.wait
                self._pause("budget")
            if time.monotonic() >= self._budget_deadline or length > budget.limit:
                self._waiting_budget = 0
                self._refuse(budget.refusal(length))
                return
            self.server.loop.call_later(BUDGET_RETRY_S, self._retry_budget)
            return
        if self._waiting_budget:
            self._waiting_budget = 0
            self._resume("budget")
        self._large = frame_buffer(length)
        self._large_filled = 0
        with memoryview(self._buf) as view:
            rest = self._fill_large(view[4:])
            tail = bytes(rest)
            rest.release()
        self._buf[:] = tail

    def _retry_budget(self) -> None:
        if self._waiting_budget and self.transport is not None and not self.transport.is_closing():
            self._start_large(self._waiting_budget)
            self._parse()

    def _fill_large(self, data: memoryview) -> memoryview:
        """Copy what ``data`` holds of the large frame; what is left of ``data`` after it."""
        large = self._large
        assert large is not None
        take = min(len(data), len(large) - self._large_filled)
        large[self._large_filled : self._large_filled + take] = data[:take]
        self._large_filled += take
        if self._large_filled == len(large):
            self._large = None
            self.frame_started = None
            self._deliver(large, len(large))
        return data[take:]

    def _deliver(self, payload: memoryview, held: int) -> None:
        """Decode one frame and queue its request (``held``: budget bytes it keeps until
        it is handled); a response answers an ``invoke``."""
        server, conn = self.server, self.conn
        first, self._framed = not self._framed, True
        try:
            request = decode_frame(payload)
        except RemotingHeaderError as exc:
            server.frame_budget.release(held)
            if not server._answer_malformed(exc, conn):
                self._abort()
            return
        except RemotingFrameError as exc:
            server.frame_budget.release(held)
            self._refuse(str(exc))
            return
        link = conn.link
        if request.is_response:
            server.frame_budget.release(held)
            if link is not None and not conn.answered(request):
                link.forward(_framed(payload))  # it answers the other server's request
                return
            if not conn.answered(request):
                server._warnings.warn(
                    "%s server: closing %s: it sent a response frame (%s, opaque %d)"
                    " where a request was expected",
                    server.name, conn.peer, request_name(request.code), request.opaque,
                )  # fmt: skip
                self._abort()
            return
        if link is not None and request.code in RELAY_CODES:
            # only the data server itself speaks them on a link: a client's would commit
            # offsets or name a peer past the ACL hook
            server.frame_budget.release(held)
            self._refuse(f"a client sent the internal {request_name(request.code)}")
            return
        if link is not None and not server.relay.serves(request, conn):
            with conn._lock:
                behind = conn._draining  # requests before it are still handled here
            if not behind:
                owed = server.relay.owed(conn)
                if owed is not None:
                    link.forward(owed)
                link.forward(_framed(payload))
                server.frame_budget.release(held)
            elif server._enqueue(conn, (_Relayed(_framed(payload)), held, len(payload))):
                self._pause("inbox")
            return
        if request.code == RequestCode.RELAY_HELLO:
            server.frame_budget.release(held)
            self._relay_hello(request, first)
            return
        if server._enqueue(conn, (request, held, len(payload))):
            self._pause("inbox")

    def _relay_hello(self, request: RemotingCommand, first: bool) -> None:
        """A relaying server's link names its client: as the connection's first frame
        with the right secret, the connection takes the client's identity; else it closes."""
        accepted = hello_accepted(request, self.server.relay_token) if first else None
        if accepted is None:
            self._refuse("a RELAY_HELLO " + ("with a wrong secret" if first else "too late"))
            return
        self.conn.peer, self.conn.tls = accepted
        self.conn.relayed = True

    def _refuse(self, reason: str) -> None:
        self.server._warnings.warn(
            "%s server: closing %s: %s", self.server.name, self.conn.peer, reason
        )
        self._abort()

    def _abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    # -- reading paused while the connection is behind ------------------------------------------

    def _pause(self, why: str) -> None:
        if not any(self._paused.values()) and self.transport is not None:
            with contextlib.suppress(RuntimeError):
                self.transport.pause_reading()
        self._paused[why] = True

    def _resume(self, why: str) -> None:
        was = any(self._paused.values())
        self._paused[why] = False
        if was and not any(self._paused.values()) and self.transport is not None:
            with contextlib.suppress(RuntimeError):
                self.transport.resume_reading()
            self.last_read = time.monotonic()  # it was not read: not idle meanwhile

    def inbox_drained(self) -> None:
        """(On the loop) the connection's requests fell below the inbox bound."""
        if not _full(self.conn):
            self._resume("inbox")


class RemotingServer:
    """Serves RemotingCommand requests on ``host:port`` (port 0: an ephemeral port)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        name: str = "remoting",
        max_frame: int = MAX_FRAME_SIZE,
        max_connections: int = MAX_CONNECTIONS,
        max_buffered_bytes: int = MAX_BUFFERED_BYTES,
        idle_timeout: float = IDLE_TIMEOUT_S,
        frame_timeout: float = FRAME_TIMEOUT_S,
        tls: TlsServerConfig | None = None,
        handshake_timeout: float = HANDSHAKE_TIMEOUT_S,
        workers: int = WORKERS,
    ) -> None:
        self.host = host
        self._requested_port = port
        self.name = name
        self.max_frame = max_frame
        self.max_connections = max_connections
        if max_buffered_bytes < max_frame:
            raise ValueError(
                f"{name} server: max_buffered_bytes ({max_buffered_bytes}) is below"
                f" max_frame ({max_frame}): its largest frame would never fit"
            )
        self.frame_budget = FrameBudget(max_buffered_bytes)
        self.idle_timeout = idle_timeout
        self.frame_timeout = frame_timeout
        self.tls = TlsGate(tls or TlsServerConfig(mode=DISABLED), handshake_timeout)
        self.workers = workers
        self._warnings = _RateLimitedLog(log, WARNINGS_PER_MINUTE)
        self._handlers: dict[int, Handler] = {}
        self._internal: dict[int, Handler] = {}  # handled without ``authorize``
        # (a data server) relay what it does not serve to another server; set before start
        self.relay: RelayTo | None = None
        # (a control server) the secret a relaying server's links open with; set before start
        self.relay_token: str | None = None
        # the broker's ACL check (RocketMQ's RPC hook): every request passes it before its
        # handler, unknown codes too; set before ``start``
        self.authorize: Authorizer | None = None
        # the broker's metrics hook (``Observer``), called as each request is answered;
        # set before ``start``
        self.observe: Observer | None = None
        self._disconnect_callbacks: list[Callable[[Connection], None]] = []
        self._listener: socket.socket | None = None
        self._port = port
        self._lock = threading.Lock()
        self._connections: dict[int, Connection] = {}
        self._protocols: dict[int, _FrameProtocol] = {}  # the loop's own (served connections)
        self._conn_ids = itertools.count(1)
        self.loop: asyncio.AbstractEventLoop | None = None  # made by ``start``
        # accepted, not served yet: waiting for a first byte (its timer) or a TLS handshake
        self._unserved: dict[int, tuple[socket.socket, asyncio.TimerHandle | None]] = {}
        self._loop_thread: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._stopping = threading.Event()
        self._drained = threading.Condition(self._lock)  # a connection's last callbacks ran

    def register(self, code: int, handler: Handler) -> None:
        """Route requests with ``code`` to ``handler(request, connection)``; a returned
        command is sent back (``None``: no response)."""
        self._handlers[int(code)] = handler

    def register_internal(self, code: int, handler: Handler) -> None:
        """Route ``code`` (one of shmq's internal requests) to ``handler``, past the
        ``authorize`` hook: the handler checks who may send it."""
        self._internal[int(code)] = handler

    def on_disconnect(self, callback: Callable[[Connection], None]) -> None:
        """Call ``callback(connection)`` once for each connection after it closes, after
        its last request was handled."""
        self._disconnect_callbacks.append(callback)

    def connection(self, conn_id: int) -> Connection | None:
        """The open connection with id ``conn_id``: handlers remember clients by connection
        id and later push requests to them (a transaction check-back)."""
        with self._lock:
            return self._connections.get(conn_id)

    @property
    def buffered_bytes(self) -> int:
        """The bytes reserved now for request frames of all connections (at most
        ``max_buffered_bytes``)."""
        return self.frame_budget.reserved

    def queued_requests(self) -> collections.Counter[int]:
        """The requests waiting for a worker, by request code (the metrics' processor
        watermarks). Read without the connections' locks: each inbox is copied in one step
        under the GIL, so a count may miss a request queued or taken meanwhile, never
        slows one."""
        queued: collections.Counter[int] = collections.Counter()
        for conn in list(self._connections.values()):
            waiting = tuple(conn._inbox)
            queued.update(item[0].code for item in waiting
                          if item and isinstance(item[0], RemotingCommand))  # fmt: skip
        return queued

    @property
    def port(self) -> int:
        return self._port

    @property
    def address(self) -> str:
        return _addr(self.host, self._port)

    def start(self) -> None:
        """Bind, listen and serve (the loop and the workers are daemon threads);
        ``RemotingError`` if binding fails."""
        if self._listener is not None:
            raise RemotingError(f"{self.name} server is already started")
        self.tls.check()
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind((self.host, self._requested_port))
            listener.listen(128)
        except OSError as exc:
            listener.close()
            reason = exc.strerror or str(exc)
            raise RemotingError(
                f"{self.name} server cannot listen on"
                f" {_addr(self.host, self._requested_port)}: {reason}"
            ) from exc
        listener.setblocking(False)
        self._listener = listener
        self._port = listener.getsockname()[1]
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix=f"{self.name}-worker")
        self.loop = asyncio.new_event_loop()
        self.loop.add_reader(listener.fileno(), self._accept)
        self.loop.call_later(SWEEP_S, self._sweep)
        self._loop_thread = threading.Thread(
            target=self.loop.run_forever, name=f"{self.name}-loop", daemon=True
        )
        self._loop_thread.start()
        log.info("%s server listening on %s (TLS %s)", self.name, self.address, self.tls.mode)

    def stop(self) -> None:
        """Close the listener and every connection, run their disconnect callbacks, stop
        the loop and the workers; idempotent."""
        if self._stopping.is_set() or self._listener is None:
            return
        self._stopping.set()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        with self._lock:
            live = list(self._connections.values())
        for conn in live:
            conn.close()
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self._close_listener)
        with self._drained:  # every served connection's callbacks ran, or the deadline
            while self._connections and time.monotonic() < deadline:
                self._drained.wait(max(0.0, deadline - time.monotonic()))
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self.loop.stop)
        if self._loop_thread is not None and self._loop_thread is not threading.current_thread():
            self._loop_thread.join(max(0.1, deadline - time.monotonic()))
            if not self._loop_thread.is_alive():
                self.loop.close()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        log.info("%s server on %s stopped", self.name, self.address)

    # -- on the loop ---------------------------------------------------------------------------

    def _close_listener(self) -> None:
        """Stop accepting, and drop the connections not served yet."""
        assert self._listener is not None
        self.loop.remove_reader(self._listener.fileno())
        self._listener.close()
        for conn_id in list(self._unserved):
            conn = self._connections.get(conn_id)
            if conn is not None:
                self._drop_unserved(self._unserved[conn_id][0], conn)

    def _accept(self) -> None:
        """Take every pending connection; each is served once its first byte says how."""
        assert self._listener is not None
        while not self._stopping.is_set():
            try:
                sock, (peer_host, peer_port) = self._listener.accept()[:2]
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                log.exception("%s server: accept failed", self.name)
                self.loop.remove_reader(self._listener.fileno())  # e.g. EMFILE: do not spin
                self.loop.call_later(0.05, self.loop.add_reader, self._listener.fileno(),
                                     self._accept)  # fmt: skip
                return
            peer = _addr(peer_host, peer_port)
            with self._lock:
                full = len(self._connections) >= self.max_connections
                conn = None if full else Connection(next(self._conn_ids), peer, self.loop)
                if conn is not None:
                    conn.observe = self.observe
                if conn is not None:
                    self._connections[conn.id] = conn
            if conn is None:
                self._warnings.warn("%s server: refusing %s: %d connections are open (the "
                                    "limit)", self.name, peer, self.max_connections)  # fmt: skip
                sock.close()
                continue
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            log.debug("%s server: %s connected (id %d)", self.name, peer, conn.id)
            silent = self.loop.call_later(self.idle_timeout, self._silent, sock, conn)
            self._unserved[conn.id] = (sock, silent)
            self.loop.add_reader(sock.fileno(), self._first_byte, sock, conn, silent)

    def _silent(self, sock: socket.socket, conn: Connection) -> None:
        self._warnings.warn("%s server: closing %s: silent for %.0f s", self.name, conn.peer,
                            self.idle_timeout)  # fmt: skip
        self._drop_unserved(sock, conn)

    def _drop_unserved(self, sock: socket.socket, conn: Connection) -> None:
        _, silent = self._unserved.pop(conn.id, (None, None))
        if silent is not None:
            silent.cancel()
        with contextlib.suppress(ValueError, OSError):
            self.loop.remove_reader(sock.fileno())
        sock.close()
        conn.close()
        self._forget(conn)

    def _first_byte(
        self, sock: socket.socket, conn: Connection, silent: asyncio.TimerHandle
    ) -> None:
        """The first byte tells TLS from plain TCP (``TlsGate.wants_tls``), then the
        connection is served (TLS: after its handshake)."""
        try:
            first = sock.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            first, reason = b"", exc
        else:
            reason = None
        silent.cancel()
        self._unserved[conn.id] = (sock, None)
        self.loop.remove_reader(sock.fileno())
        if not first:
            log.debug("%s server: %s went away before its first frame: %s", self.name,
                      conn.peer, reason)  # fmt: skip
            self._drop_unserved(sock, conn)
            return
        try:
            tls = self.tls.wants_tls(first[0])
            context = self.tls.context() if tls else None
        except TlsRefused as exc:
            self._warnings.warn("%s server: refusing %s: %s", self.name, conn.peer, exc)
            self._drop_unserved(sock, conn)
            return
        self.loop.create_task(self._serve(sock, conn, context))

    async def _serve(
        self, sock: socket.socket, conn: Connection, context: ssl.SSLContext | None
    ) -> None:
        def protocol() -> _FrameProtocol:
            return _FrameProtocol(self, conn)

        try:
            if context is None:
                await self.loop.connect_accepted_socket(protocol, sock)
            else:
                await self.loop.connect_accepted_socket(
                    protocol, sock, ssl=context, ssl_handshake_timeout=self.tls.handshake_timeout
                )
        except asyncio.CancelledError:
            self._drop_unserved(sock, conn)
            raise
        except (ssl.SSLError, ConnectionError, TimeoutError, OSError) as exc:
            if isinstance(exc, ssl.SSLError):
                self._warnings.warn("%s server: %s failed the TLS handshake: %s", self.name,
                                    conn.peer, exc)  # fmt: skip
            else:
                self._warnings.warn(
                    "%s server: closing %s: no TLS handshake within %.0f s (%s)",
                    self.name, conn.peer, self.tls.handshake_timeout, exc or type(exc).__name__,
                )  # fmt: skip
            self._drop_unserved(sock, conn)
            return
        self._unserved.pop(conn.id, None)

    def _sweep(self) -> None:
        """Close connections idle past ``idle_timeout`` and frames slower than
        ``frame_timeout``; then again in ``SWEEP_S``."""
        now = time.monotonic()
        for proto in list(self._protocols.values()):
            if proto.transport is None or proto.transport.is_closing():
                continue
            started = proto.frame_started
            if started is not None and now - started > self.frame_timeout:
                proto._refuse(f"a frame slower than {self.frame_timeout:.0f} s")
            elif not proto.conn.relayed and now - proto.last_read > self.idle_timeout:
                proto._refuse(f"idle for {self.idle_timeout:.0f} s")
        if not self._stopping.is_set():
            self.loop.call_later(SWEEP_S, self._sweep)

    def _lost(self, proto: _FrameProtocol) -> None:
        """A served connection closed: its last requests still run, then its callbacks."""
        self._protocols.pop(proto.conn.id, None)
        proto.conn.close()
        self._enqueue(proto.conn, _DISCONNECTED)

    def _forget(self, conn: Connection) -> None:
        with self._drained:
            self._connections.pop(conn.id, None)
            self._drained.notify_all()

    # -- on the workers ------------------------------------------------------------------------

    def _enqueue(self, conn: Connection, item: _Queued | None) -> bool:
        """Queue a request (or the disconnect) for the connection's worker; True when its
        inbox is over its bound (the loop stops reading it until it drains)."""
        with conn._lock:
            conn._inbox.append(item)
            if item is not None:
                conn._inbox_bytes += item[2]
            full = _full(conn)
            start = not conn._draining
            conn._draining = True
        if start:
            self._submit(conn)
        return full

    def _submit(self, conn: Connection) -> None:
        assert self._pool is not None
        try:
            self._pool.submit(self._drain, conn)
        except RuntimeError:  # the pool is shut down: the server stopped
            self._forget(conn)

    def _drain(self, conn: Connection) -> None:
        """Handle the connection's requests in order: until its inbox is empty, or for
        ``TURN`` requests and then behind the other connections waiting for a worker (a
        connection with thousands of requests pipelined does not keep the rest waiting)."""
        for _ in range(TURN):
            with conn._lock:
                if not conn._inbox:
                    conn._draining = False
                    return
                was_full = _full(conn)  # before the pop: it may be the one that crosses
                item = conn._inbox.popleft()
                if item is not None:
                    conn._inbox_bytes -= item[2]
                resume = was_full and not _full(conn)
            if resume:
                proto = self._protocols.get(conn.id)
                if proto is not None:
                    with contextlib.suppress(RuntimeError):
                        self.loop.call_soon_threadsafe(proto.inbox_drained)
            if item is _DISCONNECTED:
                self._disconnected(conn)
                return
            if item is _END_OF_INPUT:
                conn.finish()
                continue
            request, held, _ = item
            if isinstance(request, _Relayed):
                try:
                    owed = self.relay.owed(conn) if self.relay is not None else None
                    if owed is not None:
                        conn.relay_frame(owed)
                    conn.relay_frame(request.frame)
                except RemotingConnectError as exc:
                    log.debug("%s server: %s", self.name, exc)
                finally:
                    self.frame_budget.release(held)
                continue
            # internal requests are not the server's traffic: not in its request latency
            observed = conn.observe is not None and request.code not in self._internal
            if observed:
                conn.handling(request)
            try:
                response = self._dispatch(request, conn)
                if response is not None and not request.is_oneway:
                    conn.send(response)
                elif observed:
                    conn.handled(request)
            except RemotingConnectError as exc:
                log.debug("%s server: %s", self.name, exc)
            finally:
                self.frame_budget.release(held)
        self._submit(conn)  # ``_draining`` stays set: its turn comes again

    def _disconnected(self, conn: Connection) -> None:
        link = conn.link
        if link is not None:  # after what its last requests relayed (the loop's order)
            owed = self.relay.owed(conn) if self.relay is not None else None
            with contextlib.suppress(RuntimeError):
                if owed is not None:
                    self.loop.call_soon_threadsafe(link.forward, owed)
                self.loop.call_soon_threadsafe(link.close)
        for callback in self._disconnect_callbacks:
            try:
                callback(conn)
            except Exception:
                log.exception("%s server: disconnect callback failed for %r", self.name, conn)
        self._forget(conn)

    def _answer_malformed(self, exc: RemotingHeaderError, conn: Connection) -> bool:
        """Answer a request whose header broke after its opaque was read with SYSTEM_ERROR
        naming the reason (nothing answers a oneway request); False when the connection is
        to close: a malformed response frame, or the answer cannot be sent."""
        request = exc.request
        if request.is_response:
            self._warnings.warn("%s server: closing %s: %s", self.name, conn.peer, exc)
            return False
        self._warnings.warn(
            "%s server: %s from %s is malformed, %s: %s",
            self.name, request_name(request.code), conn.peer,
            "dropped (oneway)" if request.is_oneway else "answered SYSTEM_ERROR", exc,
        )  # fmt: skip
        if request.is_oneway:
            return True
        try:
            conn.send(RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, str(exc)))
        except RemotingConnectError as gone:
            log.debug("%s server: %s", self.name, gone)
            return False
        return True

    def _dispatch(self, request: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        internal = self._internal.get(request.code)
        if internal is not None:
            return call_handler(internal, request, conn, self.name)
        if self.authorize is not None:
            refusal = call_handler(self._refuse_unauthorized, request, conn, self.name)
            if refusal is not None:
                return refusal
        handler = self._handlers.get(request.code)
        if handler is None:
            return RemotingCommand.response_to(
                request,
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                f"{request_name(request.code)} not supported by the {self.name} server",
            )
        return call_handler(handler, request, conn, self.name)

    def _refuse_unauthorized(
        self, request: RemotingCommand, conn: Connection
    ) -> RemotingCommand | None:
        """None when ``authorize`` lets ``request`` through (its errors: the refusal)."""
        assert self.authorize is not None
        self.authorize(request, conn)
        return None


def _framed(payload: memoryview) -> bytes:
    """A frame's bytes again, its length first (as they arrived)."""
    return len(payload).to_bytes(4, "big") + payload


def call_handler(
    handler: Handler, request: RemotingCommand, conn: Connection, server: str
) -> RemotingCommand | None:
    """``handler``'s response to ``request``, its errors turned into error responses (a
    ``ResponseError`` its code, anything else SYSTEM_ERROR); for a handler run on a thread
    of its own too."""
    try:
        return handler(request, conn)
    except ResponseError as exc:
        return RemotingCommand.response_to(request, exc.code, exc.remark)
    except (ShmqError, ValueError) as exc:
        return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, str(exc))
    except Exception as exc:
        log.exception(
            "%s server: handler for %s from %s failed",
            server, request_name(request.code), conn.peer,
        )  # fmt: skip
        return RemotingCommand.response_to(
            request, ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}"
        )


class _RateLimitedLog:
    """At most ``per_minute`` warnings a minute; the rest are counted and reported with the
    next one that gets through (a flood of bad peers must not flood the log)."""

    def __init__(self, logger: logging.Logger, per_minute: int) -> None:
        self.logger = logger
        self.per_minute = per_minute
        self._window = 0.0
        self._count = 0
        self._dropped = 0
        self._lock = threading.Lock()

    def warn(self, msg: str, *args: object) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._window >= 60:
                self._window, self._count = now, 0
            self._count += 1
            if self._count > self.per_minute:
                self._dropped += 1
                return
            dropped, self._dropped = self._dropped, 0
        if dropped:
            msg += f" ({dropped} similar warnings suppressed)"
        self.logger.warning(msg, *args)
