"""The records of transactional messages as the broker reads and writes them.

A transaction is known by its *identity*: the queue offset of its first half message in
``RMQ_SYS_TRANS_HALF_TOPIC``. A check-back re-appends the half (RocketMQ's
``putBackHalfMsgQueue``) with ``TRANSACTION_CHECK_TIMES`` counted up and, unlike RocketMQ,
always with ``TRAN_PREPARED_QUEUE_OFFSET`` naming the identity, so every copy and every
outcome (the op record's body, a commit's PREPARED_TRANSACTION_OFFSET) points back to the
one transaction, whichever copy the producer answered about.

Written here: the commit (the half under its real topic and queue, sysflag COMMIT,
PREPARED_TRANSACTION_OFFSET the CommitLog offset of the first half, properties as stored,
REAL_TOPIC / REAL_QID / TRAN_MSG included, as RocketMQ freezes them), the op record
(4.9's: tag ``d``, body the identity in decimal ASCII), the check-back copy, the discard
(to ``TRANS_CHECK_MAX_TIME_TOPIC``), a discarded half put back and the message a producer
is asked about.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from shmq import half_messages as hm
from shmq.codec import record as rec
from shmq.codec.record_pack import record_struct, tail
from shmq.codec.record_rebuild import (
    PHYSICAL_OFFSET_POS,
    QUEUE_OFFSET_POS,
    edit_properties,
    rebuild_record,
)
from shmq.message import offset_msg_id
from shmq.properties import PROPERTY_UNIQ_KEY, decode_properties
from shmq.store.commitlog import ScanBatch

_HALF_TOPIC = hm.HALF_TOPIC.encode()
_I64 = struct.Struct(">q")
_OP_HEAD = tail(hm.OP_TOPIC.encode(), hm.OP_PROPERTIES)


@dataclass(slots=True)  # not frozen: a frozen dataclass is built 4x slower
class HalfRecord:
    """One stored half message (the first or a check-back copy) and what the broker needs
    of it; ``buf`` / ``row`` locate its bytes for the records built from it."""

    commit_log_offset: int
    queue_offset: int
    identity: int
    group: str
    real_topic: str
    real_qid: int
    check_times: int
    born_ms: int
    store_ms: int
    msg_id: str
    buf: np.ndarray
    row: np.void  # a RECORD_ROW of ``buf``

    @property
    def props(self) -> bytes:
        s, n = int(self.row["props_start"]), int(self.row["props_len"])
        return self.buf[s : s + n].tobytes()

    @property
    def offset_msg_id(self) -> str:
        at = int(self.row["store_host"])
        size = 20 if int(self.row["sysflag"]) & rec.SYSFLAG_STOREHOST_V6 else 8
        return offset_msg_id(self.buf[at : at + size].tobytes(), self.commit_log_offset)


def half_at(batch: ScanBatch, i: int, topic: bytes = _HALF_TOPIC) -> HalfRecord | None:
    """Record ``i`` of ``batch`` as a half message stored in ``topic`` (the half topic, or
    ``TRANS_CHECK_MAX_TIME_TOPIC`` for a discarded one), or None when it is not one (another
    topic, no ``TRAN_MSG=true``, or no valid real topic and queue)."""
    buf, row = batch.buf, batch.rows[i]
    s, n = int(row["topic_start"]), int(row["topic_len"])
    if buf[s : s + n].tobytes() != topic:
        return None
    s, n = int(row["props_start"]), int(row["props_len"])
    props = decode_properties(buf[s : s + n].tobytes())
    if props.get(hm.TRAN_MSG) != "true" or not props.get(hm.REAL_TOPIC):
        return None
    try:
        real_qid = int(props.get(hm.REAL_QID, ""))
        check_times = int(props.get(hm.CHECK_TIMES, "0"))
        queue_offset = int(row["queue_offset"])
        identity = int(props.get(hm.PREPARED_QUEUE_OFFSET, queue_offset))
    except ValueError:
        return None
    phys = int(row["phys_offset"])
    return HalfRecord(
        phys, queue_offset, identity, props.get(hm.PGROUP, ""), props[hm.REAL_TOPIC],
        real_qid, check_times, int(row["born_ts"]), int(row["store_ts"]),
        props.get(PROPERTY_UNIQ_KEY, ""), buf, row,
    )  # fmt: skip


def commit_record(half: HalfRecord, first_offset: int) -> bytearray:
    """The committed message: ``half`` under its real topic and queue, sysflag COMMIT and
    PREPARED_TRANSACTION_OFFSET ``first_offset`` (the transaction's first half)."""
    sysflag = int(half.row["sysflag"]) & ~rec.SYSFLAG_TRANSACTION_MASK
    return rebuild_record(
        half.buf, half.row, half.real_topic.encode(), half.real_qid, half.props,
        sysflag=sysflag | rec.SYSFLAG_TRANSACTION_COMMIT, prepared_offset=first_offset,
    )  # fmt: skip


def check_copy(half: HalfRecord) -> bytearray:
    """The half appended again before a check-back: one more check counted, and the
    identity named."""
    add = {hm.CHECK_TIMES: str(half.check_times + 1), hm.PREPARED_QUEUE_OFFSET: str(half.identity)}
    props = edit_properties(half.props, add=add)
    return rebuild_record(half.buf, half.row, _HALF_TOPIC, hm.HALF_QUEUE_ID, props)


def discard_record(half: HalfRecord) -> bytearray:
    """``half`` moved to ``TRANS_CHECK_MAX_TIME_TOPIC`` (checked too often, or too old)."""
    return rebuild_record(half.buf, half.row, hm.CHECK_MAX_TIME_TOPIC.encode(), 0, half.props)


def resumed_record(discarded: HalfRecord) -> bytearray:
    """A discarded half message back in the half topic with no check counted (mqadmin
    ``resumeCheckHalfMessage``), as the first half of a transaction of its own: the
    identity of the one it was discarded from is closed by an op record."""
    props = edit_properties(discarded.props, remove={hm.PREPARED_QUEUE_OFFSET.encode()},
                            add={hm.CHECK_TIMES: "0"})  # fmt: skip
    return rebuild_record(discarded.buf, discarded.row, _HALF_TOPIC, hm.HALF_QUEUE_ID, props)


def op_record(identity: int, born_host: int, now_ms: int) -> bytes:
    """The op record that closes transaction ``identity`` (a commit, a rollback or a
    discard): RocketMQ 4.9's ``addRemoveTagInTransactionOp``."""
    head, magic = _OP_HEAD
    body = str(identity).encode()
    size = rec.HEADER_BODY_START + len(body) + len(head)
    out = bytearray(size)
    record_struct(len(body), len(head)).pack_into(
        out, 0, size, magic, 0, hm.HALF_QUEUE_ID, 0, 0, 0, 0, now_ms, born_host, 0, born_host,
        0, 0, len(body), body, head,
    )  # fmt: skip
    return bytes(out)


def op_identity(body: bytes) -> int | None:
    """The identity an op record's body names, or None for a body that names none."""
    text = body.strip()
    return int(text) if text.isdigit() else None


def check_message(half: HalfRecord) -> bytes:
    """The message a producer is asked about (``CHECK_TRANSACTION_STATE``'s body,
    RocketMQ's ``MessageDecoder.encode``): the half under its real topic and queue, with
    the half's queue and CommitLog offsets, which its answer names."""
    out = rebuild_record(half.buf, half.row, half.real_topic.encode(), half.real_qid, half.props)
    _I64.pack_into(out, QUEUE_OFFSET_POS, half.queue_offset)
    _I64.pack_into(out, PHYSICAL_OFFSET_POS, half.commit_log_offset)
    return bytes(out)
