"""The half queue as the transaction service reads it: the scan that notes every half
message stored since the last one, recovery of the open-transaction table at start (op
records from the persisted op offset, halves from the persisted half offset, and the
search for commits a crash left without their op record) and the persisting of both
offsets. A mixin of ``TransactionService`` (``transactions``), whose table, reader and
put path it uses; the rules of the table are ``half_table``'s."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from shmq.broker.transaction.half_table import HalfTable
from shmq.broker.transaction.records import half_at, op_identity
from shmq.codec import half_messages as hm
from shmq.codec import record as rec
from shmq.errors import ShmqError
from shmq.ipc import counters as cn
from shmq.ipc import queue_table as qt
from shmq.store.commitlog import CommitLog, ScanBatch
from shmq.store.reader import StoreReader

if TYPE_CHECKING:
    from shmq.broker.supervisor import Broker

log = logging.getLogger(__name__)

OP_READ_BATCH = 4096


class HalfQueueScans:
    """Scans and recovery of the half and op queues (needs ``TransactionService``'s
    attributes and ``_close``)."""

    broker: Broker
    words: np.ndarray
    reader: StoreReader
    directory: qt.QueueDirectory
    maxima: np.ndarray
    table: HalfTable
    _stop: threading.Event
    _close: Callable[[list[int], str], None]  # op records for transactions found finished

    def _max(self, topic: str) -> int:
        slot = self.directory.slot(topic.encode(), hm.HALF_QUEUE_ID)
        if slot < 0:
            self.directory.refresh()
            slot = self.directory.slot(topic.encode(), hm.HALF_QUEUE_ID)
        return int(self.maxima[slot]) if slot >= 0 else 0

    def _scan_halves(self) -> None:
        """Note every half message stored since the last scan (closed ones unread)."""
        table, start, end = self.table, self.table.scanned, self._max(hm.HALF_TOPIC)
        per_file = self.broker.config.store.consume_queue_file_size // 20
        while start < end:
            units, _ = self.reader.units(hm.HALF_TOPIC, hm.HALF_QUEUE_ID, start, end)
            if units.size == 0:  # that file was removed: nothing left to note in it
                start = (start // per_file + 1) * per_file
                continue
            qoffs = np.arange(start, start + units.size, dtype=np.int64)
            need = np.fromiter((not table.skips(q) for q in qoffs.tolist()), np.bool_, qoffs.size)
            if need.any():
                phys = units["offset"][need].astype(np.int64)
                sizes = units["size"][need].astype(np.int64)
                for mf, rows, ok in self.reader.records(hm.HALF_TOPIC, hm.HALF_QUEUE_ID, phys,
                                                        sizes, qoffs[need]):  # fmt: skip
                    batch = ScanBatch(mf, rows)
                    for i in ok.tolist():
                        half = half_at(batch, i)
                        if half is not None:
                            table.seen_half(half)
            start += units.size
        table.scanned_to(max(start, table.scanned))

    def _recover(self) -> None:
        """Rebuild the table from the persisted offsets, then give op records to commits
        a crash left without one."""
        offsets, group = self.broker.offsets, hm.SYS_TRANS_GROUP
        half_offset = max(0, offsets.query(group, hm.HALF_TOPIC, hm.HALF_QUEUE_ID))
        op_offset = max(0, offsets.query(group, hm.OP_TOPIC, hm.HALF_QUEUE_ID))
        self.table = table = HalfTable(half_offset, op_offset)
        op_end = self._max(hm.OP_TOPIC)
        offset = op_offset
        while offset < op_end:
            msgs, offset_next = self.reader.read_queue(hm.OP_TOPIC, hm.HALF_QUEUE_ID, offset,
                                                       op_end, OP_READ_BATCH)  # fmt: skip
            for msg in msgs:
                identity = op_identity(msg.body)
                if identity is not None:
                    table.seen_op(identity, msg.queue_offset)
            offset = max(offset_next, offset + 1)
        table.ops_end = max(table.ops_end, op_end)
        self._scan_halves()
        repaired = self._repair()
        log.info("transactions recovered: %d open, %d commit(s) given their op record; half "
                 "queue from %d, op queue from %d", len(table.open), repaired, half_offset,
                 op_offset)  # fmt: skip
        self._persist()

    def _repair(self) -> int:
        """Find COMMIT records of open transactions (written just before a crash, their op
        record not) and close those transactions."""
        firsts: dict[int, int] = {}
        for h in self.table.open.values():
            units, _ = self.reader.units(hm.HALF_TOPIC, hm.HALF_QUEUE_ID, h.identity,
                                         h.identity + 1)  # fmt: skip
            firsts[int(units["offset"][0]) if units.size else h.commit_log_offset] = h.identity
        if not firsts:
            return 0
        wanted = np.fromiter(firsts, np.int64, len(firsts))
        store = self.broker.config.store
        commitlog = CommitLog(os.path.join(self.broker.root, "commitlog"),
                              store.mapped_file_size_commit_log, readonly=True)  # fmt: skip
        found: list[int] = []
        try:
            start = max(int(wanted.min()), commitlog.min_offset)
            for batch in commitlog.scan(start, cn.load(self.words, cn.WRITE_OFFSET)):
                if self._stop.is_set():
                    raise ShmqError("the broker is stopping")
                rows = batch.rows
                commits = (rows[:, rec.R_SYSFLAG] & rec.SYSFLAG_TRANSACTION_MASK) == (
                    rec.SYSFLAG_TRANSACTION_COMMIT
                )
                prepared = rows[commits, rec.R_PREP_TX]
                found += prepared[np.isin(prepared, wanted)].tolist()
        finally:
            commitlog.close()
        repaired = [firsts[first] for first in dict.fromkeys(found)]
        self._close(repaired, "a commit written before a crash")
        return len(repaired)

    def _persist(self) -> None:
        half, op = self.table.advance()
        offsets, group = self.broker.offsets, hm.SYS_TRANS_GROUP
        offsets.commit(group, hm.HALF_TOPIC, hm.HALF_QUEUE_ID, half)  # half first: see
        offsets.commit(group, hm.OP_TOPIC, hm.HALF_QUEUE_ID, op)  # half_table
