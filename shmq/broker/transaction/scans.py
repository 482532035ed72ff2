"""The half queue as the transaction service reads it: the scan that notes every half
message stored since the last one, recovery of the open-transaction table at start (op
records from the persisted op offset, halves from the persisted half offset, and the
search for commits a crash left without their op record) and the persisting of both
offsets. ``TransactionService`` (``service``) owns one and gives it its table; the rules
of the table are ``half_table``'s."""

from __future__ import annotations

import logging
import os
import threading

import numpy as np

from shmq import half_messages as hm
from shmq.broker.offset.consumer_offsets import ConsumerOffsetManager
from shmq.broker.store_view import StoreView
from shmq.broker.transaction.half_table import HalfTable
from shmq.broker.transaction.records import half_at, op_identity
from shmq.codec import record as rec
from shmq.config import MessageStoreConfig
from shmq.errors import ShmqError
from shmq.ipc import counters as cn
from shmq.store.commitlog import CommitLog, ScanBatch

log = logging.getLogger(__name__)

OP_READ_BATCH = 4096


class HalfQueueScans:
    """Reads the half and op queues through ``store`` and keeps their offsets in
    ``offsets`` (group ``SYS_TRANS_GROUP``); ``counters``: the shared counters (the
    CommitLog's write offset), ``stop``: set when the broker stops (a long search ends)."""

    def __init__(
        self,
        store: StoreView,
        offsets: ConsumerOffsetManager,
        config: MessageStoreConfig,
        counters: np.ndarray,
        stop: threading.Event,
    ) -> None:
        self.store = store
        self.offsets = offsets
        self.config = config
        self.words = counters
        self.stop = stop

    def scan_halves(self, table: HalfTable) -> None:
        """Note in ``table`` every half message stored since its last scan (closed ones
        unread)."""
        start, end = table.scanned, self.store.max_offset(hm.HALF_TOPIC, hm.HALF_QUEUE_ID)
        per_file = self.config.consume_queue_file_size // 20
        while start < end:
            with self.store.reading() as reader:
                units, _ = reader.units(hm.HALF_TOPIC, hm.HALF_QUEUE_ID, start, end)
                if units.size == 0:  # that file was removed: nothing left to note in it
                    start = (start // per_file + 1) * per_file
                    continue
                qoffs = np.arange(start, start + units.size, dtype=np.int64)
                need = np.fromiter((not table.skips(q) for q in qoffs.tolist()), np.bool_,
                                   qoffs.size)  # fmt: skip
                if need.any():
                    phys = units["offset"][need].astype(np.int64)
                    sizes = units["size"][need].astype(np.int64)
                    for mf, rows, ok in reader.records(hm.HALF_TOPIC, hm.HALF_QUEUE_ID, phys,
                                                       sizes, qoffs[need]):  # fmt: skip
                        batch = ScanBatch(mf, rows)
                        for i in ok.tolist():
                            half = half_at(batch, i)
                            if half is not None:
                                table.seen_half(half)
            start += units.size
        table.scanned_to(max(start, table.scanned))

    def recover(self) -> tuple[HalfTable, list[int]]:
        """The table rebuilt from the persisted offsets, and the open transactions a crash
        left with their commit written and their op record not (``find_commits``): the
        caller closes those."""
        offsets, group = self.offsets, hm.SYS_TRANS_GROUP
        half_offset = max(0, offsets.query(group, hm.HALF_TOPIC, hm.HALF_QUEUE_ID))
        op_offset = max(0, offsets.query(group, hm.OP_TOPIC, hm.HALF_QUEUE_ID))
        table = HalfTable(half_offset, op_offset)
        op_end = self.store.max_offset(hm.OP_TOPIC, hm.HALF_QUEUE_ID)
        offset = op_offset
        while offset < op_end:
            with self.store.reading() as reader:
                msgs, offset_next = reader.read_queue(hm.OP_TOPIC, hm.HALF_QUEUE_ID, offset,
                                                      op_end, OP_READ_BATCH)  # fmt: skip
            for msg in msgs:
                identity = op_identity(msg.body)
                if identity is not None:
                    table.seen_op(identity, msg.queue_offset)
            offset = max(offset_next, offset + 1)
        table.ops_end = max(table.ops_end, op_end)
        self.scan_halves(table)
        return table, self.find_commits(table)

    def find_commits(self, table: HalfTable) -> list[int]:
        """The open transactions of ``table`` whose COMMIT record is in the CommitLog
        (written just before a crash, their op record not)."""
        firsts: dict[int, int] = {}
        for h in table.open.values():
            with self.store.reading() as reader:
                units, _ = reader.units(hm.HALF_TOPIC, hm.HALF_QUEUE_ID, h.identity,
                                        h.identity + 1)  # fmt: skip
            firsts[int(units["offset"][0]) if units.size else h.commit_log_offset] = h.identity
        if not firsts:
            return []
        wanted = np.fromiter(firsts, np.int64, len(firsts))
        commitlog = CommitLog(os.path.join(self.config.store_path_root_dir, "commitlog"),
                              self.config.mapped_file_size_commit_log, readonly=True)  # fmt: skip
        found: list[int] = []
        try:
            start = max(int(wanted.min()), commitlog.min_offset)
            for batch in commitlog.scan(start, cn.load(self.words, cn.WRITE_OFFSET)):
                if self.stop.is_set():
                    raise ShmqError("the broker is stopping")
                rows = batch.rows
                commits = (rows["sysflag"] & rec.SYSFLAG_TRANSACTION_MASK) == (
                    rec.SYSFLAG_TRANSACTION_COMMIT
                )
                prepared = rows["prepared_offset"][commits]
                found += prepared[np.isin(prepared, wanted)].tolist()
        finally:
            commitlog.close()
        return [firsts[first] for first in dict.fromkeys(found)]

    def persist(self, table: HalfTable) -> None:
        """Commit the half and op queue offsets ``table`` has advanced to."""
        half, op = table.advance()
        offsets, group = self.offsets, hm.SYS_TRANS_GROUP
        offsets.commit(group, hm.HALF_TOPIC, hm.HALF_QUEUE_ID, half)  # half first: see
        offsets.commit(group, hm.OP_TOPIC, hm.HALF_QUEUE_ID, op)  # half_table
