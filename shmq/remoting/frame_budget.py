"""The bytes of request frames a server holds at once, over all its connections.

Why: a frame's buffer grows with the bytes that arrive, and each connection is bounded by
the frame timeout and the max frame size, but nothing bounded their sum: 64 connections
that each send 15 of the 16 MiB they announce, then stall, cost the broker a GiB. RocketMQ
bounds each channel's buffers with Netty's water marks; shmq takes one budget for the whole
server. A connection reserves a large frame's length from it once the length is read,
before its body is received, and gives it back when the request is done; a frame that
finds no room within ``wait`` seconds is refused (its connection is closed), so the bytes
a server holds for frames never exceed the budget, whatever its peers announce.
"""

from __future__ import annotations

import threading
import time

from shmq.errors import RemotingFrameError

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
        self._freed = threading.Condition(threading.Lock())

    @property
    def reserved(self) -> int:
        """The bytes reserved now (for tests and statistics)."""
        return self._reserved

    def reserve(self, n: int) -> None:
        """Take ``n`` bytes, waiting up to ``wait`` s for others to release theirs;
        ``RemotingFrameError`` naming the budget when they do not fit by then."""
        deadline = time.monotonic() + self.wait
        with self._freed:
            while self._reserved + n > self.limit:
                left = deadline - time.monotonic()
                if left <= 0 or n > self.limit:
                    raise RemotingFrameError(
                        f"its {n}-byte frame does not fit the {self.limit} bytes the server"
                        f" buffers for frames in flight ({self._reserved} taken for"
                        f" {self.wait:g} s)"
                    )
                self._freed.wait(left)
            self._reserved += n

    def release(self, n: int) -> None:
        """Give back ``n`` bytes taken by ``reserve``."""
        if n <= 0:
            return
        with self._freed:
            self._reserved -= n
            self._freed.notify_all()
