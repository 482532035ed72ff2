"""A consumer's read of the newest messages of one queue, prepared once per queue.

A consumer that keeps up reads a message or a few per wake-up, all in the CommitLog file the
writer is filling. ``StoreReader.fetch_messages`` answers such a read with the same kernel
call (``select_own_records``) but makes, per read, what does not change between reads: the
queue's file lookup, its topic's bytes, two scratch arrays, a ``Fetch`` with three array
views, an ``OwnedRecords``. For one message it took ~5.2 µs (measured hot, in a loop), the
kernel call ~1 µs of it; ``QueueTail`` keeps those and answers with the messages alone, in
~3.2 µs.

It answers only what ``fetch_messages`` would answer with messages whose records all lie in
the newest CommitLog file, or with none because the tag filter skipped every unit it looked
at (the next read begins after them, as there). Everything else is None, for
``fetch_messages`` to answer by the whole rule (``store.fetch``): an offset outside the
queue, a missing file, a record cleanup removed, a unit that points into an older file.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import numpy as np

from shmq.codec.consume_queue import (
    CQ_UNIT_SIZE,
    NO_CODES,
    SCAN_FOUND,
    SCAN_NO_MATCHED,
    select_own_records,
)
from shmq.message import MessageExt
from shmq.store.commitlog import stored_messages
from shmq.store.fetch import UnitsFile

if TYPE_CHECKING:
    from shmq.store.reader import MappedFiles

SCRATCH_UNITS = 32  # a push consumer's pull batch; a larger read grows the scratch once


class QueueTail:
    """The newest messages of one queue of a ``StoreReader``; ``read`` is used by one thread
    at a time (another thread that reads the queue meanwhile gets None: the general path)."""

    __slots__ = ("cols", "commitlog", "lock", "name", "picks", "queue_id", "topic",
                 "units_file", "units_per_file")  # fmt: skip

    def __init__(
        self, topic: str, queue_id: int, name: np.ndarray, units_file: UnitsFile,
        cq_file_size: int, commitlog: MappedFiles,
    ) -> None:  # fmt: skip
        self.topic = topic
        self.queue_id = queue_id
        self.name = name  # the topic as ``units_match`` compares it (``topic_bytes``)
        self.units_file = units_file
        self.units_per_file = cq_file_size // CQ_UNIT_SIZE
        self.commitlog = commitlog
        self.picks = np.empty((3, SCRATCH_UNITS), dtype=np.int64)
        self.cols = np.empty((SCRATCH_UNITS, 5), dtype=np.int64)
        self.lock = threading.Lock()

    def read(
        self, offset: int, max_nums: int, codes: np.ndarray | None, min_offset: int,
        max_offset: int, min_phys: int, write_offset: int,
    ) -> tuple[list[MessageExt], int, int] | None:  # fmt: skip
        """From ``offset``, at most ``max_nums`` messages whose tag hash is in ``codes``
        (None: any), within the queue's published ``[min_offset, max_offset)`` and the
        CommitLog's ``[min_phys, write_offset)``: ``(messages, where the next read begins,
        their records' bytes)``, or None when ``fetch_messages`` must answer."""
        if not min_offset <= offset < max_offset or not write_offset:
            return None  # the offsets alone decide (``store.fetch.by_offsets``)
        found = self.units_file(offset)
        mf = self.commitlog.file_at(write_offset - 1)
        if found is None or mf is None:
            return None
        units, start = found
        count = min(self.units_per_file - start, max_offset - offset)
        max_nums = max(1, max_nums)
        if not self.lock.acquire(blocking=False):
            return None
        try:
            picks, cols = self.picks, self.cols
            if picks.shape[1] < min(count, max_nums):
                picks = self.picks = np.empty((3, min(count, max_nums)), dtype=np.int64)
                cols = self.cols = np.empty((picks.shape[1], 5), dtype=np.int64)
            status, scanned, _, _, owned, lo, hi, total = select_own_records(
                units, start, count, NO_CODES if codes is None else codes, offset, max_nums,
                write_offset, min_phys, self.commitlog.file_size, picks, mf.read_view,
                mf.file_from_offset, self.name, self.queue_id, cols,
            )  # fmt: skip
            if status == SCAN_NO_MATCHED:
                return [], offset + scanned, 0
            if status != SCAN_FOUND or owned < 0:
                return None
            rows = cols[:owned].tolist()
        finally:
            self.lock.release()
        if not rows:  # the units taken point at records that are not theirs
            return [], offset + scanned, 0
        return stored_messages(mf.buf, rows, lo, hi, total, self.topic), offset + scanned, total
