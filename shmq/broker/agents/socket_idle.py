"""The idle strategy of an agent that serves sockets (the HA agents): park in ``select``.

Such an agent must wake for two kinds of event: a socket became readable or writable, and
another process posted its semaphore (the writer published new CommitLog bytes, the
supervisor asks it to stop). A POSIX semaphore has no file descriptor, so a small thread
turns each post into a byte on a socket pair that the selector watches: the agent sleeps in
one ``select`` until either comes, never polling. Posts are taken only while the agent says
it parks (its parked word), as with every agent.

An agent may also linger after a pass with work (``linger_s``): it then sleeps that long,
without saying it parks, so the posts of a writer that publishes a little at a time stop
waking it and the bytes it publishes meanwhile go out together in the next pass. It does
not watch its sockets meanwhile either: on an ASYNC_MASTER a slave's ack answers every
batch a fraction of a millisecond after it went out, and waking for it doubled the agent's
wake-ups (each costs tens of µs of CPU here) for an ack nobody waits for; the next pass
reads it.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time
from collections.abc import Callable

import posix_ipc

from shmq.ipc.segment import fence, post, wait

WAKER_PARK_S = 1.0  # the waker thread re-checks its stop flag this often


class SocketIdle:
    """A selector plus a semaphore waker; ``idle`` is the agent runner's idle call."""

    def __init__(self, sem: posix_ipc.Semaphore, set_parked: Callable[[bool], None]) -> None:
        self.selector = selectors.DefaultSelector()
        self._sem = sem
        self._set_parked = set_parked
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self.selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._stopping = False
        self._thread = threading.Thread(target=self._waker, name="shmq-ha-waker", daemon=True)
        self._thread.start()
        self.timeout_s = 1.0  # the agent sets it to its next timer (heartbeat, housekeeping)
        self.linger_s = 0.0  # after a pass with work, wait this long for sockets only

    def _waker(self) -> None:
        while not self._stopping:
            if wait(self._sem, WAKER_PARK_S) and not self._stopping:
                # a failed send: a wake-up byte is already pending (or we are closing)
                with contextlib.suppress(OSError):
                    self._wake_w.send(b"\x01")

    def ready(self) -> list[tuple[selectors.SelectorKey, int]]:
        """The sockets ready now (no waiting); wake-up bytes are consumed here."""
        events = []
        for key, mask in self.selector.select(0):
            if key.fileobj is self._wake_r:
                try:
                    while self._wake_r.recv(4096):
                        pass
                except BlockingIOError:
                    pass
            else:
                events.append((key, mask))
        return events

    def idle(self, work: int, has_work: Callable[[], bool] | None = None) -> None:
        """After a pass with work, go on (after sleeping ``linger_s``); otherwise say we
        park, check once more, and sleep in ``select`` until a socket or a post wakes us,
        or the agent's next timer."""
        if work > 0:
            if self.linger_s:
                time.sleep(self.linger_s)
            return
        self._set_parked(True)
        fence()
        try:
            if has_work is None or not has_work():
                self.selector.select(self.timeout_s)
        finally:
            self._set_parked(False)

    def close(self) -> None:
        self._stopping = True
        post(self._sem)
        self._thread.join(WAKER_PARK_S * 2)
        self.selector.close()
        self._wake_r.close()
        self._wake_w.close()
