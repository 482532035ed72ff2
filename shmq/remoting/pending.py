"""The requests of one connection that wait for their responses, by ``opaque``.

Both ends of a duplex connection call the other and wait: a client's ``DuplexChannel``
(heartbeats, locks, offsets) and the broker's ``Connection`` (GET_CONSUMER_RUNNING_INFO).
The thread that reads the connection hands each response to its caller; a caller that
gives up (its timeout) leaves its opaque among the ``late`` most recent, so an answer that
still comes is known for one; a lost connection fails every caller at once.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from concurrent.futures import TimeoutError as FutureTimeout

from shmq.errors import RemotingConnectError, RemotingTimeoutError
from shmq.remoting.protocol import RemotingCommand, request_name


class PendingCalls:
    """Calls on a connection to ``peer`` (text for errors) awaiting their responses."""

    def __init__(self, peer: str, late: int = 0) -> None:
        self.peer = peer
        self._lock = threading.Lock()
        self._waiting: dict[int, Future] = {}
        self._given_up: collections.deque[int] = collections.deque(maxlen=late)

    def call(
        self, request: RemotingCommand, send: Callable[[], None], timeout: float
    ) -> RemotingCommand:
        """``send()`` the request and wait for its response (any code):
        ``RemotingTimeoutError`` after ``timeout`` s, ``RemotingConnectError`` when the
        connection is lost first (``fail_all``)."""
        future: Future = Future()
        with self._lock:
            self._waiting[request.opaque] = future
        try:
            send()
            try:
                return future.result(timeout)
            except FutureTimeout:
                raise RemotingTimeoutError(
                    f"no response from {self.peer} to {request_name(request.code)}"
                    f" within {timeout:g} s"
                ) from None
        finally:
            with self._lock:
                if self._waiting.pop(request.opaque, None) is not None and not future.done():
                    self._given_up.append(request.opaque)

    def answered(self, response: RemotingCommand) -> bool:
        """Hand ``response`` to its caller; False when no call on this connection asked
        for it (an answer that came after its caller gave up is dropped)."""
        with self._lock:
            future = self._waiting.get(response.opaque)
            late = future is None and response.opaque in self._given_up
        if future is not None:
            _settle(future, result=response)
        return future is not None or late

    def fail_all(self) -> None:
        """The connection is gone: every waiting caller fails now."""
        with self._lock:
            waiting, self._waiting = self._waiting, {}
        for future in waiting.values():
            error = RemotingConnectError(f"connection to {self.peer} closed before the response")
            _settle(future, exc=error)


def _settle(future: Future, result=None, exc: BaseException | None = None) -> None:
    try:  # a caller may be settled twice (its answer racing the connection's end)
        if exc is None:
            future.set_result(result)
        else:
            future.set_exception(exc)
    except InvalidStateError:
        pass
