"""Async sends: the future each one returns, and the thread that completes them.

``send_async`` appends a record and returns a ``SendFuture`` at once; the producer's
completion thread reads the broker's answers in ring order, a whole run of them at a time,
and settles each future with its ``SendResult`` (after the flush, in SYNC_FLUSH). A failed
send is retried on the same broker ``retry_times_when_send_async_failed`` times (RocketMQ's
``onExceptionImpl``); a send unanswered after ``send_timeout``, or whose broker is gone, fails.
A send whose broker is alive but late is not retried, unlike RocketMQ's: its record is still
in the ring and will be stored, so a retry would store it twice (issue 53, item 1); one whose
ring the broker fenced is retried, since the fence settles what the writer stored from it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from concurrent.futures._base import FINISHED, RUNNING
from typing import Any

from shmq.client.producer import answers
from shmq.client.producer.link import LIVENESS_CHECK_S, ProducerLink, ProducerLinks
from shmq.client.types import SendStatus
from shmq.errors import SendError, SendTimeoutError, ShmqError
from shmq.ipc import ring
from shmq.wakeup import Signal

log = logging.getLogger(__name__)

# the fields of a pending async send
SEQ, SIZE, FUTURE, MQ, MSG_ID, MESSAGE, STARTED = range(7)
ANSWER_RUN_MIN = 8  # fewer answers are read one by one: a copy's fixed cost is ~1 µs


class SendFuture(Future):
    """A ``concurrent.futures.Future`` of a ``SendResult`` that costs little to create and
    complete: its condition, waiter list and callback list are made on first use (waiting,
    ``add_done_callback``, ``concurrent.futures.wait``), so a future nobody waits on is
    settled by two stores. ``_guard`` orders the making of a condition against that fast
    settling: either the future was settled first (the new condition's owner then sees it
    done) or the settling goes through the condition, as ``Future.set_result`` does."""

    _guard = threading.Lock()

    def __init__(self) -> None:  # Future.__init__ is not called: nothing is made up front
        self._state = RUNNING  # in flight: it cannot be cancelled
        self._result = None
        self._exception = None
        self._cond: threading.Condition | None = None
        self._waiter_list: list | None = None
        self._callbacks: list | None = None
        self.attempts = 0

    @property
    def _condition(self) -> threading.Condition:
        cond = self._cond
        if cond is None:
            with SendFuture._guard:
                cond = self._cond
                if cond is None:
                    cond = self._cond = threading.Condition()
        return cond

    @property
    def _waiters(self) -> list:  # used by Future's methods under the condition only
        if self._waiter_list is None:
            self._waiter_list = []
        return self._waiter_list

    @property
    def _done_callbacks(self) -> list:
        if self._callbacks is None:
            self._callbacks = []
        return self._callbacks

    # A settled future never changes again, and settle() stores the result before the
    # state: reading a FINISHED state needs no lock (Future's methods always take one).
    def done(self) -> bool:
        return self._state == FINISHED or super().done()

    def result(self, timeout: float | None = None) -> Any:
        if self._state == FINISHED:
            if self._exception is not None:
                raise self._exception
            return self._result
        return super().result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if self._state == FINISHED:
            return self._exception
        return super().exception(timeout)

    def add_done_callback(self, fn: Callable[[Future], Any]) -> None:
        """``Future.add_done_callback`` without making the condition while the future is in
        flight (a traced or called-back send would pay for one): ``settle`` calls the
        callbacks kept here."""
        with SendFuture._guard:
            if self._cond is None and self._state == RUNNING:
                if self._callbacks is None:
                    self._callbacks = [fn]
                else:
                    self._callbacks.append(fn)
                return
        super().add_done_callback(fn)  # settled (called now), or waited on already

    def settle(self, result: Any = None, exc: BaseException | None = None) -> bool:
        """Complete the future once: False when it was settled already (``close`` may race
        the completion thread)."""
        guard = SendFuture._guard
        guard.acquire()
        if self._cond is None:
            callbacks = None
            settled = self._state == RUNNING
            if settled:
                self._result = result
                self._exception = exc
                self._state = FINISHED
                callbacks = self._callbacks
            guard.release()
            if callbacks:
                self._invoke_callbacks()
            return settled
        guard.release()
        try:
            if exc is None:
                self.set_result(result)
            else:
                self.set_exception(exc)
        except InvalidStateError:
            return False
        return True


class AsyncCompletion:
    """The completion thread of one producer, started on the first async send.

    ``resend(entry)`` appends a failed send again (raising when that fails too);
    ``fault(broker, started, isolation)`` records a broker's latency."""

    def __init__(
        self,
        group: str,
        links: ProducerLinks,
        *,
        send_timeout: float,
        retries: int,
        resend: Callable[[tuple], None],
        invalidate: Callable[[str], None],
        fault: Callable[[str, float, bool], None],
        stats: Any,
    ) -> None:
        self.group = group
        self.links = links
        self.send_timeout = send_timeout
        self.retries = retries
        self.resend = resend
        self.invalidate = invalidate
        self.fault = fault
        self.stats = stats
        self.idle = False
        self.closing = False
        self.started = False  # read by every async send before it calls ensure_started
        self._wake = Signal()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def ensure_started(self) -> None:
        if self._thread is not None:
            return
        with self._lock:
            if self._thread is None and not self.closing:
                self._thread = threading.Thread(
                    target=self._loop, name=f"shmq-producer-{self.group}", daemon=True
                )
                self._thread.start()
                self.started = True

    def wake(self) -> None:
        """After an append: the thread sleeps when nothing was in flight."""
        if self.idle:
            self._wake.set()

    def stop(self) -> bool:
        """Answer what is in flight (within the send timeout), then stop; False when the
        thread did not stop in time."""
        self.closing = True
        thread = self._thread
        if thread is None:
            return True
        self._wake.set()
        thread.join(self.send_timeout + 10.0)
        return not thread.is_alive()

    # -- the loop ---------------------------------------------------------------------------

    def _loop(self) -> None:
        """Resolve async futures in ring order, for every broker with sends in flight."""
        turn = 0
        while True:
            active = [link for link in self.links.all if link.pending]
            if not active:
                if self.closing:
                    return
                self.idle = True
                if not any(link.pending for link in self.links.all):
                    self._wake.wait(0.1)
                self.idle = False
                continue
            done = 0
            for link in active:
                try:
                    done += self._drain(link)
                except Exception:  # never let the completion thread die
                    log.exception("producer %s: completing async sends failed", self.group)
            if done:
                continue
            link = active[turn % len(active)]
            turn += 1
            pending = link.pending
            if pending:
                head = pending[0]
                now = time.monotonic()
                slice_s = LIVENESS_CHECK_S if len(active) == 1 else 0.002
                deadline = min(head[STARTED] + self.send_timeout, now + slice_s)
                try:
                    link.ring.wait_answer(head[SEQ], deadline)
                except SendTimeoutError:
                    pass
                except Exception:
                    log.exception("producer %s: waiting for answers failed", self.group)
            for link in active:
                try:
                    self._expire(link)
                except Exception:
                    log.exception("producer %s: expiring async sends failed", self.group)

    def _drain(self, link: ProducerLink) -> int:
        """Resolve the async sends of ``link`` that the broker has answered."""
        pending = link.pending
        if not pending:  # (a link without async sends in flight may be closed any time)
            return 0
        rp = link.ring
        seq_head = rp.w[ring.SEQ_HEAD]
        if pending[0][SEQ] >= seq_head:
            return 0
        link.draining = True
        batch = []
        try:
            while pending and pending[0][SEQ] < seq_head:
                batch.append(pending.popleft())
            # read now: the slots may be reused once drained_upto moves; a run of async sends
            # only (no sync send between them) in one copy
            first, n = batch[0][SEQ], len(batch)
            if n >= ANSWER_RUN_MIN and batch[-1][SEQ] - first == n - 1:
                words = rp.answer_run(first, n)
            else:
                words = [rp.answer_words(entry[SEQ]) for entry in batch]
            link.drained_upto = seq_head
            link.draining = False
            self._resolve(link, batch, words)
            return len(batch)
        except BaseException as exc:  # whatever failed, no future of the batch stays open
            link.draining = False
            error = SendError(f"completing async sends to broker {link.broker_name} failed: "
                              f"{exc!r}")  # fmt: skip
            for entry in batch:
                entry[FUTURE].settle(exc=error)
            raise

    def _resolve(self, link: ProducerLink, batch: list[tuple], words: list) -> None:
        """Settle the futures of ``batch`` from their answers."""
        flushed: list[bool] | None = None
        flush_error: BaseException | None = None
        status = SendStatus.SEND_OK
        if link.waits:
            ends = [w[2] + e[SIZE] for e, w in zip(batch, words, strict=True)
                    if w[0] & answers.STATUS_MASK != ring.REJECTED]  # fmt: skip
            if ends:
                try:
                    status = answers.flush_status(link, max(ends))
                except SendError as exc:
                    flush_error = exc
                flushed = [answers.flushed(link, w[2] + e[SIZE])
                           for e, w in zip(batch, words, strict=True)]  # fmt: skip
        host = link.store_host
        if link.retired:
            self.links.close_if_unused(link)
        ok, timeout = SendStatus.SEND_OK, status  # not durable in time: the batch's status
        for i, (entry, answer) in enumerate(zip(batch, words, strict=True)):
            if answer[0] & answers.STATUS_MASK == ring.REJECTED:
                self.failed(entry, answers.rejection(link, entry[MQ], [answer[0]]))
                continue
            if flush_error is not None:
                entry[FUTURE].settle(exc=flush_error)
                continue
            self.fault(link.broker_name, entry[STARTED], False)
            status = ok if flushed is None or flushed[i] else timeout
            msg_id = entry[MSG_ID].decode()
            placed = entry[MESSAGE][0] is None
            entry[FUTURE].settle(answers.result(status, msg_id, entry[MQ], answer, host, placed))

    def _expire(self, link: ProducerLink) -> None:
        """Fail (or retry) the unanswered async sends of ``link`` whose broker is gone or
        whose send timeout passed."""
        pending = link.pending
        if not pending or link.ring.answered(pending[0][SEQ]):
            return
        now = time.monotonic()
        gone = None
        if now - link.checked_at >= LIVENESS_CHECK_S or self.closing:
            link.checked_at = now
            gone = link.gone_reason(True)
        if gone is None and now < pending[0][STARTED] + self.send_timeout:
            return
        self.links.retire(link)  # later sends register anew
        expired = []
        while pending and (gone is not None or pending[0][STARTED] + self.send_timeout <= now):
            if link.ring.answered(pending[0][SEQ]):
                break
            expired.append(pending.popleft())
        try:
            self.links.close_if_unused(link)
            for entry in expired:
                if gone is not None:
                    self.failed(entry, link.gone_error(entry[MQ], gone))
                    continue
                # The record stays in the ring, which the writer reads (a released ring is
                # drained, a restarted writer resumes it): a copy sent through another ring
                # would be stored beside it. So a late answer fails the send, unretried.
                self.failed(entry, SendTimeoutError(
                    f"broker {link.broker_name} ({link.address}) did not answer the send to "
                    f"{entry[MQ].topic} within send_timeout {self.send_timeout:g} s; the "
                    "message is in the broker's ring and may still be stored, so it is not "
                    "sent again"), retry=False)  # fmt: skip
        except BaseException as exc:
            error = SendError(f"failing expired async sends failed: {exc!r}")
            for entry in expired:
                entry[FUTURE].settle(exc=error)
            raise

    # -- failures ---------------------------------------------------------------------------

    def failed(self, entry: tuple, exc: BaseException, retry: bool = True) -> None:
        """Retry ``entry`` on the same broker (unless ``retry`` is False), or fail its
        future."""
        future, mq = entry[FUTURE], entry[MQ]
        self.fault(mq.broker_name, entry[STARTED], True)
        if retry and answers.retryable(exc) and future.attempts < self.retries and not self.closing:
            future.attempts += 1
            self.stats["async_retries"] += 1
            self.invalidate(mq.topic)
            log.debug("async send to %s failed (%s); retry %d", mq, exc, future.attempts)
            try:
                self.resend(entry)
            except ShmqError as again:
                self.failed(entry, again)
            return
        self.stats["async_failed"] += 1
        answers.settle_failed(future, mq, exc)
