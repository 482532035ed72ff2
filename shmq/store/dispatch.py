"""Dispatch (RocketMQ's reput): build consume queues and the index from CommitLog records.

Used by ``MessageStore`` in one process and by the broker's reput agent in its own process.
"""

from __future__ import annotations

import logging
import os

import numpy as np

from shmq.codec import record as rec
from shmq.errors import InvalidMessageError
from shmq.message import validate_topic
from shmq.store.commitlog import ScanBatch
from shmq.store.consume_queue import ConsumeQueue
from shmq.store.index_service import IndexService

log = logging.getLogger(__name__)

MAX_QUEUE_ID = 65535
# Transaction types that enter consume queues and the index (NOT and COMMIT).
_DISPATCHED_TX_TYPES = (0, rec.SYSFLAG_TRANSACTION_COMMIT)


class Dispatcher:
    """Owns the consume queues under ``cq_root`` (and writes the index, when given one)."""

    def __init__(self, cq_root: str, cq_file_size: int, index: IndexService | None) -> None:
        self.cq_root = cq_root
        self.cq_file_size = cq_file_size
        self.index = index
        self.consume_queues: dict[tuple[str, int], ConsumeQueue] = {}

    def load(self) -> None:
        """Map every consume queue found on disk (their ends are found by ``recover``)."""
        if not os.path.isdir(self.cq_root):
            return
        for topic in sorted(os.listdir(self.cq_root)):
            for qid in sorted(os.listdir(os.path.join(self.cq_root, topic))):
                if qid.isdigit():
                    self.consume_queue(topic, int(qid)).load()

    def consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = self.consume_queues.get((topic, queue_id))
        if cq is None:
            cq = ConsumeQueue(self.cq_root, topic, queue_id, self.cq_file_size)
            self.consume_queues[(topic, queue_id)] = cq
        return cq

    def dispatch_batch(self, batch: ScanBatch) -> tuple[int, dict[tuple[str, int], ConsumeQueue]]:
        """Write one scanned batch into consume queues (grouped by queue, one ``put`` per
        queue) and the index (per record with keys). Returns the records seen and the
        queues written."""
        touched: dict[tuple[str, int], ConsumeQueue] = {}
        rows = batch.rows
        n = rows.shape[0]
        if n == 0:
            return 0, touched
        ids = np.empty(n, dtype=np.int64)
        first = np.empty(n, dtype=np.int64)
        distinct = rec.topic_ids(batch.buf, rows, ids, first)
        topics = [batch.topic(int(first[t])) for t in range(distinct)]
        good_topic = np.array([_dispatchable_topic(t) for t in topics], dtype=np.bool_)
        qids = rows[:, rec.R_QUEUE_ID]
        tx = rows[:, rec.R_SYSFLAG] & rec.SYSFLAG_TRANSACTION_MASK
        keep = np.isin(tx, _DISPATCHED_TX_TYPES)
        good = good_topic[ids] & (qids >= 0) & (qids <= MAX_QUEUE_ID)
        for i in np.nonzero(keep & ~good)[0].tolist():
            log.error(
                "record at %d has topic %r queue %d, which no queue may have: not dispatched",
                int(batch.file.file_from_offset + rows[i, rec.R_POS]),
                topics[ids[i]][:140],
                int(qids[i]),
            )
        keep &= good
        phys = batch.physical_offsets()
        members = np.nonzero(keep)[0]
        group_keys = ids[members] * (MAX_QUEUE_ID + 1) + qids[members]
        order = np.argsort(group_keys, kind="stable")  # queue offsets stay in log order
        members, group_keys = members[order], group_keys[order]
        bounds = np.flatnonzero(np.diff(group_keys)) + 1
        for idx in np.split(members, bounds) if members.size else ():
            key = (topics[ids[idx[0]]], int(qids[idx[0]]))
            cq = self.consume_queue(*key)
            cq.put(
                rows[idx, rec.R_QUEUE_OFFSET],
                phys[idx],
                rows[idx, rec.R_SIZE],
                rows[idx, rec.R_TAGS_CODE],
            )
            touched[key] = cq
        if self.index is not None:
            picks = np.flatnonzero(keep & (rows[:, rec.R_INDEX_FLAGS] != 0))
            if picks.size:
                self.index.build_index_batch(batch.buf, rows, picks, batch.file.file_from_offset)
        return n, touched

    def flush(self, least_pages: int = 0) -> None:
        for cq in self.consume_queues.values():
            cq.flush(least_pages)

    def close(self) -> None:
        for cq in self.consume_queues.values():
            cq.close()


def _dispatchable_topic(topic: str) -> bool:
    """A stored record's topic must be one a put accepts: it becomes a directory name, so a
    damaged one must never reach the filesystem."""
    try:
        validate_topic(topic)
    except InvalidMessageError:
        return False
    return True
