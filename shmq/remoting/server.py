"""A threaded TCP server for control-plane requests (namesrv and broker control servers).

The control plane is rare and small (registrations, routes, offsets, admin), so simple wins
over fast: one accept thread, one thread per connection, handlers run on the connection's
thread in arrival order. A connection that sends a frame the server cannot answer (a bad
length, a header that is not JSON, a response frame) is closed with one warning; a request
whose header breaks only after its opaque was read is answered with SYSTEM_ERROR and the
connection kept (``RemotingHeaderError``). The server and every other connection keep
working. Handlers may also push oneway
requests to a client through ``Connection.send`` from any thread, or call a client and wait
for its answer (``Connection.invoke``: RocketMQ's ``Broker2Client.callClient``, e.g.
GET_CONSUMER_RUNNING_INFO); the connection's thread hands such responses to the caller, and
a response frame that answers nothing asked on that connection still closes it.

Nothing a peer sends may cost the server more than a bound: a frame's memory grows only as
its bytes arrive, a frame must complete within ``frame_timeout`` once its length is read,
the large frames of all connections together hold at most ``max_buffered_bytes``
(``frame_budget``: a frame that finds no room within a second closes its connection), a
connection silent for ``idle_timeout`` (RocketMQ's ``serverChannelMaxIdleTimeSeconds``,
120 s) is closed, at most ``max_connections`` are served at once (more are closed at
accept), and the warnings about bad peers are rate-limited.

TLS is decided per connection on its own thread, before its first frame (``tls_server``:
the first byte tells TLS from plain TCP, the mode says which are served), so a client that
starts a handshake and stalls holds only its thread, and only for the handshake timeout.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable

from shmq.errors import (
    RemotingConnectError,
    RemotingError,
    RemotingFrameError,
    ResponseError,
    ShmqError,
)
from shmq.remoting.frame_budget import MAX_BUFFERED_BYTES, FrameBudget
from shmq.remoting.frames import FrameReader
from shmq.remoting.pending import PendingCalls
from shmq.remoting.protocol import (
    MAX_FRAME_SIZE,
    RemotingCommand,
    RemotingHeaderError,
    ResponseCode,
    request_name,
)
from shmq.remoting.tls_server import (
    DISABLED,
    HANDSHAKE_TIMEOUT_S,
    TlsGate,
    TlsRefused,
    TlsServerConfig,
)
from shmq.remoting.tls_socket import SharedTlsSocket

log = logging.getLogger(__name__)

STOP_TIMEOUT_S = 1.0
IDLE_TIMEOUT_S = 120.0
FRAME_TIMEOUT_S = 30.0
MAX_CONNECTIONS = 1024
WARNINGS_PER_MINUTE = 20
LATE_ANSWERS = 16  # opaques of calls to a client that timed out, whose answer may still come

Handler = Callable[[RemotingCommand, "Connection"], RemotingCommand | None]
# None when the request may be handled; raises (a ResponseError: its code and remark) if not
Authorizer = Callable[[RemotingCommand, "Connection"], None]


def _addr(host: str, port: int) -> str:
    return f"{host}:{port}"


class Connection:
    """One accepted client connection; ``send`` and ``invoke`` are safe from any thread."""

    def __init__(self, sock: socket.socket, conn_id: int, peer: str) -> None:
        self.sock = sock
        self.id = conn_id
        self.peer = peer
        self._send_lock = threading.Lock()
        self._closed = False
        self._calls = PendingCalls(peer, LATE_ANSWERS)

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
        """Write one frame; ``RemotingConnectError`` if the connection is gone."""
        frame = cmd.encode()
        with self._send_lock:
            if self._closed:
                raise RemotingConnectError(f"connection to {self.peer} is closed")
            try:
                self.sock.sendall(frame)
            except OSError as exc:
                raise RemotingConnectError(f"cannot send to {self.peer}: {exc}") from exc

    @property
    def tls(self) -> bool:
        """Whether the connection speaks TLS."""
        return isinstance(self.sock, SharedTlsSocket)

    def upgrade(self, sock: socket.socket | SharedTlsSocket) -> bool:
        """Serve the connection on ``sock`` (its TLS socket); False, ``sock`` closed, when
        the connection was closed meanwhile (the server stops)."""
        with self._send_lock:
            if not self._closed:
                self.sock = sock
                return True
        sock.close()
        return False

    def close(self) -> None:
        """Close the socket (wakes the connection's reader thread); idempotent. A caller
        still waiting in ``invoke`` fails at once."""
        with self._send_lock:
            if self._closed:
                return
            self._closed = True
        self._calls.fail_all()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()

    def __repr__(self) -> str:
        return f"Connection(id={self.id}, peer={self.peer})"


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
        self._warnings = _RateLimitedLog(log, WARNINGS_PER_MINUTE)
        self._handlers: dict[int, Handler] = {}
        # the broker's ACL check (RocketMQ's RPC hook): every request passes it before its
        # handler, unknown codes too; set before ``start``
        self.authorize: Authorizer | None = None
        self._disconnect_callbacks: list[Callable[[Connection], None]] = []
        self._listener: socket.socket | None = None
        self._port = port
        self._lock = threading.Lock()
        self._connections: dict[int, tuple[Connection, threading.Thread]] = {}
        self._conn_ids = itertools.count(1)
        self._accept_thread: threading.Thread | None = None
        self._stopping = threading.Event()

    def register(self, code: int, handler: Handler) -> None:
        """Route requests with ``code`` to ``handler(request, connection)``; a returned
        command is sent back (``None``: no response)."""
        self._handlers[int(code)] = handler

    def on_disconnect(self, callback: Callable[[Connection], None]) -> None:
        """Call ``callback(connection)`` once for each connection after it closes."""
        self._disconnect_callbacks.append(callback)

    def connection(self, conn_id: int) -> Connection | None:
        """The open connection with id ``conn_id``: handlers remember clients by connection
        id and later push requests to them (a transaction check-back)."""
        with self._lock:
            entry = self._connections.get(conn_id)
        return entry[0] if entry is not None else None

    @property
    def buffered_bytes(self) -> int:
        """The bytes reserved now for request frames of all connections (at most
        ``max_buffered_bytes``)."""
        return self.frame_budget.reserved

    @property
    def port(self) -> int:
        return self._port

    @property
    def address(self) -> str:
        return _addr(self.host, self._port)

    def start(self) -> None:
        """Bind, listen and serve in daemon threads; ``RemotingError`` if binding fails."""
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
        self._listener = listener
        self._port = listener.getsockname()[1]
        self._accept_thread = threading.Thread(
            target=self._accept_loop, name=f"{self.name}-accept", daemon=True
        )
        self._accept_thread.start()
        log.info("%s server listening on %s (TLS %s)", self.name, self.address, self.tls.mode)

    def stop(self) -> None:
        """Close the listener and every connection, join the threads; idempotent."""
        if self._stopping.is_set() or self._listener is None:
            return
        self._stopping.set()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes accept() on Linux
        self._listener.close()
        with self._lock:
            live = list(self._connections.values())
        for conn, _ in live:
            conn.close()
        threads = [t for _, t in live]
        if self._accept_thread is not None:
            threads.append(self._accept_thread)
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))
        log.info("%s server on %s stopped", self.name, self.address)

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stopping.is_set():
            try:
                sock, (peer_host, peer_port) = self._listener.accept()[:2]
            except OSError:
                if self._stopping.is_set():
                    return
                log.exception("%s server: accept failed", self.name)
                time.sleep(0.05)  # e.g. EMFILE: do not spin
                continue
            with self._lock:
                full = len(self._connections) >= self.max_connections
            if full:
                self._warnings.warn(
                    "%s server: refusing %s: %d connections are open (the limit)",
                    self.name, _addr(peer_host, peer_port), self.max_connections,
                )  # fmt: skip
                sock.close()
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(self.idle_timeout)
            conn = Connection(sock, next(self._conn_ids), _addr(peer_host, peer_port))
            thread = threading.Thread(
                target=self._serve, args=(conn,), name=f"{self.name}-conn-{conn.id}", daemon=True
            )
            with self._lock:
                if self._stopping.is_set():
                    conn.close()
                    return
                self._connections[conn.id] = (conn, thread)
            thread.start()

    def _serve(self, conn: Connection) -> None:
        log.debug("%s server: %s connected (id %d)", self.name, conn.peer, conn.id)
        frames: FrameReader | None = None
        try:
            if not self._admit(conn):
                return
            frames = FrameReader(conn.sock, self.max_frame, self.frame_timeout, self.frame_budget)
            while True:
                try:
                    request = frames.read()
                except RemotingHeaderError as exc:
                    if self._answer_malformed(exc, conn):
                        continue
                    return
                except (RemotingFrameError, RemotingConnectError) as exc:
                    self._warnings.warn("%s server: closing %s: %s", self.name, conn.peer, exc)
                    return
                except TimeoutError:
                    self._warnings.warn(
                        "%s server: closing %s: idle for %.0f s or a frame slower than %.0f s",
                        self.name, conn.peer, self.idle_timeout, self.frame_timeout,
                    )  # fmt: skip
                    return
                except OSError as exc:
                    if not self._stopping.is_set():
                        log.debug("%s server: %s read failed: %s", self.name, conn.peer, exc)
                    return
                if request is None:
                    return
                if request.is_response and conn.answered(request):
                    continue
                if request.is_response:
                    self._warnings.warn(
                        "%s server: closing %s: it sent a response frame (%s, opaque %d)"
                        " where a request was expected",
                        self.name, conn.peer, request_name(request.code), request.opaque,
                    )  # fmt: skip
                    return
                response = self._dispatch(request, conn)
                if response is None or request.is_oneway:
                    continue
                try:
                    conn.send(response)
                except RemotingConnectError as exc:
                    log.debug("%s server: %s", self.name, exc)
                    return
        finally:
            if frames is not None:
                frames.release()
            conn.close()
            with self._lock:
                self._connections.pop(conn.id, None)
            for callback in self._disconnect_callbacks:
                try:
                    callback(conn)
                except Exception:
                    log.exception("%s server: disconnect callback failed for %r", self.name, conn)

    def _admit(self, conn: Connection) -> bool:
        """Serve ``conn`` as its first byte and the TLS mode say (plain, or TLS once
        handshaken); False when it is closed instead, with a warning naming why."""
        try:
            sock = self.tls.admit(conn.sock, self.idle_timeout)
        except TlsRefused as exc:
            self._warnings.warn("%s server: refusing %s: %s", self.name, conn.peer, exc)
            return False
        except TimeoutError:
            self._warnings.warn(
                "%s server: closing %s: silent for %.0f s or no TLS handshake within %.0f s",
                self.name, conn.peer, self.idle_timeout, self.tls.handshake_timeout,
            )  # fmt: skip
            return False
        except ssl.SSLError as exc:
            self._warnings.warn("%s server: %s failed the TLS handshake: %s", self.name,
                                conn.peer, exc)  # fmt: skip
            return False
        except OSError as exc:
            log.debug("%s server: %s went away before its first frame: %s", self.name,
                      conn.peer, exc)  # fmt: skip
            return False
        return sock is not None and (sock is conn.sock or conn.upgrade(sock))

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
