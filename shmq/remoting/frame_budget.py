"""The bytes of request frames a server holds at once, over all its connections.

Why: a frame's buffer grows with the bytes that arrive, and each connection is bounded by
the frame timeout and the max frame size, but nothing bounded their sum: 64 connections
that each send 15 of the 16 MiB they announce, then stall, cost the broker a GiB. RocketMQ
bounds each channel's buffers with Netty's water marks; shmq takes one budget for the whole
server. A connection reserves a large frame's length from it once the length is read,
before its body is received, and gives it back when the request is done; a frame that
finds no room within ``wait`` seconds is refused (its connection is closed; the server
does not read the connection meanwhile), so the bytes a server holds for frames never
exceed the budget, whatever its peers announce.
"""

from __future__ import annotations

import threading

MAX_BUFFERED_BYTES = 256 << 20  # a server's default: 16 frames of the largest size at once
WAIT_S = 1.0  # how long a frame waits for room freed by other connections' requests


class FrameBudget:
    """``limit`` bytes shared by a server's connections; ``reserved`` is what they hold."""

    def __init__(self, limit: int, wait: float = WAIT_S) -> None:
        if limit <= 0:
            raise ValueError(f"a frame budget must be > 0 bytes, not {limit}")
        self.limit = limit
        self.wait = wait
        self._reserved = 0
        self._lock = threading.Lock()

    @property
    def reserved(self) -> int:
        """The bytes reserved now (for tests and statistics)."""
        return self._reserved

    def try_reserve(self, n: int) -> bool:
        """Take ``n`` bytes if they fit now; False when they do not (the caller waits up
        to ``wait`` s, not reading its connection, then gives up with ``refusal``)."""
        with self._lock:
            if self._reserved + n > self.limit:
                return False
            self._reserved += n
            return True

    def refusal(self, n: int) -> str:
        """Why an ``n``-byte frame was refused."""
        return (
            f"its {n}-byte frame does not fit the {self.limit} bytes the server buffers for"
            f" frames in flight ({self._reserved} taken for {self.wait:g} s)"
        )

    def release(self, n: int) -> None:
        """Give back ``n`` bytes taken by ``reserve``."""
        if n <= 0:
            return
        with self._lock:
            self._reserved -= n
