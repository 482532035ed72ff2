"""A data-path connection: many requests in flight on one socket, completed by callbacks.

The control plane's ``RemotingClient`` waits for each response before the next request;
the TCP data path (sends, async sends, long-polling pulls) needs many requests in flight,
so a ``PipelinedChannel`` writes frames from any thread and one reader thread completes
them by ``opaque``: ``callback(reply, None)`` for a response, ``callback(None, error)`` when
the request's deadline passes (``RemotingTimeoutError``) or the connection is lost
(``RemotingConnectError``). Callbacks run on the reader thread (or on a thread that
``poll``s: one that cannot wait for the reader to get the GIL), so they must be short and
never write to the channel (a reader blocked on a full socket would stop reading the
responses the broker is blocked on).

Responses are read a buffer at a time and decoded without ``RemotingCommand`` objects:
a ``Reply`` carries the code, remark, extFields and body. The broker answers in the
request's serialize type; the ROCKETMQ header (what this channel's users send) has a fast
decoder, a JSON one goes through ``protocol.decode_frame``. Anything malformed closes the
connection and fails every request on it, with the reason.

The socket is non-blocking (writes wait for room with ``select``, up to their deadline), so a
plain and a TLS connection (``tls``) take the same path: an SSL socket's reads and writes
say "would block" as ``WOULD_BLOCK``, and bytes it decrypted ahead (``tls_pending``) are read
before the reader waits on the socket again.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import select
import socket
import struct
import threading
import time
from collections.abc import Callable

from shmq.errors import (
    RemotingConnectError,
    RemotingError,
    RemotingFrameError,
    RemotingTimeoutError,
)
from shmq.remoting.client import parse_addr
from shmq.remoting.protocol import FLAG_RESPONSE, MAX_FRAME_SIZE, decode_frame
from shmq.remoting.security.tls import WOULD_BLOCK, TlsOptions, open_connection, tls_pending

log = logging.getLogger(__name__)

SWEEP_S = 0.05  # how often deadlines are checked
READ_CHUNK = 1 << 20
MAX_IN_FLIGHT = 65536  # requests awaiting a response (RocketMQ's semaphoreAsync: 65535)
_FIXED = struct.Struct(">ihBhiii")  # header mark, code, language, version, opaque, flag, remark
_I32 = struct.Struct(">i")
_H16 = struct.Struct(">h")


class Reply:
    """One response: ``code``, ``remark``, ``ext`` (str → str) and ``body``."""

    __slots__ = ("body", "code", "ext", "remark")

    def __init__(self, code: int, remark: str | None, ext: dict[str, str], body: bytes) -> None:
        self.code = code
        self.remark = remark
        self.ext = ext
        self.body = body


Callback = Callable[[Reply | None, BaseException | None], None]


def decode_reply(payload: memoryview) -> tuple[int, int, Reply]:
    """``(opaque, flag, reply)`` of one frame's payload (after the length prefix);
    ``RemotingFrameError`` when it is malformed."""
    n = len(payload)
    if n >= 4 and payload[0] == 1:  # ROCKETMQ serialize type
        header_len = int.from_bytes(payload[1:4], "big")
        end = 4 + header_len
        if header_len < 21 or end > n:
            raise RemotingFrameError(f"ROCKETMQ header of {header_len} bytes in {n}")
        _, code, _, _, opaque, flag, remark_len = _FIXED.unpack_from(payload, 0)
        p = 21
        if remark_len < 0 or p + remark_len + 4 > end:
            raise RemotingFrameError(f"remark length {remark_len} runs past the header")
        remark = str(payload[p : p + remark_len], "utf-8") if remark_len else None
        p += remark_len
        (ext_len,) = _I32.unpack_from(payload, p)
        p += 4
        if ext_len < 0 or p + ext_len != end:
            raise RemotingFrameError(f"extFields length {ext_len} does not end the header")
        ext = {}
        while p < end:
            (kl,) = _H16.unpack_from(payload, p)
            p += 2
            if kl < 0 or p + kl + 4 > end:
                raise RemotingFrameError("an extFields key runs past the header")
            key = str(payload[p : p + kl], "utf-8")
            p += kl
            (vl,) = _I32.unpack_from(payload, p)
            p += 4
            if vl < 0 or p + vl > end:
                raise RemotingFrameError(f"the extFields value of {key!r} runs past the header")
            ext[key] = str(payload[p : p + vl], "utf-8")
            p += vl
        return opaque, flag, Reply(code, remark, ext, bytes(payload[end:]))
    cmd = decode_frame(bytes(payload))
    return cmd.opaque, cmd.flag, Reply(cmd.code, cmd.remark, cmd.ext_fields, cmd.body)


class PipelinedChannel:
    """One connection to ``addr`` (connected on construction). ``send`` registers the
    request's callback and deadline, then writes its frame; ``closed`` once lost."""

    def __init__(
        self,
        addr: str,
        *,
        connect_timeout: float = 3.0,
        max_frame: int = MAX_FRAME_SIZE,
        max_in_flight: int = MAX_IN_FLIGHT,
        tls: TlsOptions | None = None,
    ) -> None:
        self.addr = addr
        self.max_frame = max_frame
        self.max_in_flight = max_in_flight
        host, port = parse_addr(addr)
        try:
            sock = open_connection(host, port, connect_timeout, tls, shared=True)
        except OSError as exc:
            reason = exc.strerror or str(exc) or type(exc).__name__
            raise RemotingConnectError(f"cannot connect to {addr}: {reason}") from exc
        sock.setblocking(False)  # writes wait for room up to their deadline (``_write``)
        self.sock = sock
        self.local = sock.getsockname()[:2]
        self._opaques = itertools.count(1)
        self._pending: dict[int, tuple[Callback, float]] = {}
        self._send_lock = threading.Lock()
        self._read_lock = threading.Lock()  # the reader thread's or a ``poll``'s read
        self._reading = 0  # the thread id of the read under way
        self._buf = bytearray(READ_CHUNK)  # received bytes from ``_start`` to ``_end``
        self._view = memoryview(self._buf)
        self._start = self._end = 0
        self.closed = False
        self.error: BaseException | None = None
        self._reader = threading.Thread(
            target=self._read_loop, name=f"shmq-pipeline-{addr}", daemon=True
        )
        self._reader.start()

    def next_opaque(self) -> int:
        return next(self._opaques) & 0x7FFFFFFF

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def send(
        self, opaque: int, frame: bytes | memoryview, callback: Callback, deadline: float
    ) -> None:
        """Write ``frame`` (whose opaque is ``opaque``); ``callback`` gets its response.
        Waits (up to ``deadline``) while ``max_in_flight`` requests are unanswered;
        raises ``RemotingConnectError`` / ``RemotingTimeoutError`` when it cannot write."""
        pending = self._pending
        if len(pending) >= self.max_in_flight:
            self._wait_room(deadline)
        pending[opaque] = (callback, deadline)
        try:
            with self._send_lock:
                if self.closed:
                    raise RemotingConnectError(f"the connection to {self.addr} is closed: "
                                               f"{self.error}")  # fmt: skip
                self._write(frame, deadline)
        except (OSError, RemotingError) as exc:
            pending.pop(opaque, None)
            if isinstance(exc, RemotingError):
                raise
            self._fail(RemotingConnectError(f"cannot send to {self.addr}: {exc}"))
            raise RemotingConnectError(f"cannot send to {self.addr}: {exc}") from exc

    def send_oneway(self, frame: bytes, deadline: float) -> None:
        """Write a oneway request's frame (no response comes)."""
        try:
            with self._send_lock:
                if self.closed:
                    raise RemotingConnectError(f"the connection to {self.addr} is closed")
                self._write(frame, deadline)
        except OSError as exc:
            self._fail(RemotingConnectError(f"cannot send to {self.addr}: {exc}"))
            raise RemotingConnectError(f"cannot send to {self.addr}: {exc}") from exc

    def _write(self, frame: bytes | memoryview, deadline: float) -> None:
        """Write all of ``frame``, waiting for room in the socket until ``deadline`` (then
        the connection is out of step: ``OSError``, and the caller closes it)."""
        sock = self.sock
        view = memoryview(frame)
        while view:
            try:
                view = view[sock.send(view) :]
                continue
            except WOULD_BLOCK:  # an SSL socket is given the same view again, as it must be
                pass
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no room to write to {self.addr} before the deadline")
            select.select([], [sock], [], min(left, 1.0))

    def forget(self, opaque: int) -> None:
        """Drop a request's callback (its caller stopped waiting)."""
        self._pending.pop(opaque, None)

    def _wait_room(self, deadline: float) -> None:
        while len(self._pending) >= self.max_in_flight:
            if self.closed:
                return  # send raises
            if time.monotonic() >= deadline:
                raise RemotingTimeoutError(
                    f"{self.max_in_flight} requests to {self.addr} were still unanswered"
                )
            time.sleep(0.0005)

    # -- the reader -------------------------------------------------------------------------

    def poll(self) -> None:
        """Complete the responses that have arrived, on the calling thread. For a thread
        that needs an answer's effect now (room for its next request): the reader thread,
        woken by the socket, may wait up to Python's switch interval (5 ms) for the GIL
        while the caller's thread runs Python. Waiting for the lock of a read under way
        lets that read finish at once (a read never waits for the socket); a callback's
        own ``poll`` does nothing."""
        if self.closed or self._reading == threading.get_ident():
            return
        with self._read_lock:
            try:
                self._read_arrived()
            except (OSError, RemotingError) as exc:
                self._lost(exc)

    def _read_loop(self) -> None:
        next_sweep = time.monotonic() + SWEEP_S
        try:
            while not self.closed:
                readable = tls_pending(self.sock) or select.select([self.sock], [], [], SWEEP_S)[0]
                if readable:
                    with self._read_lock:
                        self._read_arrived()
                now = time.monotonic()
                if now >= next_sweep:
                    next_sweep = now + SWEEP_S
                    self._expire(now)
        except (OSError, ValueError, RemotingError) as exc:  # ValueError: closed meanwhile
            self._lost(exc)

    def _read_arrived(self) -> None:
        """Read what the socket holds (without waiting) and complete its whole frames (call
        with ``_read_lock``); a full buffer keeps its partial frame: moved down, or grown."""
        if self.closed:
            return
        self._reading = threading.get_ident()
        try:
            self._receive()
        finally:
            self._reading = 0

    def _receive(self) -> None:
        start, end = self._start, self._end
        if end == len(self._buf):
            partial = self._buf[start:end]
            size = len(self._buf) * (2 if not start else 1)
            self._buf = bytearray(size)
            self._buf[: len(partial)] = partial
            self._view = memoryview(self._buf)
            start, end = 0, len(partial)
        try:
            count = self.sock.recv_into(self._view[end:])
        except WOULD_BLOCK:
            count = -1
        if count == 0:
            raise RemotingConnectError(f"{self.addr} closed the connection")
        if count > 0:
            end += count
            start = self._dispatch(self._view, start, end)
            if start == end:
                start = end = 0
        self._start, self._end = start, end

    def _lost(self, exc: BaseException) -> None:
        if not self.closed:
            log.debug("connection to %s lost: %s", self.addr, exc)
        error = exc if isinstance(exc, RemotingError) else RemotingConnectError(
            f"connection to {self.addr} lost: {exc}")  # fmt: skip
        self._fail(error)

    def _dispatch(self, view: memoryview, start: int, end: int) -> int:
        """Complete every whole frame in ``view[start:end]``; where the rest begins."""
        pending = self._pending
        while end - start >= 4:
            length = int.from_bytes(view[start : start + 4], "big", signed=True)
            if length < 4 or length > self.max_frame:
                raise RemotingFrameError(
                    f"{self.addr} sent a frame length {length} outside [4, {self.max_frame}]"
                )
            if end - start - 4 < length:
                return start  # the rest comes later (the read loop grows a full buffer)
            opaque, flag, reply = decode_reply(view[start + 4 : start + 4 + length])
            start += 4 + length
            if not flag & FLAG_RESPONSE:
                continue  # the broker's own requests are for the control connection
            entry = pending.pop(opaque, None)
            if entry is not None:
                try:
                    entry[0](reply, None)
                except Exception:
                    log.exception("completing a request to %s failed", self.addr)
        return start

    def _expire(self, now: float) -> None:
        pending = self._pending
        late = [o for o, (_, deadline) in list(pending.items()) if deadline <= now]
        for opaque in late:
            entry = pending.pop(opaque, None)
            if entry is not None:
                self._call(entry[0], RemotingTimeoutError(
                    f"no response from {self.addr} within the request's timeout"))  # fmt: skip

    def _call(self, callback: Callback, error: BaseException) -> None:
        try:
            callback(None, error)
        except Exception:
            log.exception("failing a request to %s failed", self.addr)

    def _fail(self, error: BaseException) -> None:
        """Close the connection and fail every request in flight with ``error``."""
        with self._send_lock:
            already = self.closed
            self.closed = True
            if self.error is None:
                self.error = error
        if not already:
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                self.sock.close()
        while self._pending:
            with contextlib.suppress(KeyError):
                _, (callback, _) = self._pending.popitem()
                self._call(callback, error)

    def close(self) -> None:
        """Close now: requests still in flight fail."""
        self._fail(RemotingConnectError(f"the connection to {self.addr} was closed"))
        if threading.current_thread() is not self._reader:
            self._reader.join(2.0)
