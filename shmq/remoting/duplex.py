"""A control-plane connection that the server may also speak on first.

A consumer's connection to a broker carries its heartbeats and, in the other direction, the
broker's oneway requests to it (``NOTIFY_CONSUMER_IDS_CHANGED``,
``RESET_CONSUMER_CLIENT_OFFSET``); a transaction producer's carries its heartbeats and
oneway end requests, and the broker's check-backs (``CHECK_TRANSACTION_STATE``). Those
arrive at any time, so a reader thread owns the socket: responses complete the waiting
request by ``opaque``; requests go to ``on_request`` (called on the reader thread, so it
must only note the event, or build a small answer, and return). A request the broker waits
on (not oneway, e.g. ``GET_CONSUMER_RUNNING_INFO``) is answered with what ``on_request``
returns, or REQUEST_CODE_NOT_SUPPORTED when it returns None; a request that takes time
(running a listener) is answered when the ``Future`` ``on_request`` returns is done.

Oneway requests whose sender need not wait for the socket (a transaction's end) go through
``send_soon``: written at once by the caller when the socket takes them without blocking,
else queued for a writer thread of the channel, which writes whatever is queued in one
write, so ends that pile up share a syscall.

A lost connection fails every waiting request; the next ``invoke`` reconnects, and
``on_reconnect`` lets the owner re-announce itself (a heartbeat). ``tls`` connects with TLS;
an SSL socket has no write that returns instead of waiting, so ``send_soon`` then always
hands its frames to the writer thread.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable
from concurrent.futures import Future
from functools import partial
from typing import Any

from shmq.errors import RemotingConnectError, RemotingError
from shmq.remoting.client import parse_addr
from shmq.remoting.frames import FrameReader
from shmq.remoting.pending import PendingCalls
from shmq.remoting.protocol import (
    FLAG_ONEWAY,
    MAX_FRAME_SIZE,
    RemotingCommand,
    ResponseCode,
    check_response,
    request_name,
)
from shmq.remoting.security.credentials import Credentials
from shmq.remoting.security.tls import TlsOptions, open_connection, tls_options
from shmq.wakeup import Signal

log = logging.getLogger(__name__)


class DuplexChannel:
    """One connection to ``addr``; ``invoke`` may be called from any thread. With
    ``credentials`` the requests it sends are signed (``remoting.security.credentials``),
    the answers to the server's requests not, as RocketMQ signs requests only."""

    def __init__(
        self,
        addr: str,
        on_request: Callable[[RemotingCommand], RemotingCommand | Future | None],
        *,
        connect_timeout: float = 3.0,
        default_timeout: float = 3.0,
        max_frame: int = MAX_FRAME_SIZE,
        credentials: Credentials | tuple[str, str] | None = None,
        tls: bool | TlsOptions | None = None,
    ) -> None:
        self.addr = addr
        self.host, self.port = parse_addr(addr)
        self.credentials = Credentials.of(credentials)
        self.tls = tls_options(tls)
        self.on_request = on_request
        self.connect_timeout = connect_timeout
        self.default_timeout = default_timeout
        self.max_frame = max_frame
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._calls = PendingCalls(addr)
        self._closed = False
        self._outbox: list[bytes] = []  # frames of send_soon, for the writer thread
        self._outbox_ready = Signal()
        self._writer: threading.Thread | None = None

    def _connect(self) -> socket.socket:
        with self._lock:
            if self._closed:
                raise RemotingConnectError(f"the channel to {self.addr} is closed")
            if self._sock is not None:
                return self._sock
            try:
                sock = open_connection(
                    self.host, self.port, self.connect_timeout, self.tls, shared=True
                )
            except OSError as exc:
                reason = exc.strerror or str(exc) or type(exc).__name__
                raise RemotingConnectError(f"cannot connect to {self.addr}: {reason}") from exc
            sock.settimeout(None)
            self._sock = sock
            threading.Thread(
                target=self._read_loop, args=(sock,), name=f"shmq-duplex-{self.addr}", daemon=True
            ).start()
            return sock

    @property
    def connected(self) -> bool:
        return self._sock is not None

    def invoke(self, request: RemotingCommand, timeout: float | None = None) -> RemotingCommand:
        """Send ``request`` and wait for its response (any code)."""
        timeout = self.default_timeout if timeout is None else timeout
        sock = self._connect()
        if self.credentials is not None:
            self.credentials.sign(request)
        return self._calls.call(request, lambda: self._send(sock, request), timeout)

    def send_soon(self, request: RemotingCommand) -> None:
        """Send ``request``, marked oneway, without waiting for the socket
        (``send_frame_soon``)."""
        request.flag |= FLAG_ONEWAY
        if self.credentials is not None:
            self.credentials.sign(request)
        self.send_frame_soon(request.encode())

    def send_frame_soon(self, frame: bytes) -> None:
        """Send the encoded ``frame`` (a oneway request, or a late response) and return
        without waiting for the socket: written from the caller's thread when nothing is
        queued before it and the socket takes it at once (one syscall, no thread wake-up),
        otherwise (or what the socket did not take) queued for the channel's writer thread.
        Whatever is sent later on the channel goes after it; a failed queued write is logged
        by the writer (neither has an answer to fail)."""
        sock = self._sock
        if sock is not None and self.tls is None and self._send_lock.acquire(blocking=False):
            try:
                with self._lock:
                    direct = not self._outbox and not self._closed
                if direct:
                    frame = frame[self._send_now(sock, frame) :]
                    if not frame:
                        return
                    self._queue(frame, first=True)
                    return
            finally:
                self._send_lock.release()
        self._queue(frame)

    def _send_now(self, sock: socket.socket, frame: bytes) -> int:
        """Write what the socket takes of ``frame`` without blocking; returns its length."""
        try:
            return sock.send(frame, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return 0
        except OSError as exc:
            self._drop(sock)
            raise RemotingConnectError(f"cannot send to {self.addr}: {exc}") from exc

    def _queue(self, frame: bytes, first: bool = False) -> None:
        """Queue ``frame`` for the writer thread (``first``: before the queued ones)."""
        with self._lock:
            if self._closed:
                raise RemotingConnectError(f"the channel to {self.addr} is closed")
            if first:
                self._outbox.insert(0, frame)
            else:
                self._outbox.append(frame)
            if self._writer is None:
                self._writer = threading.Thread(target=self._write_loop, daemon=True,
                                                name=f"shmq-duplex-writer-{self.addr}")  # fmt: skip
                self._writer.start()
        self._outbox_ready.set()

    def _write_loop(self) -> None:
        while not self._closed:
            self._outbox_ready.wait(1.0)
            if not self._outbox or self._closed:
                continue
            try:
                self._write(self._connect(), b"", "oneway requests")
            except RemotingConnectError as exc:
                log.warning("oneway requests to %s not sent: %s", self.addr, exc)

    def _send(self, sock, request: RemotingCommand) -> None:
        self._write(sock, request.encode(), request_name(request.code))

    def _write(self, sock, frame: bytes, what: str) -> None:
        """Write the queued frames of ``send_soon``, then ``frame``, in one write; a failed
        write drops the connection (``RemotingConnectError``)."""
        try:
            with self._send_lock:
                with self._lock:
                    queued, self._outbox = self._outbox, []
                sock.sendall(b"".join(queued) + frame if queued else frame)
        except OSError as exc:
            self._drop(sock)
            raise RemotingConnectError(f"cannot send {what} to {self.addr}: {exc}") from exc

    def invoke_json(
        self,
        code: int,
        ext_fields: dict[str, Any] | None = None,
        body_obj: Any = None,
        timeout: float | None = None,
    ) -> tuple[RemotingCommand, Any]:
        """Like ``RemotingClient.invoke_json``: SUCCESS required, JSON body returned."""
        body = b"" if body_obj is None else RemotingCommand.body_json(body_obj)
        response = check_response(
            self.invoke(RemotingCommand.request(code, ext_fields, body), timeout)
        )
        return response, response.json_body()

    def _read_loop(self, sock: socket.socket) -> None:
        frames = FrameReader(sock, self.max_frame)
        try:
            while True:
                frame = frames.read()
                if frame is None:
                    break
                if frame.is_response:
                    self._calls.answered(frame)
                    continue
                try:
                    response = self.on_request(frame)
                except Exception as exc:
                    log.exception("handling %s from %s failed", request_name(frame.code), self.addr)
                    response = RemotingCommand.response_to(
                        frame, ResponseCode.SYSTEM_ERROR, f"the client failed: {exc!r}"
                    )
                if isinstance(response, Future):  # answered when done (``answer_later``)
                    response.add_done_callback(partial(self._answer_later, frame))
                elif not frame.is_oneway:
                    self._send(sock, response or RemotingCommand.response_to(
                        frame, ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                        f"{request_name(frame.code)} is not supported by this client",
                    ))  # fmt: skip
        except (OSError, RemotingError) as exc:
            if not self._closed:
                log.debug("connection to %s lost: %s", self.addr, exc)
        finally:
            self._drop(sock)

    def _answer_later(self, request: RemotingCommand, done: Future) -> None:
        """Send the response a handler's future holds (SYSTEM_ERROR if it failed), from the
        thread that finished it, as ``send_frame_soon`` sends."""
        exc = done.exception()
        if exc is not None:
            log.warning("handling %s from %s failed: %r", request_name(request.code), self.addr,
                        exc)  # fmt: skip
        if request.is_oneway:
            return
        response = done.result() if exc is None else RemotingCommand.response_to(
            request, ResponseCode.SYSTEM_ERROR, f"the client failed: {exc!r}")  # fmt: skip
        try:
            self.send_frame_soon(response.encode())
        except RemotingError as gone:
            log.info("the answer to %s from %s is lost: %s", request_name(request.code),
                     self.addr, gone)  # fmt: skip

    def _drop(self, sock: socket.socket) -> None:
        with self._lock:
            if self._sock is sock:
                self._sock = None
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            sock.close()
        self._calls.fail_all()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sock = self._sock
        self._outbox_ready.set()  # the writer thread ends
        if sock is not None:
            self._drop(sock)
