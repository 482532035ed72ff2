"""The answers to sends that arrived over TCP, written from a thread of their own.

A connection's reader thread checks and encodes a send request, appends its records to the
broker's TCP ring and goes back to reading (RocketMQ 4.9's ``asyncPutMessage``: the I/O
thread does not wait for the store). The answer thread takes the appended requests in ring
order, waits for the writer's answers (and the flush, in SYNC_FLUSH), and writes each
response to its connection. So the requests a client pipelines reach the writer together
and are stored in one pass, rather than one writer round trip each.

The writer reuses a completion slot ``slots`` records later: an append waits until the
answer thread has read the answers that far back (``max_unread``).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from shmq.errors import ShmqError
from shmq.ipc.ring_appender import RingAppender
from shmq.remoting.protocol import RemotingCommand, ResponseCode, ResponseError
from shmq.remoting.server import Connection

log = logging.getLogger(__name__)

PUT_TIMEOUT_S = 5.0  # the writer's answer, as the broker's other puts wait for it


class Appended:
    """One request's records in the ring: answered by ``respond(self, rows)``."""

    __slots__ = ("conn", "context", "count", "first", "request")

    def __init__(self, request: RemotingCommand, conn: Connection, context: Any) -> None:
        self.request = request
        self.conn = conn
        self.context = context
        self.first = 0
        self.count = 0


Respond = Callable[[Appended, np.ndarray], RemotingCommand]
Fail = Callable[[Appended, ResponseError], RemotingCommand]


class SendAnswers:
    """Appends to ``ring`` and answers in ring order: ``respond(appended, rows)`` builds
    the response from the records' completion rows (``STATUS | REASON << 16 | QUEUE_ID <<
    32``, queue offset, physical offset, store time); ``fail(appended, error)`` the one for
    records the writer did not answer in time."""

    def __init__(self, ring: RingAppender, respond: Respond, fail: Fail) -> None:
        self.ring = ring
        self.respond = respond
        self.fail = fail
        self.max_unread = ring.slots // 2
        self._lock = threading.Lock()  # one appender at a time, appends in queue order
        self._room = threading.Condition()
        self._unread_from = ring.seq  # the first record whose answer is not read yet
        # appended requests in ring order, then None once closed; a SimpleQueue hands each
        # over with one lock (a threading.Semaphore takes several, each a GIL round trip)
        self._queue: queue.SimpleQueue[Appended | None] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="shmq-send-answers", daemon=True)
        self._thread.start()

    def append(self, appended: Appended, data: np.ndarray, ends: np.ndarray) -> None:
        """Append the records of ``data`` (record ``k`` from ``ends[k]`` to ``ends[k + 1]``)
        for ``appended``, to be answered by the answer thread; ``ResponseError`` when they
        cannot be appended in time."""
        n = ends.shape[0] - 1
        deadline = time.monotonic() + PUT_TIMEOUT_S
        with self._lock:
            with self._room:
                while self.ring.seq + n - self._unread_from > max(self.max_unread, n):
                    left = deadline - time.monotonic()
                    if left <= 0 or self._stop.is_set():
                        raise ResponseError(ResponseCode.SYSTEM_BUSY, "the broker's TCP sends "
                                            "wait for the store; try again")  # fmt: skip
                    self._room.wait(left)
            try:
                appended.first = self.ring.append_many(data, ends, deadline)
            except ShmqError as exc:
                raise ResponseError(ResponseCode.SYSTEM_ERROR, f"send failed: {exc}") from exc
            appended.count = n
            self._queue.put(appended)

    def _loop(self) -> None:
        while True:
            appended = self._queue.get()
            if appended is None:
                return  # closed
            last = appended.first + appended.count - 1
            wait_s = 0.5 if self._stop.is_set() else PUT_TIMEOUT_S
            oneway = appended.request.is_oneway
            rows = error = None
            try:
                self.ring.wait_answer(last, time.monotonic() + wait_s)
            except ShmqError as exc:
                error = ResponseError(ResponseCode.SYSTEM_ERROR, f"the store did not answer "
                                      f"the send: {exc}")  # fmt: skip
            else:
                rows = None if oneway else self._rows(appended.first, appended.count)
            self._read_to(last + 1)  # before the flush wait: appends may go on meanwhile
            if oneway:
                continue  # nobody reads an answer: none is built (nor waited for)
            if error is None:
                response = self._respond(appended, rows)
            else:
                response = self.fail(appended, error)
            try:
                appended.conn.send(response)
            except ShmqError as exc:
                log.debug("send answer to %s not written: %s", appended.conn.peer, exc)

    def _rows(self, first: int, count: int) -> np.ndarray:
        """A copy of the completion rows of records ``first .. first + count - 1``: one
        slice unless they wrap around the completion area."""
        slots = self.ring.slots
        start = first & (slots - 1)
        if start + count <= slots:
            return self.ring.completions[start : start + count].copy()
        idx = np.arange(first, first + count, dtype=np.int64) & (slots - 1)
        return self.ring.completions[idx]

    def _respond(self, appended: Appended, rows: np.ndarray) -> RemotingCommand:
        try:
            return self.respond(appended, rows)
        except ResponseError as exc:
            return self.fail(appended, exc)
        except Exception as exc:  # an answer is owed whatever happened
            log.exception("answering a send from %s failed", appended.conn.peer)
            return self.fail(appended, ResponseError(ResponseCode.SYSTEM_ERROR, repr(exc)))

    def _read_to(self, seq: int) -> None:
        with self._room:
            if seq > self._unread_from:
                self._unread_from = seq
                self._room.notify_all()

    def close(self) -> None:
        """Answer what is appended (or fail it), then stop the thread."""
        self._stop.set()
        with self._room:
            self._room.notify_all()
        self._queue.put(None)
        self._thread.join(PUT_TIMEOUT_S + 1)
