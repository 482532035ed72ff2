"""Reading frames from a socket: one frame at a time (``read_frame``, a client's wait for
its answer) or through a buffer (``FrameReader``, a duplex channel's reader thread). Both keep
the same rules: a length is checked before anything more is read, and memory grows with
the bytes that arrive, never with the length announced."""

from __future__ import annotations

import socket
import struct
import time

from shmq.errors import RemotingConnectError, RemotingFrameError
from shmq.remoting.protocol import MAX_FRAME_SIZE, RemotingCommand, decode_frame

RECV_CHUNK = 64 * 1024
_INT32 = struct.Struct(">i")


def _receive(
    sock: socket.socket, into: memoryview, pos: int, deadline: float | None, eof_ok: bool
) -> bool:
    """Fill ``into`` from ``pos`` on; False on EOF before its first byte if ``eof_ok``.
    ``deadline`` bounds it, else the socket's own timeout bounds each receive."""
    n = len(into)
    first = pos
    idle_timeout = sock.gettimeout() if deadline is not None else None
    try:
        while pos < n:
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError("timed out")
                sock.settimeout(remaining)
            count = sock.recv_into(into[pos:])
            if count == 0:
                if pos == first and eof_ok:
                    return False
                raise RemotingConnectError(
                    f"connection closed in the middle of a frame ({pos} of {n} bytes read)"
                )
            pos += count
    finally:
        if deadline is not None:
            sock.settimeout(idle_timeout)
    return True


def frame_buffer(n: int) -> memoryview:
    """Room for ``n`` bytes to receive into. Above ``RECV_CHUNK`` it is left uninitialised
    (``numpy.empty``: pages the kernel maps when a receive writes them), so memory still
    grows with the bytes that arrive, and a frame is not copied while it comes in (only
    ``decode_frame`` copies its body out)."""
    if n <= RECV_CHUNK:
        return memoryview(bytearray(n))
    import numpy as np  # here: the CLI imports this module, and its --help must stay light

    return np.empty(n, dtype=np.uint8).data


def _recv_exactly(
    sock: socket.socket, n: int, deadline: float | None, eof_ok: bool
) -> memoryview | None:
    """``n`` bytes from ``sock``; None on EOF before the first byte if ``eof_ok``."""
    buf = frame_buffer(n)
    return buf if _receive(sock, buf, 0, deadline, eof_ok) else None


def read_frame(
    sock: socket.socket,
    max_frame: int = MAX_FRAME_SIZE,
    deadline: float | None = None,
    *,
    frame_timeout: float | None = None,
) -> RemotingCommand | None:
    """Read exactly one frame from ``sock``.

    Returns ``None`` on a clean end of stream (EOF before the first byte of a frame); EOF
    inside a frame raises ``RemotingConnectError``. A length prefix below 4 or above
    ``max_frame`` raises ``RemotingFrameError`` before anything more is read. ``deadline``
    (``time.monotonic()`` value) bounds the whole read: past it, ``TimeoutError`` is raised.
    Without a deadline the socket's own timeout applies; ``frame_timeout`` then bounds the
    rest of a frame once its length has arrived (a peer that announces a frame must send it).
    Memory grows with the bytes that arrive, never with the length announced.
    """
    prefix = _recv_exactly(sock, 4, deadline, eof_ok=True)
    if prefix is None:
        return None
    (length,) = _INT32.unpack(prefix)
    if length < 4 or length > max_frame:
        raise RemotingFrameError(f"frame length {length} is outside [4, {max_frame}]")
    if deadline is None and frame_timeout is not None:
        # bound this frame only: the socket's own (idle) timeout applies to the next prefix
        idle_timeout = sock.gettimeout()
        try:
            body = _recv_exactly(sock, length, time.monotonic() + frame_timeout, eof_ok=False)
        finally:
            sock.settimeout(idle_timeout)
        return decode_frame(body)
    return decode_frame(_recv_exactly(sock, length, deadline, eof_ok=False))


class FrameReader:
    """Reads the frames of one socket through a buffer, with ``read_frame``'s rules (EOF
    before a frame is ``None``, within one an error; a length outside ``[4, max_frame]``
    fails before more is read; ``frame_timeout`` bounds the rest of a frame once its
    length is in, the socket's own timeout the wait for the next one).

    Why: ``read_frame`` reads a length, then its frame: two receives per frame, each
    letting the GIL go and taking it back. A receive here takes whatever has arrived, so
    a small frame costs one and pipelined frames share one."""

    def __init__(
        self, sock: socket.socket, max_frame: int = MAX_FRAME_SIZE,
        frame_timeout: float | None = None,
    ) -> None:  # fmt: skip
        self.sock = sock
        self.max_frame = max_frame
        self.frame_timeout = frame_timeout
        self._buf = bytearray()
        self._pos = 0  # the unread bytes are _buf[_pos:]

    def read(self) -> RemotingCommand | None:
        if not self._fill(4, None):
            return None
        (length,) = _INT32.unpack_from(self._buf, self._pos)
        if length < 4 or length > self.max_frame:
            raise RemotingFrameError(f"frame length {length} is outside [4, {self.max_frame}]")
        if len(self._buf) - self._pos < 4 + length:
            timeout = self.frame_timeout
            deadline = None if timeout is None else time.monotonic() + timeout
            if length > RECV_CHUNK:
                return decode_frame(self._read_large(length, deadline))
            self._fill(4 + length, deadline)
        start, end = self._pos + 4, self._pos + 4 + length
        if end == len(self._buf):  # the usual case: nothing after it arrived yet
            payload = memoryview(self._buf)[start:end]
            self._buf, self._pos = bytearray(), 0
        else:
            payload = memoryview(self._buf[start:end])
            self._pos = end
        return decode_frame(payload)

    def _read_large(self, length: int, deadline: float | None) -> memoryview:
        """The payload of a frame longer than ``RECV_CHUNK``, received straight into its
        own buffer (what is buffered of it already is copied there first)."""
        have = memoryview(self._buf)[self._pos + 4 :]
        payload = frame_buffer(length)
        payload[: len(have)] = have
        filled = len(have)
        have.release()
        self._buf, self._pos = bytearray(), 0
        _receive(self.sock, payload, filled, deadline, eof_ok=False)
        return payload

    def _fill(self, n: int, deadline: float | None) -> bool:
        """Receive until ``n`` unread bytes are buffered; False on EOF before any byte of a
        frame. ``deadline``: the frame's own bound, else the socket's timeout applies."""
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0
        sock = self.sock
        idle_timeout = sock.gettimeout() if deadline is not None else None
        try:
            while len(self._buf) < n:
                if deadline is not None:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise TimeoutError("timed out")
                    sock.settimeout(remaining)
                chunk = sock.recv(RECV_CHUNK)
                if not chunk:
                    if not self._buf and n == 4:
                        return False
                    raise RemotingConnectError(
                        f"connection closed in the middle of a frame ({len(self._buf)} of "
                        f"{n} bytes read)"
                    )
                self._buf += chunk
        finally:
            if deadline is not None:
                sock.settimeout(idle_timeout)
        return True
