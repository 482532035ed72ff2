"""Transactional messages on the broker: ending transactions and checking them back
(RocketMQ 4.9's ``EndTransactionProcessor``, ``TransactionalMessageServiceImpl`` and
``TransactionalMessageCheckService``).

Half messages arrive from producers' rings like any record (``RMQ_SYS_TRANS_HALF_TOPIC``
queue 0). ``END_TRANSACTION`` names one by its CommitLog offset: a commit writes the real
message (``transaction_records.commit_record``) and then an op record, a rollback only the
op record. Every ``transactionCheckInterval``, half messages older than
``transactionTimeOut`` without an outcome are checked back: the half is appended again with
one more ``TRANSACTION_CHECK_TIMES`` and a live producer of its group is sent
``CHECK_TRANSACTION_STATE`` on its own connection; after ``transactionCheckMax`` checks (or
``fileReservedTime``) it is moved to ``TRANS_CHECK_MAX_TIME_TOPIC`` and closed. A group
with no producer online is waited for, not counted.

Both run in threads of the supervisor process, not in an agent: they need the control
plane's producer connections to send check-backs, and the supervisor is where a restart
begins anyway. Their records go through a ring of their own to the writer. The connection
thread that read an end request queues it; an end thread finishes whatever is queued as one
batch (the commits and op records of a batch published together, one wait), so a busy
producer group costs one writer round trip per batch, not per transaction.

Exactly once, across a SIGKILL anywhere: outcomes are serialised by one lock over the
open-transaction table (``half_table``), so no transaction is finished twice while the
broker runs; a commit is written before its op record, and at start, before any request is
served, the CommitLog after the oldest open transaction is searched for COMMIT records
whose PREPARED_TRANSACTION_OFFSET is the first half of an open transaction: a crash between
a commit and its op record left those, and they get their op record instead of a second
commit. The scans of the half and op queues and that recovery are an object of their own
that the service owns (``scans.HalfQueueScans``).
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

from shmq import half_messages as hm
from shmq.broker.context import BrokerContext
from shmq.broker.ring_puts import broker_ring, refusal
from shmq.broker.transaction.half_table import HalfTable, OpenHalf
from shmq.broker.transaction.records import (
    HalfRecord,
    check_copy,
    check_message,
    commit_record,
    discard_record,
    half_at,
    op_record,
    resumed_record,
)
from shmq.broker.transaction.scans import HalfQueueScans
from shmq.config import parse_host
from shmq.errors import RemotingError, SendTimeoutError, ShmqError
from shmq.ipc import counters as cn
from shmq.ipc import ring
from shmq.ipc.ring_appender import Answer
from shmq.message import pack_host
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode, ResponseError
from shmq.remoting.server import Connection

log = logging.getLogger(__name__)

Rc = ResponseCode
PUT_WAIT_S = 1.0  # a put waits in steps this long, for as long as the broker runs
MAX_END_BATCH = 1024
SCAN_EVERY_S = 1.0  # new half messages are noted at least this often
STATUS_WAIT_S = 5.0
_DISCARDED = hm.CHECK_MAX_TIME_TOPIC.encode()

Producers = Callable[[str], list[Connection]]


@dataclass(slots=True)
class EndRequest:
    """One ``END_TRANSACTION`` (``EndTransactionRequestHeader``); ``done`` holds the
    outcome of a two-way request (None for a oneway one: nobody waits for it)."""

    group: str
    commit_log_offset: int
    tran_state_table_offset: int
    kind: int
    from_check: bool = False
    msg_id: str = ""
    done: Future | None = None

    def succeed(self) -> None:
        if self.done is not None:
            self.done.set_result(None)

    def fail(self, error: ResponseError) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_exception(error)


class TransactionService:
    """The broker's transactions: ``end`` for END_TRANSACTION, a checker thread, ``status``
    for the admin."""

    def __init__(self, ctx: BrokerContext) -> None:
        cfg = ctx.config
        self.timeout_ms = cfg.transaction_time_out
        self.interval_ms = cfg.transaction_check_interval
        self.check_max = cfg.transaction_check_max
        self.reserved_ms = cfg.store.file_reserved_time * 3_600_000
        self.words = ctx.counters.words
        self.topics = ctx.topics
        self.store = ctx.store
        self.events = ctx.events  # transactions ended, for the metrics
        # parks at once on an answer: a spinning thread here takes the CPU the writer needs
        self.ring = broker_ring(ctx, "shmq-transactions", spin_us=0)
        self.born_host = pack_host(*parse_host(cfg.store.store_host))
        self.table = HalfTable()
        self.lock = threading.Lock()  # the table and the ring
        # rocketmq_half_messages: the metrics read the table's counts without that lock
        ctx.events.half_messages = lambda: self.table.open_per_topic()
        self.ready = threading.Event()  # recovered: outcomes may be taken
        self.producers: Producers = lambda _group: []
        self._ends: queue.SimpleQueue[EndRequest] = queue.SimpleQueue()
        self._stop = threading.Event()
        self.scans = HalfQueueScans(ctx.store, ctx.offsets, cfg.store, self.words, self._stop)
        self._threads: list[threading.Thread] = []
        self._turn = itertools.count()
        self.checks_sent = 0
        self.discarded = 0

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self, producers: Producers) -> None:
        """Recover and check in one thread, finish end requests in another;
        ``producers(group)`` gives the live connections of a producer group."""
        self.producers = producers
        for name, target in (("transaction-check", self._check_loop),
                             ("end-transaction", self._end_loop)):  # fmt: skip
            t = threading.Thread(target=target, name=f"shmq-{name}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        """Stop both threads (before the writer stops: they append through it), and commit
        the half and op queue offsets as far as the table has them (the broker persists the
        offsets after this): a clean stop leaves nothing for the next start to scan again."""
        self._stop.set()
        for t in self._threads:
            t.join(PUT_WAIT_S * 3)
        if self.ready.is_set() and not any(t.is_alive() for t in self._threads):
            try:
                with self.lock:
                    self.scans.scan_halves(self.table)
                    self.scans.persist(self.table)
            except ShmqError as exc:
                log.warning("the transaction offsets were not committed at stop: %s", exc)
        while True:
            try:
                request = self._ends.get_nowait()
            except queue.Empty:
                break
            request.fail(ResponseError(Rc.SYSTEM_ERROR, "the broker is stopping"))

    def close(self) -> None:
        if any(t.is_alive() for t in self._threads):  # still appending: leave the ring
            log.warning("the transaction service's threads did not stop")
            return
        self.ring.close()

    # -- end transaction ------------------------------------------------------------------------

    def end(self, request: EndRequest) -> None:
        """Queue ``request`` for the end thread, which finishes whatever is queued as one
        batch (one write of the commits and op records, one wait for the writer); its
        ``done`` future, if any, gets None or the ``ResponseError`` to answer. Never
        finished on the caller's thread: that is the connection's reader, and while it
        waited for the writer the ends behind it would wait unread, one writer round trip
        each."""
        if self._stop.is_set():
            request.fail(ResponseError(Rc.SYSTEM_ERROR, "the broker is stopping"))
        else:
            self._ends.put(request)

    def _end_loop(self) -> None:
        while not self._stop.is_set():
            try:
                batch = [self._ends.get(timeout=0.2)]
            except queue.Empty:
                continue
            while len(batch) < MAX_END_BATCH:
                try:
                    batch.append(self._ends.get_nowait())
                except queue.Empty:
                    break
            while not self.ready.wait(0.2):
                if self._stop.is_set():
                    self._ends.put(batch[-1])  # failed with the rest by stop()
                    for request in batch[:-1]:
                        request.fail(ResponseError(Rc.SYSTEM_ERROR, "the broker is stopping"))
                    return
            with self.lock:
                self._finish_safely(batch)

    def _finish_safely(self, batch: list[EndRequest]) -> None:
        """``_finish`` (hold ``lock``); a request it could not answer gets the error."""
        try:
            self._finish(batch)
        except ShmqError as exc:  # the broker stops under a put
            error = ResponseError(Rc.SYSTEM_ERROR, str(exc))
        except Exception:
            log.exception("ending %d transaction(s) failed", len(batch))
            error = ResponseError(Rc.SYSTEM_ERROR, "ending the transaction failed")
        else:
            return
        for request in batch:
            request.fail(error)

    def _finish(self, batch: list[EndRequest]) -> None:
        """Decide each request, then write the batch's commits and op records in one run.

        A commit's op record follows it in the same run only when the writer can refuse
        nothing of the commit that it would not refuse of the op record too (its real topic
        exists, is writable and has its queue): the writer takes a ring in order, so the
        op record is never stored without its commit. Otherwise the op record is written
        once the commit's answer is in."""
        taken = self._decide(batch)
        now = int(time.time() * 1000)
        records: list[bytes | bytearray] = []
        plan = []  # (request, half, index of its commit record, index of its op record)
        for request, half in taken:
            commit = op = None
            if request.kind == hm.TRANSACTION_COMMIT_TYPE:
                commit = len(records)
                records.append(commit_record(half, self._first_offset(half)))
            if commit is None or self._takes_commit(half):
                op = len(records)
                records.append(op_record(half.identity, self.born_host, now))
            plan.append((request, half, commit, op))
        answers = self._put(records)
        later = []
        for request, half, commit, op in plan:
            op_stored = op is not None and refusal(answers[op], "op record") is None
            error = None if commit is None else refusal(answers[commit], "commit")
            if error is not None and not op_stored:  # stays open: the check-back asks again
                request.fail(error)
                continue
            self.table.finished(half.identity, answers[op].queue_offset if op_stored else -1)
            if error is not None:  # the topic changed under the commit: nothing delivers it
                log.error("the commit of half message %d was refused after the check (%s): "
                          "the message is lost", half.identity, error.remark)  # fmt: skip
                request.fail(error)
                continue
            if op is None:
                later.append(half.identity)
            elif not op_stored:
                log.warning("the op record of half message %d was refused; tried again later",
                            half.identity)  # fmt: skip
            self.events.ended(half.real_topic, commit is not None)
            request.succeed()
        self._close(later, "end transaction")

    def _decide(self, batch: list[EndRequest]) -> list[tuple[EndRequest, HalfRecord]]:
        """The requests of ``batch`` that may end their transaction, with its half message;
        the others are answered (UNKNOW: nothing to do; a refusal: why)."""
        taken: list[tuple[EndRequest, HalfRecord]] = []
        identities: set[int] = set()
        for request in batch:
            if request.kind == hm.TRANSACTION_NOT_TYPE:  # UNKNOW: the check-back asks again
                request.succeed()
                continue
            try:
                half = self._half_for(request)
                reason = self.table.refusal(half)
                if reason is None and half.identity in identities:
                    reason = f"the transaction of half message {half.identity} is already ending"
                if reason is not None:
                    raise ResponseError(Rc.SYSTEM_ERROR, reason)
            except ResponseError as exc:
                log.info("END_TRANSACTION from %s refused: %s", request.group, exc.remark)
                request.fail(exc)
                continue
            identities.add(half.identity)
            taken.append((request, half))
        return taken

    def _takes_commit(self, half: HalfRecord) -> bool:
        """Whether the writer takes ``half``'s commit as surely as an op record: its real
        topic exists, is writable and has its queue."""
        cfg = self.topics.get(half.real_topic)
        return cfg is not None and cfg.is_writable and 0 <= half.real_qid < cfg.write_queue_nums

    def _half_for(self, request: EndRequest) -> HalfRecord:
        """The half message ``request`` names, checked as RocketMQ's
        ``checkPrepareMessage`` does (group, queue offset, CommitLog offset)."""
        if request.kind not in (hm.TRANSACTION_COMMIT_TYPE, hm.TRANSACTION_ROLLBACK_TYPE):
            raise ResponseError(Rc.SYSTEM_ERROR, f"commitOrRollback {request.kind} is not 0, 8 "
                                "or 12")  # fmt: skip
        offset = request.commit_log_offset
        half = None
        if 0 <= offset < cn.load(self.words, cn.WRITE_OFFSET):
            with self.store.reading() as reader:
                batch = reader.record_at(offset)
            half = half_at(batch, 0) if batch is not None else None
        if half is None:
            raise ResponseError(Rc.SYSTEM_ERROR, "Find prepared transaction message failed: "
                                f"no half message at CommitLog offset {offset}")  # fmt: skip
        if half.group != request.group:
            raise ResponseError(Rc.SYSTEM_ERROR, f"The producer group wrong: the half message "
                                f"at {offset} is of {half.group!r}")  # fmt: skip
        if half.queue_offset != request.tran_state_table_offset:
            raise ResponseError(Rc.SYSTEM_ERROR, "The transaction state table offset wrong: "
                                f"the half message at {offset} is at queue offset "
                                f"{half.queue_offset}")  # fmt: skip
        return half

    def _first_offset(self, half: HalfRecord) -> int:
        """The CommitLog offset of the first half message of ``half``'s transaction."""
        if half.identity == half.queue_offset:
            return half.commit_log_offset
        with self.store.reading() as reader:
            units, _ = reader.units(hm.HALF_TOPIC, hm.HALF_QUEUE_ID, half.identity,
                                    half.identity + 1)  # fmt: skip
            return int(units["offset"][0]) if units.size else half.commit_log_offset

    def _close(self, identities: list[int], why: str) -> None:
        """Note ``identities`` done (before anything else can fail: their outcome is
        written), then write their op records (one refused now is tried again at the next
        check pass)."""
        for identity in identities:
            self.table.finished(identity, -1)
        if not identities:
            return
        now = int(time.time() * 1000)
        answers = self._put([op_record(identity, self.born_host, now) for identity in identities])
        for identity, answer in zip(identities, answers, strict=True):
            if refusal(answer, "op record") is None:
                self.table.op_written(identity, answer.queue_offset)
            else:
                log.warning("%s: the op record of half message %d was refused (%s); tried "
                            "again later", why, identity, ring.REASONS[answer.reason])  # fmt: skip

    def _put(self, records: list[bytes | bytearray]) -> list[Answer]:
        """Append ``records`` and wait for every answer, for as long as it takes: the
        writer answers every record of the ring in order, also after it was restarted, and
        an outcome must not be guessed. The records are published together (one pass of
        the writer, one wake-up). Raises ``ShmqError`` only when the broker stops."""
        if not records:
            return []
        appender = self.ring
        first, last = appender.seq, appender.seq + len(records) - 1

        def append_rest(deadline: float) -> None:  # a timeout may leave a prefix appended
            appender.append_raws(records[appender.seq - first :], deadline)

        self._patiently(append_rest)
        self._patiently(lambda d: appender.wait_answer(last, d))
        return [appender.answer(seq) for seq in range(first, last + 1)]

    def _patiently(self, step):
        waited = 0.0
        while True:
            try:
                return step(time.monotonic() + PUT_WAIT_S)
            except SendTimeoutError:
                if self._stop.is_set() or cn.load(self.words, cn.STATE) == cn.STATE_STOPPING:
                    raise ShmqError("the broker is stopping") from None
                waited += PUT_WAIT_S
                if waited % 10 < PUT_WAIT_S:
                    log.warning("the writer has not answered the transaction service for "
                                "%.0f s", waited)  # fmt: skip

    # -- check-back -----------------------------------------------------------------------------

    def _check_loop(self) -> None:
        while not self.ready.is_set():
            try:
                with self.lock:
                    self._recover()
                self.ready.set()
            except Exception:
                if self._stop.is_set():
                    return
                log.exception("recovering transactions failed; trying again")
                self._stop.wait(SCAN_EVERY_S)
        last_check = time.monotonic()
        while not self._stop.wait(min(SCAN_EVERY_S, self.interval_ms / 1000)):
            try:
                with self.lock:
                    self.scans.scan_halves(self.table)
                    if (time.monotonic() - last_check) * 1000 >= self.interval_ms:
                        last_check = time.monotonic()
                        self._check_pass()
                    self.scans.persist(self.table)
            except ShmqError as exc:
                if not self._stop.is_set():
                    log.warning("transaction check failed: %s", exc)
            except Exception:
                log.exception("transaction check failed")

    def _recover(self) -> None:
        """Rebuild the table (``HalfQueueScans.recover``), then give op records to the
        commits a crash left without one."""
        self.table, committed = self.scans.recover()
        self._close(committed, "a commit written before a crash")
        table = self.table
        log.info("transactions recovered: %d open, %d commit(s) given their op record; half "
                 "queue from %d, op queue from %d", len(table.open), len(committed),
                 table.half_offset, table.op_offset)  # fmt: skip
        self.scans.persist(table)

    def _check_pass(self) -> None:
        now = int(time.time() * 1000)
        self._close(self.table.unwritten_ops(), "op record again")
        due, discard = [], []
        for h in sorted(self.table.open.values(), key=lambda h: h.queue_offset):
            age = now - h.born_ms
            if age < self.timeout_ms:
                continue
            if h.check_times >= self.check_max or age > self.reserved_ms:
                discard.append(h)
            elif self.producers(h.group):
                due.append(h)
        for h in discard:
            self._discard(h)
        halves = [half for half in map(self._reread, due) if half is not None]
        copies = self._put([check_copy(half) for half in halves])
        for half, answer in zip(halves, copies, strict=True):
            if refusal(answer, "check-back copy") is None:
                self._ask(half, answer.physical_offset)

    def _reread(self, h: OpenHalf) -> HalfRecord | None:
        with self.store.reading() as reader:
            batch = reader.record_at(h.commit_log_offset)
        half = half_at(batch, 0) if batch is not None else None
        if half is None:  # its CommitLog file was removed (fileReservedTime)
            self._close([h.identity], "half message gone")
        return half

    def _ask(self, half: HalfRecord, copy_offset: int) -> None:
        """Note the copy at ``copy_offset`` as ``half``'s newest and send the check-back
        to one live producer of its group (the next one in turn)."""
        with self.store.reading() as reader:
            batch = reader.record_at(copy_offset)
        copy = half_at(batch, 0) if batch is not None else None
        if copy is None:
            log.warning("the check-back copy at %d cannot be read back", copy_offset)
            return
        self.table.checked(OpenHalf.of(copy))
        fields = {"tranStateTableOffset": copy.queue_offset, "commitLogOffset": copy_offset,
                  "msgId": copy.msg_id, "transactionId": copy.msg_id,
                  "offsetMsgId": copy.offset_msg_id}  # fmt: skip
        request = RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, fields,
                                          check_message(copy), oneway=True)  # fmt: skip
        conns = self.producers(copy.group)
        start = next(self._turn)
        for k in range(len(conns)):
            conn = conns[(start + k) % len(conns)]
            try:
                conn.send(request)
                self.checks_sent += 1
                return
            except RemotingError as exc:
                log.info("check-back of %d to %s failed: %s", copy.identity, conn.peer, exc)

    def _discard(self, h: OpenHalf) -> None:
        half = self._reread(h)
        if half is None:
            return
        (answer,) = self._put([discard_record(half)])
        if refusal(answer, "discard") is None:
            log.warning("half message %d of %s (%s) discarded after %d check(s)", h.identity,
                        h.group, h.msg_id, h.check_times)  # fmt: skip
            self.discarded += 1
            self._close([half.identity], "discard")

    def resume(self, physical_offset: int) -> int:
        """Put the discarded half message at ``physical_offset`` back in the half queue
        with no check counted (RESUME_CHECK_HALF_MESSAGE, mqadmin's
        ``resumeCheckHalfMessage``), so it is checked back again; returns its new CommitLog
        offset. Unlike RocketMQ, which puts back any message, only a message of
        ``TRANS_CHECK_MAX_TIME_TOPIC`` is taken, and not while a copy put back before is
        still open: a half still open is checked already, and a second open copy would be
        a second transaction for one message. ``ResponseError`` naming why not."""
        if not self.ready.is_set() or not self.lock.acquire(timeout=STATUS_WAIT_S):
            raise ResponseError(Rc.SYSTEM_BUSY, "the transaction service is busy (recovering?)")
        try:
            with self.store.reading() as reader:
                batch = reader.record_at(physical_offset)
            discarded = half_at(batch, 0, _DISCARDED) if batch is not None else None
            if discarded is None:
                raise ResponseError(Rc.SYSTEM_ERROR, "no discarded half message (of "
                                    f"{hm.CHECK_MAX_TIME_TOPIC}) at CommitLog offset "
                                    f"{physical_offset}")  # fmt: skip
            again = [h for h in self.table.open.values() if h.msg_id == discarded.msg_id]
            if discarded.msg_id and again:
                raise ResponseError(Rc.SYSTEM_ERROR, f"half message {discarded.msg_id} was put "
                                    f"back already and is still open (transaction "
                                    f"{again[0].identity})")  # fmt: skip
            (answer,) = self._put([resumed_record(discarded)])
            error = refusal(answer, "Put message back to RMQ_SYS_TRANS_HALF_TOPIC")
            if error is not None:
                raise error
            with self.store.reading() as reader:
                back = reader.record_at(answer.physical_offset)
            half = half_at(back, 0) if back is not None else None
            if half is not None:  # open at once: a second resume sees it
                self.table.seen_half(half)
        finally:
            self.lock.release()
        log.info("half message %s of %s put back in the half queue (real topic %s)",
                 discarded.msg_id, discarded.group, discarded.real_topic)  # fmt: skip
        return answer.physical_offset

    # -- status ---------------------------------------------------------------------------------

    def status(self, group: str | None = None) -> dict:
        """The open transactions per producer group (``GET_TRANSACTION_STATUS``)."""
        now = int(time.time() * 1000)
        if not self.lock.acquire(timeout=STATUS_WAIT_S):
            raise ResponseError(Rc.SYSTEM_BUSY, "the transaction service is busy (recovering?)")
        try:
            groups = self.table.groups()
        finally:
            self.lock.release()
        rows = []
        for name, halves in sorted(groups.items()):
            if group is not None and name != group:
                continue
            rows.append({
                "producerGroup": name,
                "pending": len(halves),
                "oldestAgeMs": now - min(h.born_ms for h in halves),
                "maxCheckTimes": max(h.check_times for h in halves),
                "producersOnline": len(self.producers(name)),
                "transactionIds": [h.msg_id for h in halves[:MAX_STATUS_IDS]],
            })  # fmt: skip
        return {"groups": rows, "checksSent": self.checks_sent, "discarded": self.discarded,
                "recovered": self.ready.is_set()}  # fmt: skip


MAX_STATUS_IDS = 20  # transaction ids listed per group
