"""The exactly-once Spark sink (option ``exactlyOnce=true``): rows are stored as half messages
by the tasks and delivered by the driver's commit, once per epoch, whatever is retried.

Spark's contract: tasks ``write`` and return a commit message each; the driver then calls
``commit(messages, epoch)`` (streaming; ``commit(messages)`` for a batch job) once the
epoch's tasks succeeded, or ``abort``. A retried task, a driver that died after the sink's
commit but before Spark noted it in the checkpoint (the epoch is replayed after the
restart, same epoch number) and a batch job run again are the ways rows would be written
twice. Here:

* **Tasks** send each row as a half message (RocketMQ's transactional message: stored, not
  delivered) of producer group ``producerGroup`` (``shmq-spark-eos-writer``), in bulk
  (``TransactionProducer.send_half_bulk``). Each half carries the transaction's *scope*
  (the streaming query's id, stable across restarts from a checkpoint, which the task
  reads with the epoch from Spark's local properties; ``job:<jobId>`` for a batch job),
  the epoch (0 in batch) and the task attempt's random *write id*. The commit message
  carries them and where the halves are: per broker, the half queue offsets and CommitLog
  offsets that END_TRANSACTION names.
* **The driver's commit** first looks for the epoch's *ledger entry* (namesrv KV namespace
  ``shmq-spark-sink``, key ``<scope>@<epoch>``; the namesrv keeps its KV table in
  ``kvConfig.json``, fsynced before it answers, so it outlives restarts of the broker, the
  namesrv and Spark). Absent: it writes one naming every write id of the messages with their
  half locations (compressed). **That write is the commit point.** Then it ends every half
  the entry names with END_TRANSACTION COMMIT (oneway, then a two-way barrier answered
  once the broker decided them all) and rolls back halves of the messages that the entry
  does not name.
  Present (a replay): the entry wins, its halves are committed again and the replay's own
  halves rolled back. A half ended before is refused as finished, which counts as done,
  so re-ending is idempotent. ``abort`` rolls the messages' halves back, unless the entry
  exists (then it finishes the entry, like ``commit``).
* **Check-backs**: every task's producer is a ``TransactionProducer`` of the group whose
  listener (``EpochChecker``) answers from the ledger: entry present, COMMIT if it names
  the half's write id, else ROLLBACK; no entry yet, UNKNOW (the epoch may still commit).

Decision: the outcome never depends on a live checker. The ledger holds the locations of the
committed halves, so the next commit of the same epoch (the replay after a restart, or
Spark's retry of the batch job) finishes whatever a crash left open; check-backs only clean
up earlier, and halves of task attempts that never reached a commit message.

Failure analysis (none delivers a row twice or loses a committed one):

* task killed or retried: its halves are in no commit message, so in no ledger entry; the
  check-back rolls them back once the epoch's entry exists (a failed send rolls the task's
  halves back at once);
* driver killed before the ledger write: no entry; the restarted query replays the epoch,
  new halves are committed, the old ones rolled back by check-back;
* driver killed after the ledger write, before or during the ENDs: the replay finds the
  entry, re-ends its halves (finished ones answer "finished") and rolls back its own;
  before a replay, a check-back commits them;
* broker killed between a commit and its op record: the broker's recovery gives the
  commit its op record instead of a second commit; an END the dead broker never answered
  fails the commit, so the query fails, and its restart re-ends the entry's halves;
* namesrv unreachable at the commit: no entry is written, the commit fails, the epoch is
  replayed later.

Limits: halves that nobody answers (a query abandoned after a failed epoch) stay invisible
until the broker discards them after ``transactionCheckMax`` checks. An epoch whose commit
comes later than ``transactionTimeOut`` plus ``transactionCheckMax`` check intervals
after its halves were sent (15 min with RocketMQ's defaults) has its halves discarded:
raise ``transactionCheckMax`` for longer epochs. Bulk halves go over shared memory, so
the broker must be on the executors' host; rows with keys or properties are sent one
half at a time (slow). A ledger entry holds its half locations delta-coded and
compressed (about 3 KiB per 100,000 rows); a stream keeps its last two (the namesrv's KV
table is bounded), a batch job's stays until deleted with ``Admin.delete_kv_config``.
An END the broker refuses for another reason than "finished" (its real topic made
read-only meanwhile) leaves the half open for a check-back, which needs a live producer
of the group (the next micro-batch's tasks). The commit costs the broker one END_TRANSACTION per row
(``bench/spark_bench.py``: about 17,000 rows/s against 460,000 at least once).
"""

from __future__ import annotations

import base64
import json
import logging
import time
import uuid
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import WriterCommitMessage

from shmq import half_messages as hm
from shmq.client.admin.admin import Admin
from shmq.client.transaction.end_frames import EndFrames
from shmq.client.transaction.producer import TransactionProducer
from shmq.client.transaction.types import LocalTransactionState
from shmq.client.types import MessageQueue, SendStatus
from shmq.errors import ConfigError, RemotingError, SendError, ShmqError
from shmq.message import Message, MessageExt, parse_offset_msg_id
from shmq.remoting.duplex import DuplexChannel
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode
from shmq.spark.options import WriteOptions
from shmq.spark.sender import RowSender, SinkColumns

log = logging.getLogger(__name__)

KV_NAMESPACE = "shmq-spark-sink"
SCOPE = "SHMQ_SPARK_SCOPE"  # the half's properties: its transaction's scope, epoch, write id
EPOCH = "SHMQ_SPARK_EPOCH"
WRITE_ID = "SHMQ_SPARK_WRITE"
ABSENT_RECHECK_S = 1.0  # a check-back asks the ledger again for an epoch without an entry
END_FRAMES_PER_WRITE = 4096  # oneway END_TRANSACTION frames written to the socket at once
END_TIMEOUT_S = 35.0  # the broker answers an END within 30 s (END_ANSWER_TIMEOUT_S)
# what the broker answers to an END for a transaction that has its outcome already
_FINISHED = ("is already finished", "is finished or was discarded", "is already ending")
JOB_SCOPE_PREFIX = "job:"  # a batch job's scope; a stream's is its query id
# A stream's entries kept: Spark replays at most the epoch after its last noted commit, so
# when epoch E commits, E - 1 is noted and never replayed; E - 1's entry is kept for the
# check-backs of its failed tasks' halves, older ones are deleted.
KEPT_EPOCHS = 2
# Spark's local properties of a micro-batch's tasks
_QUERY_ID = "sql.streaming.queryId"
_BATCH_ID = "streaming.sql.batchId"


@dataclass
class Halves:
    """Half messages one task stored on one broker: what END_TRANSACTION names."""

    broker: str
    queue_offsets: np.ndarray
    commit_log_offsets: np.ndarray

    def to_json(self) -> list[str]:
        return [self.broker, _pack(self.queue_offsets), _pack(self.commit_log_offsets)]

    @classmethod
    def from_json(cls, item: list[str]) -> Halves:
        return cls(item[0], _unpack(item[1]), _unpack(item[2]))


def _pack(values: np.ndarray) -> str:
    """int64 offsets as text: deltas (mostly one record apart), zlib, base64."""
    deltas = np.diff(values.astype(np.int64), prepend=np.int64(0)).astype("<i8")
    return base64.b64encode(zlib.compress(deltas.tobytes(), 6)).decode()


def _unpack(text: str) -> np.ndarray:
    deltas = np.frombuffer(zlib.decompress(base64.b64decode(text)), dtype="<i8")
    return np.cumsum(deltas, dtype=np.int64)


@dataclass
class TransactionalCommitMessage(WriterCommitMessage):
    """What one task attempt sent: ``messages`` rows as half messages of transaction
    ``scope`` / ``epoch``, marked with ``write_id``, at ``halves``."""

    messages: int
    scope: str
    epoch: int
    write_id: str
    halves: list[Halves]


def task_scope(job_scope: str | None) -> tuple[str, int]:
    """The running task's transaction scope and epoch: ``job_scope`` and 0 for a batch job,
    the streaming query's id and micro-batch id (Spark's local properties) otherwise."""
    if job_scope is not None:
        return job_scope, 0
    from pyspark import TaskContext

    context = TaskContext.get()
    query = context.getLocalProperty(_QUERY_ID) if context is not None else None
    batch = context.getLocalProperty(_BATCH_ID) if context is not None else None
    if not query or batch is None:
        raise ConfigError(
            "the exactly-once stream sink needs Spark's micro-batch local properties "
            f"{_QUERY_ID} and {_BATCH_ID}; continuous processing is not supported"
        )
    return query, int(batch)


class Ledger:
    """The committed epochs: one namesrv KV entry per (scope, epoch), JSON
    ``{write id: [halves, ...]}`` (see the module)."""

    def __init__(self, opts: WriteOptions) -> None:
        self._admin = Admin(opts.namesrv, credentials=opts.credentials, tls=opts.tls)

    @staticmethod
    def key(scope: str, epoch: int) -> str:
        return f"{scope}@{epoch}"

    def get(self, scope: str, epoch: int) -> dict[str, list[Halves]] | None:
        text = self._admin.get_kv_config(KV_NAMESPACE, self.key(scope, epoch))
        if text is None:
            return None
        return {w: [Halves.from_json(h) for h in hs] for w, hs in json.loads(text).items()}

    def put(self, scope: str, epoch: int, record: dict[str, list[Halves]]) -> None:
        text = json.dumps({w: [h.to_json() for h in hs] for w, hs in record.items()})
        self._admin.update_kv_config(KV_NAMESPACE, self.key(scope, epoch), text)

    def forget(self, scope: str, epoch: int) -> None:
        """Delete an entry no commit needs any more (best effort: the namesrv's table is
        bounded, 10,000 keys, so a stream must not keep one per micro-batch)."""
        try:
            self._admin.delete_kv_config(KV_NAMESPACE, self.key(scope, epoch))
        except ShmqError as exc:
            log.warning("shmq sink: ledger entry %s not deleted: %s", self.key(scope, epoch), exc)

    def close(self) -> None:
        self._admin.close()


class EpochChecker:
    """The ``TransactionListener`` of the sink's producers: a check-back is answered from
    the ledger (see the module). The halves are never sent with a local transaction, so
    ``execute_local_transaction`` is not called."""

    def __init__(self, opts: WriteOptions) -> None:
        self._opts = opts
        self._ledger: Ledger | None = None
        # a broker checks back every open half: one ledger look-up per epoch, not per half
        # (an entry, once written, never changes; its absence is asked again after a while)
        self._entries: dict[tuple[str, int], frozenset[str]] = {}
        self._absent: dict[tuple[str, int], float] = {}

    def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState:
        return LocalTransactionState.UNKNOW

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        props = msg.properties
        scope, epoch, write_id = props.get(SCOPE), props.get(EPOCH), props.get(WRITE_ID)
        if not scope or epoch is None or not epoch.isdigit() or not write_id:
            log.warning("check-back of %s: no Spark sink transaction in its properties",
                        msg.msg_id)  # fmt: skip
            return LocalTransactionState.UNKNOW
        write_ids = self._committed(scope, int(epoch))
        if write_ids is None:
            return LocalTransactionState.UNKNOW
        if write_id in write_ids:
            return LocalTransactionState.COMMIT_MESSAGE
        return LocalTransactionState.ROLLBACK_MESSAGE

    def _committed(self, scope: str, epoch: int) -> frozenset[str] | None:
        """The write ids the ledger commits for ``scope`` / ``epoch``, None without an entry."""
        key = (scope, epoch)
        known = self._entries.get(key)
        if known is not None:
            return known
        if time.monotonic() - self._absent.get(key, -ABSENT_RECHECK_S) < ABSENT_RECHECK_S:
            return None
        if self._ledger is None:
            self._ledger = Ledger(self._opts)
        record = self._ledger.get(scope, epoch)
        if record is None:
            self._absent[key] = time.monotonic()
            return None
        self._entries[key] = frozenset(record)
        return self._entries[key]

    def close(self) -> None:
        if self._ledger is not None:
            self._ledger.close()


class HalfSender(RowSender):
    """``RowSender`` storing every row as a half message marked with ``marks`` (scope,
    epoch, write id), noting where each was stored."""

    def __init__(self, opts: WriteOptions, cols: SinkColumns, marks: dict[str, str]) -> None:
        self.marks = marks
        self.checker = EpochChecker(opts)
        self._located: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {}
        super().__init__(opts, cols)

    def _producer(self) -> TransactionProducer:
        o = self.opts
        return TransactionProducer(o.producer_group, o.namesrv, listener=self.checker,
                                   send_timeout=o.send_timeout, credentials=o.credentials,
                                   tls=o.tls)  # fmt: skip

    def _note(self, mq: MessageQueue, queue_offsets, commit_log_offsets) -> None:
        qs, cs = self._located.setdefault(self.producer.broker_address(mq), ([], []))
        qs.append(np.asarray(queue_offsets, dtype=np.int64))
        cs.append(np.asarray(commit_log_offsets, dtype=np.int64))

    def _send_chunk(
        self, topic: str, chunk: tuple[np.ndarray, np.ndarray], tags: str | None
    ) -> SendStatus:
        result = self.producer.send_half_bulk(topic, chunk, tags=tags, properties=self.marks)
        self._note(result.message_queue, result.queue_offsets, result.physical_offsets)
        return result.send_status

    def _send_list(self, messages: list[Message]) -> SendStatus:
        for msg in messages:
            msg.properties.update(self.marks)
            result = self.producer.send_half(msg)
            _, offset = parse_offset_msg_id(result.offset_msg_id)
            self._note(result.message_queue, [result.queue_offset], [offset])
            if result.send_status is not SendStatus.SEND_OK:
                return result.send_status
        return SendStatus.SEND_OK

    def halves(self) -> list[Halves]:
        return [Halves(broker, np.concatenate(qs), np.concatenate(cs))
                for broker, (qs, cs) in self._located.items()]  # fmt: skip

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.checker.close()


def write_halves(
    opts: WriteOptions, cols: SinkColumns, iterator: Iterator[pa.RecordBatch], job_scope: str | None
) -> TransactionalCommitMessage:
    """A task's write: every row a half message (see the module). A failed send rolls back
    what the task stored before raising."""
    scope, epoch = task_scope(job_scope)
    write_id = uuid.uuid4().hex
    sender = HalfSender(opts, cols, {SCOPE: scope, EPOCH: str(epoch), WRITE_ID: write_id})
    try:
        for batch in iterator:
            sender.send(batch)
    except BaseException:
        try:
            end_halves(opts, sender.halves(), commit=False)
        except ShmqError as exc:  # the check-back rolls them back
            log.warning("shmq sink: rolling back a failed task's half messages: %s", exc)
        raise
    finally:
        sender.close()
    return TransactionalCommitMessage(sender.sent, scope, epoch, write_id, sender.halves())


def _ours(messages: Sequence[WriterCommitMessage | None]) -> list[TransactionalCommitMessage]:
    return [m for m in messages if isinstance(m, TransactionalCommitMessage)]


def commit_epoch(
    opts: WriteOptions, messages: Sequence[WriterCommitMessage | None], epoch: int | None = None
) -> None:
    """The driver's commit of one epoch (see the module): the ledger entry, then the ENDs.
    ``epoch``: Spark's batch id (None for a batch job, whose tasks know theirs)."""
    sent = _ours(messages)
    if not sent:
        return
    scope = sent[0].scope
    epoch = sent[0].epoch if epoch is None else epoch
    wrong = [m for m in sent if m.scope != scope or m.epoch != epoch]
    if wrong:
        raise SendError(
            f"shmq sink: the commit of {scope}@{epoch} got a task's message of "
            f"{wrong[0].scope}@{wrong[0].epoch}"
        )
    ledger = Ledger(opts)
    try:
        record = ledger.get(scope, epoch)
        if record is None:
            record = {m.write_id: m.halves for m in sent}
            ledger.put(scope, epoch, record)  # the commit point
        else:
            log.info("shmq sink: %s@%d was committed before; finishing that commit", scope, epoch)
        end_halves(opts, [h for hs in record.values() for h in hs], commit=True)
        end_halves(opts, [h for m in sent if m.write_id not in record for h in m.halves],
                   commit=False)  # fmt: skip
        if not scope.startswith(JOB_SCOPE_PREFIX) and epoch >= KEPT_EPOCHS:
            ledger.forget(scope, epoch - KEPT_EPOCHS)
    finally:
        ledger.close()


def abort_epoch(opts: WriteOptions, messages: Sequence[WriterCommitMessage | None]) -> None:
    """Spark gave the epoch up: roll its halves back, unless its ledger entry exists (a
    commit point passed: then that commit is finished)."""
    sent = _ours(messages)
    if not sent:
        return
    ledger = Ledger(opts)
    try:
        record = ledger.get(sent[0].scope, sent[0].epoch)
    finally:
        ledger.close()
    if record is not None:
        commit_epoch(opts, messages, sent[0].epoch)
        return
    end_halves(opts, [h for m in sent for h in m.halves], commit=False)


def end_halves(opts: WriteOptions, halves: list[Halves], *, commit: bool) -> None:
    """End the transaction of every half of ``halves``: per broker, on one connection, every
    END_TRANSACTION oneway (the broker ends a queue of them per writer round trip), then
    the last one again two-way, twice, as a barrier. A connection's requests are handled
    one at a time in order and one broker thread ends them in batches, first come, first
    ended; an END refused at once ("already ending": its half is in the same batch) is
    answered before its batch is written, so the second barrier, sent after that answer,
    lands in a later batch and is answered after every END before it was written. A half
    already ended counts as ended (the barrier's usual answer). ``SendError`` when a
    barrier fails: the broker stopped or the connection broke, and some ENDs may be lost
    (the epoch's next commit, or a check-back, ends them)."""
    kind = hm.TRANSACTION_COMMIT_TYPE if commit else hm.TRANSACTION_ROLLBACK_TYPE
    frames = EndFrames(opts.producer_group, opts.credentials)
    by_broker: dict[str, list[Halves]] = {}
    for h in halves:
        if h.queue_offsets.size:
            by_broker.setdefault(h.broker, []).append(h)
    for broker, parts in by_broker.items():
        channel = DuplexChannel(broker, lambda _request: None, credentials=opts.credentials,
                                tls=opts.tls, default_timeout=END_TIMEOUT_S)  # fmt: skip
        try:
            for h in parts:
                pairs = list(zip(h.queue_offsets.tolist(), h.commit_log_offsets.tolist(),
                                 strict=True))  # fmt: skip
                for a in range(0, len(pairs), END_FRAMES_PER_WRITE):
                    channel.send_frame_soon(b"".join(
                        frames.frame(q, c, kind, "", False)
                        for q, c in pairs[a : a + END_FRAMES_PER_WRITE]))  # fmt: skip
            last = parts[-1]
            fields = {"producerGroup": opts.producer_group, "commitOrRollback": kind,
                      "tranStateTableOffset": int(last.queue_offsets[-1]),
                      "commitLogOffset": int(last.commit_log_offsets[-1]),
                      "fromTransactionCheck": False, "msgId": ""}  # fmt: skip
            for _ in range(2):
                _barrier(channel, fields)
        except RemotingError as exc:
            raise SendError(f"shmq sink: ending half messages on {broker} failed: {exc}") from exc
        finally:
            channel.close()


def _barrier(channel: DuplexChannel, fields: dict) -> None:
    """A two-way END_TRANSACTION; ``SendError`` unless it ended its half or found it ended."""
    response = channel.invoke(RemotingCommand.request(RequestCode.END_TRANSACTION, fields))
    remark = response.remark or ""
    if response.code != ResponseCode.SUCCESS and not any(t in remark for t in _FINISHED):
        raise SendError(f"shmq sink: ending half messages on {channel.addr} failed: {remark}")
