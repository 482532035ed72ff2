"""An SSL socket that one thread may read while others write.

Why: OpenSSL's SSL object must not be used by two threads at once, and Python's
``SSLSocket`` lets go of the GIL inside ``SSL_read`` and ``SSL_write`` without a lock of its
own. A remoting connection is read by one thread (a server connection's, a client channel's
reader) while others write to it (send answers, held pulls, pipelined senders), so two calls
met inside one SSL object and corrupted its records: the peer saw "EOF occurred in
violation of protocol" and the connection closed (issue 52's fault, under pipelined bulk
sends). ``SharedTlsSocket`` keeps the handshaken SSL socket non-blocking and makes each
SSL call under one lock; a read or a write that would block lets the lock go and waits in
``select`` on the descriptor, so a reader parked for the next frame never holds up a writer.

It offers the socket methods remoting uses, with a socket's timeout semantics (``None``
blocks, ``0`` raises the SSL "would block" errors, else ``TimeoutError`` past it); plain
sockets need none of this (the kernel serialises their reads and writes).
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class SharedTlsSocket:
    """``sock`` (handshaken) shared by a reading thread and writing threads."""

    def __init__(self, sock: ssl.SSLSocket) -> None:
        self._timeout = sock.gettimeout()
        sock.setblocking(False)
        self._sock = sock
        self._lock = threading.Lock()

    # -- the SSL calls, one at a time ---------------------------------------------------------

    def recv(self, n: int) -> bytes:
        return self._call(self._sock.recv, n)

    def recv_into(self, buffer: memoryview | bytearray, nbytes: int = 0) -> int:
        return self._call(self._sock.recv_into, buffer, nbytes)

    def send(self, data: bytes | memoryview) -> int:
        return self._call(self._sock.send, data)

    def sendall(self, data: bytes | memoryview) -> None:
        """Write all of ``data`` within the socket's timeout (for the whole call, as a
        socket's ``sendall``)."""
        view = memoryview(data)
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        while view:
            # an SSL write is retried with the same bytes until it takes them all
            view = view[self._call(self._sock.send, view, deadline=deadline) :]

    def pending(self) -> int:
        """Bytes decrypted ahead and held (a ``select`` on the socket does not see them)."""
        with self._lock:
            return self._sock.pending()

    def _call(self, op: Callable[..., T], *args: Any, deadline: float | None = None) -> T:
        """``op(*args)`` under the lock, waiting outside it while OpenSSL wants the socket
        readable or writable; ``deadline`` (else the socket's timeout from now) bounds it."""
        if deadline is None and self._timeout:
            deadline = time.monotonic() + self._timeout
        while True:
            with self._lock:
                try:
                    return op(*args)
                except ssl.SSLWantReadError:
                    readable = True
                except ssl.SSLWantWriteError:
                    readable = False
            if self._timeout == 0:
                raise ssl.SSLWantReadError() if readable else ssl.SSLWantWriteError()
            self._wait(readable, deadline)

    def _wait(self, readable: bool, deadline: float | None) -> None:
        left = None
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("timed out")
        fd = self._sock.fileno()
        if fd < 0:
            raise OSError("the TLS connection is closed")
        try:
            select.select([fd] if readable else [], [] if readable else [fd], [], left)
        except ValueError as exc:  # closed by another thread meanwhile
            raise OSError(f"the TLS connection is closed: {exc}") from exc

    # -- the rest of a socket's surface -------------------------------------------------------

    def settimeout(self, timeout: float | None) -> None:
        self._timeout = timeout

    def gettimeout(self) -> float | None:
        return self._timeout

    def setblocking(self, flag: bool) -> None:
        self._timeout = None if flag else 0.0

    def fileno(self) -> int:
        return self._sock.fileno()

    def getsockname(self):
        return self._sock.getsockname()

    def getpeername(self):
        return self._sock.getpeername()

    def shutdown(self, how: int) -> None:
        # the TCP shutdown only: a close_notify would be an SSL call racing a reader
        socket.socket.shutdown(self._sock, how)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()
