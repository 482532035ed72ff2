"""RocketMQ's ``AsyncTraceDispatcher``: trace contexts from the hooks are packed into trace
messages and sent to the trace topic by a thread of their own, so a traced send or consume
only queues its context.

The hooks queue anything with a ``transfer()`` giving its records and keys (a
``TraceContext``), and a producer's hook every traced send that settled (``facts``), which
its ``encode_facts`` formats a run at a time; the thread encodes them. A trace message
holds up to ``batch_size`` contexts (20), never more than ``max_msg_size`` (128000)
characters of records (RocketMQ counts characters too) nor ``MAX_MSG_KEY_SIZE`` of keys, and
leaves ``wait_time_threshold_ms`` (500) after its first record at the latest; the thread
looks every ``polling_ms`` (100), and at once when ``WAKE_AT`` contexts wait (a Python
thread woken per trace message would take the GIL from the traced client that often). Its
keys are its records' message ids and user keys (``encoder.trans_keys``), so the broker's
index finds a message's trace by its id. When ``queue_size`` (2048, RocketMQ's appender
queue) trace messages' worth of contexts wait, new ones are dropped and counted
(``discarded``), as RocketMQ does: tracing never blocks the traced client. The trace
messages go through a producer of their own (group
``_INNER_TRACE_PRODUCER-<group>-<PRODUCE|CONSUME>-<n>``), asynchronously; a failed one is
logged.
"""

from __future__ import annotations

import collections
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from shmq.message import Message

log = logging.getLogger(__name__)

GROUP_NAME_PREFIX = "_INNER_TRACE_PRODUCER"  # TraceConstants.GROUP_NAME_PREFIX
QUEUE_SIZE = 2048  # trace messages' worth of contexts that may wait
BATCH_SIZE = 20
MAX_MSG_SIZE = 128_000
POLLING_MS = 100
FACT_CHUNK = 256  # facts encoded at a time
WAKE_AT = QUEUE_SIZE * BATCH_SIZE // 4  # items queued that wake the thread before its poll
WAIT_TIME_THRESHOLD_MS = 500
MAX_MSG_KEY_SIZE = 32767 - 10000  # the KEYS property's bound (Short.MAX_VALUE - 10000)
SEND_TIMEOUT_S = 5.0  # the trace producer's sendMsgTimeout
SHUTDOWN_FLUSH_S = 5.0  # what a shutdown waits for the thread

_COUNTER = itertools.count(1)


def trace_group_name(group: str, kind: str) -> str:
    """The trace producer's group for a client of ``group`` (``kind``: PRODUCE or
    CONSUME), numbered as RocketMQ's ``genGroupNameForTrace``."""
    return f"{GROUP_NAME_PREFIX}-{group}-{kind}-{next(_COUNTER)}"


class TraceItem(Protocol):
    """A context the hooks queue: it becomes records and their keys in the dispatcher's
    thread (RocketMQ's ``TraceTransferBean``)."""

    def transfer(self) -> tuple[str, set[str]]: ...


# Pops ``n`` facts off a deque: their records and, per record, the keys of the trace message
# that carries it (space separated, as the KEYS property holds them).
FactEncoder = Callable[[collections.deque, int], tuple[list[str], list[str]]]


class _Segment:
    """The records of the trace message being packed."""

    __slots__ = ("contexts", "data", "first", "key_size", "keys", "size")

    def __init__(self) -> None:
        self.data: list[str] = []
        self.keys: set[str] = set()
        self.contexts = 0
        self.size = 0
        self.key_size = 0
        self.first = 0.0  # monotonic time of its first record


class AsyncTraceDispatcher:
    """Sends trace contexts to ``trace_topic`` through ``producer`` (anything with
    ``send_async(Message)`` returning a future, and ``close()``; it is closed with the
    dispatcher).

    ``append`` queues ``TraceItem`` contexts; a producer's hook puts each settled traced
    send on ``facts`` (its future, nothing made for it: every object allocated brings the
    next garbage collection nearer), which ``encode_facts`` (the hook's) turns into
    records, ``FACT_CHUNK`` at a time. The hooks call ``admit`` before queueing once
    ``wake_at`` contexts or facts wait."""

    def __init__(
        self,
        trace_topic: str,
        producer: Any,
        *,
        queue_size: int = QUEUE_SIZE,
        batch_size: int = BATCH_SIZE,
        max_msg_size: int = MAX_MSG_SIZE,
        polling_ms: int = POLLING_MS,
        wait_time_threshold_ms: int = WAIT_TIME_THRESHOLD_MS,
    ) -> None:
        self.trace_topic = trace_topic
        self.producer = producer
        self.batch_size = batch_size
        self.max_msg_size = max_msg_size
        self.max_waiting = queue_size * batch_size
        self.wake_at = max(1, min(WAKE_AT, self.max_waiting // 4))
        self.polling_s = polling_ms / 1000
        self.wait_s = wait_time_threshold_ms / 1000
        self.discarded = 0
        self.sent = 0  # trace messages handed to the producer
        self.queue: collections.deque[TraceItem] = collections.deque()
        self.facts: collections.deque[Any] = collections.deque()
        self.encode_facts: FactEncoder | None = None
        self._segment = _Segment()
        self._in_flight: collections.deque[Any] = collections.deque()  # trace sends' futures
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._worker = threading.Thread(target=self._run, name="shmq-trace-dispatcher",
                                        daemon=True)  # fmt: skip
        self._worker.start()

    def admit(self, waiting: int) -> bool:
        """Whether one more item may be queued when ``waiting`` wait already (called from
        ``wake_at`` on): False (and counted) when the queue is full; the thread is woken."""
        if waiting >= self.max_waiting:
            self.discarded += 1
            return False
        if not self._wake.is_set():
            self._wake.set()
        return True

    def append(self, ctx: TraceItem) -> bool:
        """Queue ``ctx`` to be sent; False (and counted) when too many wait already."""
        n = len(self.queue)
        if n >= self.wake_at and not self.admit(n):
            return False
        self.queue.append(ctx)
        return True

    def stats(self) -> dict[str, int]:
        """Trace messages sent, contexts dropped and waiting."""
        waiting = len(self.queue) + len(self.facts)
        return {"sent": self.sent, "discarded": self.discarded, "waiting": waiting}

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.polling_s)
            self._wake.clear()
            try:
                self._drain()
                seg = self._segment
                if seg.contexts and time.monotonic() - seg.first >= self.wait_s:
                    self._send()
                self._check_sent()
            except Exception:
                log.exception("trace dispatcher for %s failed a round", self.trace_topic)

    def _drain(self) -> None:
        """Pack the facts queued (``FACT_CHUNK`` at a time), then the contexts."""
        facts = self.facts
        n = len(facts)
        while n:
            chunk = min(n, FACT_CHUNK)
            self._pack(*self.encode_facts(facts, chunk))  # type: ignore[misc]
            n -= chunk
        queue = self.queue
        for _ in range(len(queue)):
            data, keys = queue.popleft().transfer()
            self._pack([data], [" ".join(keys)])

    def _pack(self, records: list[str], keys: list[str]) -> None:
        """Add the contexts whose records are ``records`` (and trace message keys ``keys``)
        to trace messages: as many at once as fit the one being packed."""
        i, n = 0, len(records)
        while i < n:
            seg = self._segment
            j = min(n, i + self.batch_size - seg.contexts)
            while True:
                size = sum(map(len, records[i:j]))  # characters, as RocketMQ counts them
                chunk_keys = set(" ".join(keys[i:j]).split(" "))
                chunk_keys.discard("")  # a context without keys
                key_size = sum(map(len, chunk_keys)) + len(chunk_keys)
                fits = seg.size + size <= self.max_msg_size and \
                    seg.key_size + key_size <= MAX_MSG_KEY_SIZE  # fmt: skip
                if fits or j - i == 1:
                    break
                j = i + 1  # a chunk too large: one context at a time
            if not fits and seg.contexts:
                self._send()
                continue
            if not seg.contexts:
                seg.first = time.monotonic()
            seg.data += records[i:j]
            seg.keys |= chunk_keys
            seg.contexts += j - i
            seg.size += size
            seg.key_size += key_size
            if seg.contexts >= self.batch_size or seg.size >= self.max_msg_size:
                self._send()
            i = j

    def _send(self) -> None:
        seg, self._segment = self._segment, _Segment()
        msg = Message(self.trace_topic, "".join(seg.data).encode(), keys=sorted(seg.keys))
        try:
            future = self.producer.send_async(msg)
        except Exception as exc:
            log.error("trace data of %d context(s) not sent to %s: %s", seg.contexts,
                      self.trace_topic, exc)  # fmt: skip
            return
        self.sent += 1
        self._in_flight.append(future)

    def _check_sent(self) -> None:
        """Log the trace sends that failed, of those settled (in order: the producer settles
        a ring's sends in order). Looked at once a round, not by a callback per send: a
        callback costs a lock and a call in the producer's completion thread, which shares
        the GIL with the traced client."""
        in_flight = self._in_flight
        while in_flight and in_flight[0].done():
            exc = in_flight.popleft().exception()
            if exc is not None:
                log.error("trace data not sent to %s: %s", self.trace_topic, exc)

    def flush(self, timeout: float = SHUTDOWN_FLUSH_S) -> None:
        """Stop the thread, then send everything queued from the caller's thread."""
        self._stop.set()
        self._wake.set()
        self._worker.join(timeout)
        self._drain()
        if self._segment.contexts:
            self._send()

    def shutdown(self) -> None:
        """Send everything queued, wait for those sends (the producer's close settles them),
        close the producer."""
        self.flush()
        self.producer.close()
        self._check_sent()
