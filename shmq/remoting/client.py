"""A blocking control-plane client: one pooled connection per address, one request at a time.

Control-plane requests are rare and small, so each connection serialises its requests under a
lock instead of multiplexing them. Any failure (timeout, lost connection, malformed frame)
drops the connection, so a late response can never be taken for the next request's; the
next ``invoke`` reconnects. ``tls`` makes every connection TLS (``tls.open_connection``).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from types import TracebackType
from typing import Any

from shmq.errors import (
    ConfigError,
    RemotingConnectError,
    RemotingError,
    RemotingTimeoutError,
)
from shmq.remoting.frames import read_frame
from shmq.remoting.protocol import (
    FLAG_ONEWAY,
    MAX_FRAME_SIZE,
    RemotingCommand,
    check_response,
    request_name,
)
from shmq.remoting.security.credentials import Credentials
from shmq.remoting.security.tls import TlsOptions, open_connection, tls_options

log = logging.getLogger(__name__)


def parse_addr(addr: str) -> tuple[str, int]:
    """``"host:port"`` → ``(host, port)``; ``ConfigError`` if it is not one."""
    host, sep, port_text = addr.rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ConfigError(f"address {addr!r} is not host:port with a port in 1..65535")
    return host, int(port_text)


class _Channel:
    """The pooled connection to one address; ``lock`` serialises its requests."""

    def __init__(self, addr: str, tls: TlsOptions | None) -> None:
        self.addr = addr
        self.host, self.port = parse_addr(addr)
        self.tls = tls
        self.lock = threading.Lock()
        self.sock: socket.socket | None = None

    def connect(self, timeout: float) -> socket.socket:
        if self.sock is None:
            try:
                self.sock = open_connection(self.host, self.port, timeout, self.tls)
            except OSError as exc:
                reason = exc.strerror or str(exc) or type(exc).__name__
                raise RemotingConnectError(f"cannot connect to {self.addr}: {reason}") from exc
        return self.sock

    def drop(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
            self.sock = None


class RemotingClient:
    """Sends requests to namesrv and broker control servers and waits for the responses.

    ``credentials`` (``(access_key, secret_key)``) signs every request for a server with
    ACL on (``remoting.security.credentials``); ``tls`` (True or ``TlsOptions``) connects with TLS.
    The other connections a client opens (duplex, data path) take the same two from here.
    """

    def __init__(
        self,
        *,
        connect_timeout: float = 3.0,
        default_timeout: float = 3.0,
        max_frame: int = MAX_FRAME_SIZE,
        credentials: Credentials | tuple[str, str] | None = None,
        tls: bool | TlsOptions | None = None,
    ) -> None:
        self.credentials = Credentials.of(credentials)
        self.tls = tls_options(tls)
        self.connect_timeout = connect_timeout
        self.default_timeout = default_timeout
        self.max_frame = max_frame
        self._channels: dict[str, _Channel] = {}
        self._lock = threading.Lock()

    def _channel(self, addr: str) -> _Channel:
        with self._lock:
            channel = self._channels.get(addr)
            if channel is None:
                channel = self._channels[addr] = _Channel(addr, self.tls)
            return channel

    def local_address(self, addr: str) -> tuple[str, int]:
        """This side's ``(host, port)`` of the connection to ``addr`` (connecting if
        needed): what the broker sees as the client's address, RocketMQ's bornHost."""
        channel = self._channel(addr)
        with channel.lock:
            host, port = channel.connect(self.connect_timeout).getsockname()[:2]
        return host, port

    def invoke(
        self, addr: str, request: RemotingCommand, timeout: float | None = None
    ) -> RemotingCommand:
        """Send ``request`` to ``addr`` and return its response (any response code).

        Raises ``RemotingConnectError`` (cannot connect, connection lost),
        ``RemotingTimeoutError`` (no response within ``timeout`` seconds, default
        ``default_timeout``) or ``RemotingFrameError`` (malformed response frame).
        """
        if request.is_oneway or request.is_response:
            raise ValueError(f"invoke needs a two-way request, not {request!r}")
        timeout = self.default_timeout if timeout is None else timeout
        channel = self._channel(addr)
        with channel.lock:
            deadline = time.monotonic() + timeout
            sock = channel.connect(min(self.connect_timeout, timeout))
            try:
                self._send(sock, request, deadline)
                while True:
                    frame = read_frame(sock, self.max_frame, deadline)
                    if frame is None:
                        raise RemotingConnectError(
                            f"connection to {addr} closed while waiting for the response"
                            f" to {request_name(request.code)}"
                        )
                    if frame.is_response and frame.opaque == request.opaque:
                        return frame
                    log.debug("ignoring a stray frame from %s: %r", addr, frame)
            except TimeoutError:
                channel.drop()
                raise RemotingTimeoutError(
                    f"no response from {addr} to {request_name(request.code)} within {timeout:g} s"
                ) from None
            except RemotingError:
                channel.drop()
                raise
            except OSError as exc:
                channel.drop()
                raise RemotingConnectError(
                    f"connection to {addr} lost during {request_name(request.code)}: {exc}"
                ) from exc

    def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        """Send ``request`` with its oneway flag set (in place); no response is awaited."""
        request.flag |= FLAG_ONEWAY
        channel = self._channel(addr)
        with channel.lock:
            sock = channel.connect(self.connect_timeout)
            try:
                self._send(sock, request, time.monotonic() + self.default_timeout)
            except OSError as exc:
                channel.drop()
                raise RemotingConnectError(
                    f"cannot send {request_name(request.code)} to {addr}: {exc}"
                ) from exc

    def _send(self, sock: socket.socket, request: RemotingCommand, deadline: float) -> None:
        if self.credentials is not None:
            self.credentials.sign(request)
        sock.settimeout(max(deadline - time.monotonic(), 1e-3))
        sock.sendall(request.encode())

    def invoke_json(
        self,
        addr: str,
        code: int,
        ext_fields: dict[str, Any] | None = None,
        body_obj: Any = None,
        timeout: float | None = None,
    ) -> tuple[RemotingCommand, Any]:
        """Send a request (``body_obj`` as JSON, if given), require SUCCESS
        (``ResponseError`` otherwise) and return the response with its JSON body (or None)."""
        body = b"" if body_obj is None else RemotingCommand.body_json(body_obj)
        request = RemotingCommand.request(code, ext_fields, body)
        response = check_response(self.invoke(addr, request, timeout))
        return response, response.json_body()

    def close(self) -> None:
        """Close every pooled connection (the client stays usable; it reconnects)."""
        with self._lock:
            channels = list(self._channels.values())
            self._channels.clear()
        for channel in channels:
            with channel.lock:
                channel.drop()

    def __enter__(self) -> RemotingClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
