"""Automatic batching of async sends over TCP (Kafka's record accumulator with
``linger.ms=0``, RocketMQ 5's client ``autoBatch``).

Why: a SEND_MESSAGE_V2 per message costs the broker a whole request's Python and a writer
round trip, so single async sends top out at a few thousand a second, while one
SEND_BATCH_MESSAGE of hundreds costs the broker about as much as one message. Nothing
waits for a batch to fill: per message queue at most ``REQUESTS_PER_QUEUE`` requests are
in flight, and the messages ``send_async`` hands over meanwhile wait in the queue's
accumulator; when a response makes room (or at once, when the queue has room, so a lone
message keeps its latency), everything waiting goes as one request, of at most
``CHUNK_MESSAGES`` messages and the batch body limit. A request of one message is a
SEND_MESSAGE_V2 (what a single send would be); more are a SEND_BATCH_MESSAGE whose body
``encode_batch_body`` writes from the prepared records (``send_records.one_record``: the
properties are the record tail's, nothing is encoded again).

Who writes: the thread of ``send_async`` when its queue has room, else this module's sender
thread, woken by the response that made room (the connection's reader thread settles
futures but never writes: it must keep reading while a write waits for socket room). A
``send_async`` that finds no room first reads the responses that came itself
(``PipelinedChannel.poll``) and writes if one made room: a busy caller holds the GIL, and
the reader and sender threads would each wait up to Python's 5 ms switch interval for it.
A queue's requests are taken from its accumulator and written under its write lock, so they
go out in the order their messages came.

Each message keeps its own future: settled from its request's response (its UNIQ_KEY as
msg id, its offset msg id from the comma-joined list, the batch's queueOffset plus its
index), or, when the request fails, handed to ``TcpSends.failed`` one by one, exactly as a
single async send's failure (retried on the same broker, or its future gets the error). A
request is finished once, whichever of its response, its failure or its write error comes
first; the broker's latency is recorded once per request, from its oldest send. Memory
stays bounded: ``send_async`` waits while ``max_outstanding`` messages to a broker are
unanswered (waiting or in flight), as a full ring makes it wait.
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from shmq.client.producer.async_completion import SendFuture
from shmq.client.producer.records import (
    ONE_BODY,
    ONE_BORN,
    ONE_FLAG,
    ONE_MSG_ID,
    ONE_SIZE,
    ONE_TAIL,
    laid_out,
)
from shmq.client.route import BrokerQueues
from shmq.client.transport.send_frames import (
    CHUNK_MESSAGES,
    STATUSES,
    SendTemplate,
    batch_results,
    failure,
    send_error,
)
from shmq.client.types import MessageQueue
from shmq.codec import record as rec
from shmq.codec.batch_body import ENTRY_FIXED, encode_batch_body
from shmq.errors import ClientError, SendError, SendTimeoutError, ShmqError
from shmq.remoting.pipeline import PipelinedChannel, Reply

log = logging.getLogger(__name__)

# Requests in flight per message queue: two keep the wire busy (one is answered while the
# next is stored) and leave the rest to accumulate into the following batch.
REQUESTS_PER_QUEUE = 2
# a send that finds no room reads the answers itself at most this often: a read is a syscall
# that hands the GIL to the reader and completion threads and back (~30-50 µs here), and
# nearly every read finds nothing, while a request of hundreds of messages is answered only
# every few ms (every 100 µs: 40 K msg/s; every 1 ms: 50 K, producer bound either way)
POLL_GAP_S = 1e-3
# the fields of an accumulated send
ONE, FUTURE, STARTED = range(3)


class _Broker:
    """The async sends to one broker: how many are unanswered, and whether the producer
    closed; ``lock`` guards these and the accumulators of its queues."""

    __slots__ = ("closed", "lock", "outstanding")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.outstanding = 0
        self.closed = False


class _Queue:
    """One message queue's accumulator (``waiting``: ``(one, future, started)`` in send
    order) and its requests in flight; ``writing`` orders its requests on the wire."""

    __slots__ = ("broker", "channel", "in_flight", "mq", "owner", "polled", "shift",
                 "template", "waiting", "writing")  # fmt: skip

    def __init__(self, broker: BrokerQueues, mq: MessageQueue, owner: _Broker,
                 template: SendTemplate) -> None:  # fmt: skip
        self.broker = broker
        self.mq = mq
        self.owner = owner
        self.template = template
        # a record of ``one_record`` takes this many bytes more than its batch body entry
        self.shift = rec.HEADER_BODY_START + template.head_len - ENTRY_FIXED
        self.waiting: collections.deque[tuple] = collections.deque()
        self.in_flight = 0
        self.writing = threading.Lock()
        self.channel: PipelinedChannel | None = None  # where its requests were last written
        self.polled = 0.0  # when a send last read the answers (``POLL_GAP_S``)


class _Request:
    """The sends of one request; ``done`` once its response or failure was taken."""

    __slots__ = ("done", "entries", "queue")

    def __init__(self, q: _Queue, entries: list[tuple]) -> None:
        self.queue = q
        self.entries = entries
        self.done = False


class SendPath(Protocol):
    """What the accumulators need of the producer's TCP sends (``tcp_send.TcpSends``, which
    owns them): its connections, templates and limits, and the path a failed single async
    send takes, so a batched send fails exactly as a single one would."""

    group: str
    send_timeout: float
    max_batch_body: int
    stats: Any  # counters by name
    fault: Callable[[str, float, bool], None]  # (broker name, started, isolation)

    def channel(self, broker: BrokerQueues) -> PipelinedChannel: ...

    def template(self, topic: str) -> SendTemplate: ...

    def failed(
        self, mq: MessageQueue, one: tuple, future: SendFuture, started: float, exc: ShmqError
    ) -> None: ...


class AsyncBatches:
    """The accumulators of one producer's TCP async sends (``sends`` gives the connections,
    templates, limits and the failure path)."""

    def __init__(self, sends: SendPath, max_outstanding: int) -> None:
        self.sends = sends
        self.max_outstanding = max_outstanding
        self._brokers: dict[str, _Broker] = {}
        self._queues: dict[tuple[str, int, str], _Queue] = {}
        self._lock = threading.Lock()
        self._ready: queue.SimpleQueue[_Queue | None] = queue.SimpleQueue()
        self._sender: threading.Thread | None = None
        self._closed = False

    def append(
        self, broker: BrokerQueues, mq: MessageQueue, one: tuple, future: SendFuture,
        started: float,
    ) -> None:  # fmt: skip
        """Accumulate one plain record (``one_record`` with its record made) for ``mq``, and
        send at once when the queue has room; raises ``SendTimeoutError`` when the broker's
        unanswered sends stay at the limit for ``send_timeout``, ``ClientError`` once
        closed."""
        q = self._queues.get((mq.topic, mq.queue_id, broker.address))
        if q is None:
            q = self._queue(broker, mq)
        owner = q.owner
        if owner.outstanding >= self.max_outstanding:
            self._wait_room(owner, mq, started + self.sends.send_timeout)
        with owner.lock:
            if owner.closed:
                raise ClientError("the producer is closed")
            q.waiting.append((one, future, started))
            owner.outstanding += 1
            room = q.in_flight < REQUESTS_PER_QUEUE
        if room:
            self.pump(q)
        elif q.channel is not None and (now := time.monotonic()) - q.polled >= POLL_GAP_S:
            # this thread may hold the GIL longer than the connection's reader can wait for
            # it (a busy caller: up to the 5 ms switch interval), so it reads the answers that
            # came itself, and sends what waits once one made room
            q.polled = now
            q.channel.poll()
            if q.in_flight < REQUESTS_PER_QUEUE:
                self.pump(q)

    def _queue(self, broker: BrokerQueues, mq: MessageQueue) -> _Queue:
        with self._lock:
            if self._closed:
                raise ClientError("the producer is closed")
            owner = self._brokers.get(broker.address)
            if owner is None:
                owner = self._brokers[broker.address] = _Broker()
            key = (mq.topic, mq.queue_id, broker.address)
            q = self._queues.get(key)
            if q is None:
                q = self._queues[key] = _Queue(broker, mq, owner, self.sends.template(mq.topic))
            return q

    def _wait_room(self, owner: _Broker, mq: MessageQueue, deadline: float) -> None:
        while owner.outstanding >= self.max_outstanding and not owner.closed:
            if time.monotonic() >= deadline:
                raise SendTimeoutError(
                    f"{self.max_outstanding} async sends to broker {mq.broker_name} were "
                    f"still unanswered after send_timeout {self.sends.send_timeout:g} s"
                )
            time.sleep(0.0005)

    # -- requests ---------------------------------------------------------------------------

    def pump(self, q: _Queue) -> None:
        """Send what waits in ``q`` while it has room, a request at a time under its write
        lock. A thread that finds the lock taken waits for it rather than leaving the sends
        to its holder: a holder whose socket write let go of the GIL may wait for it up to
        the 5 ms switch interval while this thread runs Python; waiting hands it over."""
        while True:
            with q.writing:
                with q.owner.lock:
                    request = self._take(q) if q.waiting and q.in_flight < REQUESTS_PER_QUEUE \
                        else None  # fmt: skip
                if request is None:
                    return
                self._write(request)

    def _take(self, q: _Queue) -> _Request:
        """The next request's sends (under the broker's lock): the oldest waiting, up to
        ``CHUNK_MESSAGES`` and the batch body limit (at least one)."""
        waiting, shift = q.waiting, q.shift
        first = waiting.popleft()
        entries = [first]
        size, limit = first[ONE][ONE_SIZE] - shift, self.sends.max_batch_body
        while waiting and len(entries) < CHUNK_MESSAGES:
            size += waiting[0][ONE][ONE_SIZE] - shift
            if size > limit:
                break
            entries.append(waiting.popleft())
        q.in_flight += 1
        return _Request(q, entries)

    def _write(self, request: _Request) -> None:
        q, entries = request.queue, request.entries
        try:
            ch = q.channel = self.sends.channel(q.broker)
            op = ch.next_opaque()
            tpl, first = q.template, entries[0][ONE]
            if len(entries) == 1:
                frame = tpl.one_frame(op, q.mq, first)
            else:
                body = batch_body(tpl, entries)
                frame = tpl.frame(op, q.mq.queue_id, 0, first[ONE_BORN], 0, b"", body, batch=True)

            def answered(reply: Reply | None, error: BaseException | None) -> None:
                self._finish(request, reply, error)

            self.sends.stats["tcp_async_requests"] += 1
            ch.send(op, frame, answered, entries[0][STARTED] + self.sends.send_timeout)
        except Exception as exc:  # whatever failed, the request's sends are not left waiting
            self._finish(request, None, exc)

    def _finish(self, request: _Request, reply: Reply | None, error: BaseException | None) -> None:
        """Settle (or fail) the sends of ``request``, once; wake the sender when more wait."""
        q = request.queue
        owner, entries, mq = q.owner, request.entries, q.mq
        with owner.lock:
            if request.done:
                return
            request.done = True
            q.in_flight -= 1
            owner.outstanding -= len(entries)
            more = bool(q.waiting) and not owner.closed
        if more:
            self._wake(q)
        sends = self.sends
        if error is None:
            status = STATUSES.get(reply.code)
            if status is not None:
                try:
                    results = batch_results(status, mq, reply.ext,
                                            [e[ONE][ONE_MSG_ID] for e in entries])  # fmt: skip
                except (KeyError, ValueError) as exc:
                    bad = SendError(f"bad answer from {q.broker.address}: {exc!r}")
                    for entry in entries:
                        entry[FUTURE].settle(exc=bad)
                    return
                sends.fault(mq.broker_name, entries[0][STARTED], False)
                for entry, result in zip(entries, results, strict=True):
                    entry[FUTURE].settle(result)
                return
            error = failure(reply.code, reply.remark, mq, q.broker.broker_name)
        exc = send_error(error, q.broker, mq)
        for one, future, started in entries:
            sends.failed(mq, one, future, started, exc)

    # -- the sender thread ------------------------------------------------------------------

    def _wake(self, q: _Queue) -> None:
        if self._sender is None:
            with self._lock:
                if self._sender is None:
                    self._sender = threading.Thread(
                        target=self._send_loop, name=f"shmq-tcp-batches-{self.sends.group}",
                        daemon=True,
                    )  # fmt: skip
                    self._sender.start()
        self._ready.put(q)

    def _send_loop(self) -> None:
        while (q := self._ready.get()) is not None:
            try:
                self.pump(q)
            except Exception:  # never let the sender die
                log.exception("producer %s: sending a batch failed", self.sends.group)

    # -- lifecycle --------------------------------------------------------------------------

    def close(self, deadline: float) -> None:
        """Let what waits go out and be answered (until ``deadline``), then fail what still
        waits and stop the sender; requests still in flight fail when their connection
        closes."""
        while (any(o.outstanding for o in list(self._brokers.values()))
               and time.monotonic() < deadline):  # fmt: skip
            time.sleep(0.001)
        with self._lock:
            self._closed = True
            queues = list(self._queues.values())
        for q in queues:
            with q.owner.lock:
                q.owner.closed = True
                left = list(q.waiting)
                q.waiting.clear()
                q.owner.outstanding -= len(left)
            error = ClientError(f"the producer was closed before the send to {q.mq} went out")
            for entry in left:
                entry[FUTURE].settle(exc=error)
        with self._lock:
            sender, self._sender = self._sender, None
        if sender is not None:
            self._ready.put(None)
            sender.join(1.0)


def batch_body(template: SendTemplate, entries: list[tuple]) -> bytes:
    """The SEND_BATCH_MESSAGE body of accumulated plain records: each one's body, flag and
    properties (its record tail after the topic)."""
    ones = [entry[ONE] for entry in entries]
    head = template.head_len
    bodies, body_offs = laid_out([one[ONE_BODY] for one in ones])
    props, props_offs = laid_out([one[ONE_TAIL][head:] for one in ones])
    flags = np.fromiter([one[ONE_FLAG] for one in ones], np.int64, len(ones))
    return encode_batch_body(bodies, body_offs, props, props_offs, flags)
