"""A producer's link to one broker: its registration and ring, and the sends in flight on it.

``ProducerLinks`` registers with a broker on first use and replaces a link that failed
(a timeout, a fenced ring, a broker that restarted): the old link is *retired*, no new send
uses it, and it is closed once no sync send waits on it and no async send is unanswered.
Appends to a ring are serialised by the link's lock, and async sends are queued for the
completion thread under the same lock, so the queue is in ring order."""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from shmq.client.producer.records import ONE_MSG_ID, ONE_SIZE, placed
from shmq.client.producer.ring import RingProducer
from shmq.client.route import BrokerQueues
from shmq.client.transport.broker_link import BrokerLink
from shmq.client.types import MessageQueue
from shmq.errors import AttemptError, ClientError, SendTimeoutError, ShmqError
from shmq.ipc import counters as cn
from shmq.ipc import ring
from shmq.ipc.procs import pid_alive
from shmq.remoting.client import RemotingClient

if TYPE_CHECKING:
    from shmq.client.producer.records import RecordBatch

log = logging.getLogger(__name__)

# How often a send waiting for an answer checks that the broker is still there.
LIVENESS_CHECK_S = 0.2


class _Retired(ShmqError):
    """The link was retired between looking it up and appending: look it up again. Raised
    by ``ProducerLink.check_open`` and caught by the appends of this module; it never
    escapes it."""


class ProducerLink:
    """A registration with one broker and its ring, shared by every send to that broker.

    ``users`` counts the sync sends waiting on the ring. Async answers are read by the
    completion thread only: ``pending`` holds the async sends in ring order, and
    ``drained_upto`` is the sequence below which every async answer was read, so appends
    never reuse a completion slot whose answer is still unread (``max_inflight``)."""

    def __init__(self, broker: BrokerLink, ring_producer: RingProducer) -> None:
        self.broker = broker
        self.ring = ring_producer
        self.broker_name = broker.broker_name
        self.address = broker.address
        self.counters = broker.counters.words
        self.born_host = broker.born_host
        self.store_host = broker.store_host_bytes
        self.sync_flush = broker.sync_flush
        self.sync_master = broker.sync_master
        self.fallbehind_max = broker.info.get("haSlaveFallbehindMax", 256 << 20)
        self.waits = self.sync_flush or self.sync_master  # answers wait for durability
        self.mask = ring_producer.slots - 1
        # slack for appenders that pass the (unlocked) check at the same time
        self.max_inflight = ring_producer.slots - min(1024, ring_producer.slots // 4)
        self.lock = threading.Lock()
        # async sends in flight: (seq, size, future, mq, msg id, message, started)
        self.pending: collections.deque[tuple] = collections.deque()
        self.drained_upto = ring_producer.seq
        self.draining = False
        self.users = 0
        self.retired = False
        self.closed = False
        self.checked_at = time.monotonic()
        self.flush_timeout = broker.info.get("syncFlushTimeout", 5000) / 1000

    def gone_reason(self, check_pid: bool) -> str | None:
        """Why the broker can no longer answer (stopping, its process is gone, or it fenced
        this ring; a retired link registers again, with a new ring)."""
        if int(self.counters[cn.STATE]) == cn.STATE_STOPPING:
            return "the broker is stopping"
        fenced = self.ring.fence_reason()
        if fenced:
            return f"the broker fenced this producer's ring: {fenced}"
        if check_pid:
            pid = int(self.counters[cn.SUPERVISOR_PID])
            if pid > 0 and not pid_alive(pid):
                return f"the broker process {pid} is gone"
        return None

    def gone_error(self, mq: MessageQueue, why: str) -> AttemptError:
        return AttemptError(
            f"broker {self.broker_name} ({self.address}) cannot take the send to {mq.topic}: {why}",
            retryable=True,
        )

    def reason_text(self, reason: int) -> str:
        """A rejection's reason as the user reads it; SERVICE_NOT_AVAILABLE says why (a
        full disk, a failed flush) from the broker's store status words."""
        text = ring.REASONS.get(reason, f"reason {reason}")
        if reason == ring.REASON_SERVICE_NOT_AVAILABLE:
            return f"SERVICE_NOT_AVAILABLE: {cn.refuse_reason(self.counters) or text}"
        return text

    def check_open(self, mq: MessageQueue) -> None:
        """Call with ``lock`` held before an append."""
        if self.retired:
            raise _Retired
        if self.ring.stopped():
            gone = self.gone_reason(False)
            if gone:
                raise self.gone_error(mq, gone)

    def wait_inflight(self, deadline: float, send_timeout: float) -> None:
        """Block while ``max_inflight`` async answers are still unread."""
        while (self.pending or self.draining) and (
            self.ring.seq - self.drained_upto >= self.max_inflight
        ):
            if time.monotonic() >= deadline:
                raise AttemptError(
                    f"{self.max_inflight} async sends to broker {self.broker_name} were still "
                    f"unanswered after send_timeout {send_timeout:g} s",
                    retryable=False,
                )
            time.sleep(0.0002)

    def unused(self) -> bool:
        """Retired, still open, and no send uses it (call with ``lock`` held)."""
        return self.retired and not self.closed and self.users <= 0 and not self.pending

    def stats(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "retired": self.retired,
            "in_flight_async": len(self.pending),
            "sync_waiting": self.users,
            "parks": self.ring.parking.parks,
            "missed_wakeups": self.ring.parking.missed_wakeups,
        }

    def close(self) -> None:
        try:
            self.ring.close()
        finally:
            self.broker.close()


class ProducerLinks:
    """The producer's current link to each broker, and every link still open; appends to a
    broker's ring and waits for its answers."""

    def __init__(
        self,
        client: RemotingClient,
        group: str,
        spin_us: int,
        default_topic_queue_nums: int,
        send_timeout: float,
    ) -> None:
        self.client = client
        self.send_timeout = send_timeout
        self.group = group
        self.spin_us = spin_us
        self.default_topic_queue_nums = default_topic_queue_nums
        self.current: dict[str, ProducerLink] = {}
        self.all: tuple[ProducerLink, ...] = ()  # every open link (for the completer)
        self.closed = False
        self._lock = threading.Lock()
        self._connect_lock = threading.Lock()

    def link_for(self, broker: BrokerQueues) -> ProducerLink:
        """The current link to ``broker``, registering with it on first use; raises a
        retryable ``AttemptError`` when the broker cannot be reached."""
        name = broker.broker_name
        link = self.current.get(name)
        if link is not None and link.address == broker.address and not link.retired:
            return link
        if self.closed:
            raise ClientError("the producer is closed")
        with self._connect_lock:
            link = self.current.get(name)
            if link is not None and link.address == broker.address and not link.retired:
                return link
            link = self._register(broker)
            with self._lock:
                closed = self.closed
                if not closed:
                    old = self.current.get(name)
                    self.current[name] = link
                    self.all = (*self.all, link)
            if closed:
                link.close()
                raise ClientError("the producer is closed")
            if old is not None:
                self.retire(old)
            return link

    def _register(self, broker: BrokerQueues) -> ProducerLink:
        name = broker.broker_name
        try:
            broker_link = BrokerLink(self.client, broker.address, self.group, "producer")
        except ShmqError as exc:
            raise AttemptError(
                f"cannot register with broker {name} ({broker.address}): {exc}", retryable=True
            ) from exc
        try:
            ring_producer = RingProducer(
                broker_link.info, broker_link.counters, broker_link.registry, self.spin_us,
                self.default_topic_queue_nums,
            )  # fmt: skip
        except ShmqError as exc:
            broker_link.close()
            raise AttemptError(
                f"cannot attach the ring of broker {name} ({broker.address}): {exc}",
                retryable=True,
            ) from exc
        log.info("producer %s: registered with broker %s (%s): ring of %d KiB, born host %s",
                 self.group, name, broker.address, ring_producer.capacity >> 10,
                 broker_link.born_host_text)  # fmt: skip
        return ProducerLink(broker_link, ring_producer)

    def append_one(
        self,
        broker: BrokerQueues,
        mq: MessageQueue,
        one: tuple,
        deadline: float,
        *,
        hold: bool = False,
        future: Any = None,
        started: float = 0.0,
    ) -> tuple[ProducerLink, int, int]:
        """Append ``one`` for ``mq`` to the ring of ``broker`` (registering with it on first
        use); returns the link, the record's sequence and size. ``hold``: a sync send that waits
        on the link (``leave`` it after); ``future``: an async send (``started`` then), queued
        for the completion thread in ring order."""
        # This runs once per single-message send: the common case (a current link, an open
        # ring, a plain record) is written out here rather than in calls.
        for _ in range(3):
            link = self.current.get(broker.broker_name)
            if link is None or link.retired or link.address != broker.address:
                link = self.link_for(broker)
            rp = link.ring
            if (
                future is not None
                and link.pending
                and (rp.seq - link.drained_upto >= link.max_inflight)
            ):
                link.wait_inflight(deadline, self.send_timeout)
            try:
                lock = link.lock
                lock.acquire()  # not ``with``: its enter and exit calls cost twice as much
                try:
                    if self.closed:  # close() waits for appends that got past this
                        raise ClientError("the producer is closed")
                    if link.retired or rp.stopped():
                        link.check_open(mq)
                    if future is not None and not link.pending and not link.draining:
                        link.drained_upto = rp.seq  # no async answer is unread
                    if hold:  # counted before the record: the writer may answer it at once
                        link.users += 1
                        rp.publish_answer_waiters(link.users)
                    try:
                        if one[0] is None:  # delayed or half: its record depends on the queue
                            seq, size = _append_placed(rp, link, mq, one, deadline)
                        else:
                            seq = rp.append_one(one, mq.queue_id, link.born_host, deadline)
                            size = one[ONE_SIZE]
                    except BaseException:
                        if hold:
                            link.users -= 1
                            rp.publish_answer_waiters(link.users)
                        raise
                    if future is not None:
                        link.pending.append((seq, size, future, mq, one[ONE_MSG_ID], one, started))
                finally:
                    lock.release()  # also the barrier that orders the record before the wake
            except _Retired:
                continue
            except SendTimeoutError:
                raise self._ring_full(link, mq) from None
            except AttemptError:
                self.retire(link)
                raise
            rp.wake_writer()
            return link, seq, size
        raise _replaced(broker)

    def send_batch(
        self, broker: BrokerQueues, mq: MessageQueue, batch: RecordBatch
    ) -> tuple[ProducerLink, np.ndarray, np.ndarray]:
        """Send ``batch`` to ``mq`` (sync) and wait for every answer: ``(link, answers as
        int64 (n, 4) rows, record sizes)``; ``leave`` the link after.

        Pipelined: the records go in chunks of at most half ``max_inflight`` and two chunks
        are in flight at a time; a chunk's answers are read before the chunk after the next
        is appended, so the producer encodes while the writer appends, and a batch larger
        than the ring's completion slots never has its first answers overwritten. Each
        chunk must be answered within ``send_timeout`` of its append. A failure after a
        chunk was stored is final (``AttemptError``, not retryable: the rest would be sent
        twice)."""
        n = batch.n
        link, first, sizes = self._append_chunk(broker, mq, batch, 0, n)
        chunk = sizes.shape[0]
        rows = np.empty((n, 4), dtype=np.int64)
        all_sizes = np.empty(n, dtype=np.int64)
        all_sizes[:chunk] = sizes
        flight = collections.deque([(0, chunk, first, time.monotonic() + self.send_timeout)])
        pos = chunk
        try:
            while flight:
                if pos < n and len(flight) < 2:
                    first, sizes = self._append_more(link, mq, batch, pos, n)
                    c = sizes.shape[0]
                    all_sizes[pos : pos + c] = sizes
                    flight.append((pos, c, first, time.monotonic() + self.send_timeout))
                    pos += c
                    continue
                at, c, first, deadline = flight.popleft()
                try:
                    rows[at : at + c] = self.wait_rows(link, mq, first, c, deadline)
                except (SendTimeoutError, AttemptError) as exc:
                    if at == 0:
                        raise
                    raise AttemptError(f"{exc} ({at} of {n} messages were stored)",
                                       retryable=False) from exc  # fmt: skip
        except BaseException:
            self.leave(link)
            raise
        return link, rows, all_sizes

    def _append_chunk(
        self, broker: BrokerQueues, mq: MessageQueue, batch: RecordBatch, pos: int, n: int
    ) -> tuple[ProducerLink, int, np.ndarray]:
        """Append the first chunk of ``batch`` (registering with the broker on first use),
        holding the link for the sync send: the link, the first sequence, the sizes."""
        for _ in range(3):
            link = self.link_for(broker)
            try:
                first, sizes = self._append_more(link, mq, batch, pos, n, hold=True)
                return link, first, sizes
            except _Retired:
                continue
        raise _replaced(broker)

    def _append_more(
        self, link: ProducerLink, mq: MessageQueue, batch: RecordBatch, pos: int, n: int,
        hold: bool = False,
    ) -> tuple[int, np.ndarray]:  # fmt: skip
        """Append records ``pos ..`` of ``batch`` (one chunk) to ``link``'s ring."""
        count = min(n - pos, max(1, link.max_inflight // 2))
        shared = batch.props_offs.shape[0] == 2
        fields = batch.fields(mq.queue_id, link.born_host, pos, pos + count)
        try:
            with link.lock:
                if self.closed:
                    raise ClientError("the producer is closed")
                link.check_open(mq)
                first, sizes = link.ring.append(
                    batch.topic_raw, batch.bodies, batch.body_offs[pos : pos + count + 1],
                    batch.props,
                    batch.props_offs if shared else batch.props_offs[pos : pos + count + 1],
                    fields, time.monotonic() + self.send_timeout,
                )  # fmt: skip
                if hold:  # a waiting sync send: the writer answers at once (ipc.idle)
                    link.users += 1
                    link.ring.publish_answer_waiters(link.users)
                return first, sizes
        except SendTimeoutError:
            raise self._ring_full(link, mq) from None
        except AttemptError:
            self.retire(link)
            raise

    def _ring_full(self, link: ProducerLink, mq: MessageQueue) -> SendTimeoutError:
        self.retire(link)  # the ring stayed full: the writer does not take records
        return SendTimeoutError(
            f"the ring of broker {link.broker_name} ({link.address}) stayed full for "
            f"send_timeout {self.send_timeout:g} s (topic {mq.topic})"
        )

    def wait_answer(
        self, link: ProducerLink, mq: MessageQueue, seq: int, last: int, deadline: float
    ) -> tuple[int, int, int]:
        """Wait until records up to ``last`` are answered (they come in order), checking
        every ``LIVENESS_CHECK_S`` that the broker is still there; returns ``seq``'s
        answer."""
        rp = link.ring
        while not rp.answered(last):
            now = time.monotonic()
            try:
                rp.wait_answer(last, min(deadline, now + LIVENESS_CHECK_S))
                break
            except SendTimeoutError:
                if rp.answered(last):
                    break
                gone = link.gone_reason(True)
                if gone:
                    raise link.gone_error(mq, gone) from None
                if time.monotonic() >= deadline:
                    raise SendTimeoutError(
                        f"broker {link.broker_name} ({link.address}) did not answer the send "
                        f"to {mq.topic} within send_timeout {self.send_timeout:g} s"
                    ) from None
        return rp.answer_words(seq)

    def wait_rows(
        self, link: ProducerLink, mq: MessageQueue, first: int, n: int, deadline: float
    ) -> np.ndarray:
        """The answers of a bulk send as an int64 ``(n, 4)`` array (a copy)."""
        self.wait_answer(link, mq, first, first + n - 1, deadline)
        start = first & link.mask
        comp = link.ring.completions
        if start + n <= link.mask + 1:
            return comp[start : start + n].copy()
        return comp[(first + np.arange(n)) & link.mask]

    def drain(self, link: ProducerLink, deadline: float) -> None:
        """Until the writer has answered every record appended to ``link``'s ring (oneway
        sends leave nothing else to wait on): a closing producer must not unregister, and
        so have its ring destroyed, with records still in it. Gives up at ``deadline`` or
        when the broker is gone."""
        rp = link.ring
        last = rp.seq - 1
        while last >= 0 and not rp.answered(last):
            now = time.monotonic()
            gone = link.gone_reason(True)
            if gone or now >= deadline:
                log.warning("producer %s closed with %d record(s) unanswered by broker %s: %s",
                            self.group, last + 1 - rp.w[ring.SEQ_HEAD], link.broker_name,
                            gone or "send_timeout passed")  # fmt: skip
                return
            with contextlib.suppress(SendTimeoutError):
                rp.wait_answer(last, min(deadline, now + LIVENESS_CHECK_S))

    def leave(self, link: ProducerLink) -> None:
        """A sync send is done with ``link``."""
        with link.lock:
            link.users -= 1
            link.ring.publish_answer_waiters(link.users)
        if link.retired:
            self.close_if_unused(link)

    def retire(self, link: ProducerLink) -> None:
        """No new sends on ``link``; it is closed once no send uses it."""
        with self._lock:
            if self.current.get(link.broker_name) is link:
                del self.current[link.broker_name]
        link.retired = True
        self.close_if_unused(link)

    def close_if_unused(self, link: ProducerLink) -> None:
        with link.lock:
            close = link.unused()
            if close:
                link.closed = True
        if not close:
            return
        with self._lock:
            self.all = tuple(other for other in self.all if other is not link)
        try:
            link.close()
        except Exception as exc:  # the broker may be gone: nothing to give back then
            log.debug("closing the link to %s: %s", link.broker_name, exc)

    def close(self) -> list[ProducerLink]:
        """No new links; returns the open ones (still to be retired by the caller)."""
        with self._lock:
            self.closed = True
            return list(self.all)

    def stats(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            links = sorted(self.all, key=lambda link: not link.retired)
        return {link.broker_name: link.stats() for link in links}


def _append_placed(
    rp: RingProducer, link: ProducerLink, mq: MessageQueue, one: tuple, deadline: float
) -> tuple[int, int]:
    """Append ``one``, a record whose bytes depend on its queue (delayed, half, retried),
    for ``mq`` (the caller holds ``link.lock``): its sequence and size."""
    record, qid, reconsume = placed(one, mq.queue_id, rp.delay_levels, rp.max_delay_ms)
    return rp.append_one(record, qid, link.born_host, deadline, reconsume), record[ONE_SIZE]


def _replaced(broker: BrokerQueues) -> AttemptError:
    return AttemptError(f"the link to broker {broker.broker_name} keeps being replaced",
                        retryable=True)  # fmt: skip
