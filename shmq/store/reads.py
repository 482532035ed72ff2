"""The reads of ``MessageStore`` (RocketMQ's ``getMessage``, ``viewMessage``,
``queryMessage`` and the queue offset lookups): a mixin over the parts ``MessageStore``
opens (``commitlog``, ``consume_queues``, ``index``, ``config``) under its ``_lock``."""

from __future__ import annotations

import logging
import time

import numpy as np

from shmq.codec import record as rec
from shmq.codec.consume_queue import CQ_UNIT_SIZE, match_tags
from shmq.errors import InvalidMessageIdError
from shmq.message import MessageExt, parse_offset_msg_id
from shmq.store.consume_queue import ConsumeQueue, blank_units
from shmq.store.reader import topic_bytes
from shmq.store.results import GetResult, GetStatus, parse_tag_filter

log = logging.getLogger(__name__)


class StoreReads:
    """Messages by queue offset (with tag filtering and RocketMQ's transfer limits), by
    offset message id or by key, and queue offsets by store time."""

    def get(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int = 32,
        tag_filter: str | None = None,
    ) -> GetResult:
        """Read up to ``max_count`` dispatched messages from queue offset ``offset``.

        Like RocketMQ's ``getMessage``: offsets out of range give a status and a corrected
        ``next_begin_offset``, never an exception; ``tag_filter`` (``"A || B"``) compares tag
        hashes as the broker does; one call returns at most
        ``maxTransferCountOnMessageInMemory`` messages and
        ``maxTransferBytesOnMessageInMemory`` bytes (the first message always).
        """
        self._check_open()
        codes = parse_tag_filter(tag_filter)
        with self._lock:
            cq = self.consume_queues.get((topic, queue_id))
            if cq is None:
                return GetResult(GetStatus.NO_MATCHED_LOGIC_QUEUE, [], 0, 0, 0)
            lo, hi = cq.min_offset, cq.max_offset
            if hi == 0:
                return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, [], 0, lo, hi)
            if offset < lo:
                return GetResult(GetStatus.OFFSET_TOO_SMALL, [], lo, lo, hi)
            if offset == hi:
                return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, [], offset, lo, hi)
            if offset > hi:
                corrected = lo if lo == 0 else hi
                return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, [], corrected, lo, hi)
            return self._read_queue(cq, topic, offset, max_count, codes, lo, hi)

    def _read_queue(
        self,
        cq: ConsumeQueue,
        topic: str,
        offset: int,
        max_count: int,
        codes: np.ndarray | None,
        lo: int,
        hi: int,
    ) -> GetResult:
        cfg = self.config
        want = max(1, min(max_count, cfg.max_transfer_count_on_message_in_memory))
        # Look at more units than wanted when filtering, as RocketMQ scans up to 16000 units.
        scan = min(16_000, max(want, hi - offset)) if codes is not None else want
        buf, units = cq.units(offset, scan)
        if units.size == 0:
            return GetResult(GetStatus.OFFSET_FOUND_NULL, [], offset, lo, hi)
        units = units.copy()
        candidates = np.arange(units.size)
        if codes is not None:
            first = (
                offset - cq.queue.find_file(offset * CQ_UNIT_SIZE).file_from_offset // CQ_UNIT_SIZE
            )
            out = np.empty(units.size, dtype=np.int64)
            n = match_tags(buf, first, units.size, codes, out)
            candidates = out[:n]
        candidates = candidates[~blank_units(units[candidates])]  # no record behind these
        phys = units["offset"][candidates].astype(np.int64)
        sizes = units["size"][candidates].astype(np.int64)
        # RocketMQ's transfer limits: count and bytes, but the first message always goes
        take = min(want, phys.shape[0])
        within = int(
            np.searchsorted(np.cumsum(sizes), cfg.max_transfer_bytes_on_message_in_memory, "right")
        )
        take = max(min(take, within), min(1, take))
        examined = int(candidates[take]) if take < candidates.shape[0] else units.size
        messages: list[MessageExt] = []
        removed = False
        i = 0
        while i < take:
            mf = self.commitlog.queue.find_file(int(phys[i]))
            if mf is None or phys[i] < self.commitlog.min_offset:
                removed = True
                i += 1
                continue
            run_end = i + int(np.searchsorted(phys[i:take], mf.file_end_offset))
            batch = self.commitlog.read_rows(phys[i:run_end])
            got = batch.rows.shape[0]
            ok = np.empty(got, dtype=np.bool_)
            qoffs = offset + candidates[i : i + got].astype(np.int64)
            rec.units_match(batch.buf, batch.rows, sizes[i : i + got], qoffs, topic_bytes(topic),
                            cq.queue_id, ok)  # fmt: skip
            for r in range(got):
                if ok[r]:
                    messages.append(batch.message(r, topic))
                else:
                    log.error(
                        "consume queue %s-%d unit %d points at %d, which holds another record",
                        topic,
                        cq.queue_id,
                        offset + int(candidates[i + r]),
                        int(phys[i + r]),
                    )
            i += batch.rows.shape[0]
            if i < run_end:  # no valid record where the unit points (removed or damaged)
                removed = True
                i += 1
        if messages:
            status = GetStatus.FOUND
        elif removed:
            status = GetStatus.MESSAGE_WAS_REMOVING
        else:
            status = GetStatus.NO_MATCHED_MESSAGE
        return GetResult(status, messages, offset + examined, lo, hi)

    def view(self, msg_id: str) -> MessageExt | None:
        """The message with this offset message id (as ``queryMsgById``), or None."""
        _, phys = parse_offset_msg_id(msg_id)
        return self.view_by_offset(phys)

    def view_by_offset(self, physical_offset: int) -> MessageExt | None:
        """The message stored at ``physical_offset``, CRC-checked, or None."""
        self._check_open()
        if physical_offset < 0:
            raise InvalidMessageIdError(f"physical offset {physical_offset} is negative")
        with self._lock:
            batch = self.commitlog.read_one(physical_offset, check_crc=True)
            return batch.message(0) if batch is not None else None

    def query_by_key(
        self,
        topic: str,
        key: str,
        begin_ms: int = 0,
        end_ms: int | None = None,
        max_num: int = 32,
    ) -> list[MessageExt]:
        """Messages of ``topic`` whose KEYS or UNIQ_KEY include ``key``, stored within
        ``[begin_ms, end_ms]``, newest first, at most ``max_num`` (capped at
        ``maxMsgsNumBatch``)."""
        self._check_open()
        end_ms = int(time.time() * 1000) + 1000 if end_ms is None else end_ms
        with self._lock:
            found: list[MessageExt] = []
            for phys in self.index.query(topic, key, max_num, begin_ms, end_ms):
                batch = self.commitlog.read_one(phys)
                if batch is None:
                    continue
                msg = batch.message(0)
                if (
                    msg.topic == topic
                    and (key in msg.keys or msg.uniq_key == key)
                    and msg.queue_offset >= self.get_min_offset_in_queue(topic, msg.queue_id)
                ):  # not a message of a deleted topic's earlier life (``topic_purge``)
                    found.append(msg)
            return found

    # -- offsets ---------------------------------------------------------------------------

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queues.get((topic, queue_id))
        return cq.max_offset if cq is not None else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queues.get((topic, queue_id))
        return cq.min_offset if cq is not None else 0

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first queue offset whose message was stored at or after ``timestamp_ms``
        (the max offset when none was); used by ConsumeFromWhere TIMESTAMP and reset."""
        self._check_open()
        with self._lock:
            cq = self.consume_queues.get((topic, queue_id))
            if cq is None:
                return 0
            lo, hi = cq.min_offset, cq.max_offset
            min_phys = self.commitlog.min_offset
            while lo < hi:
                mid = (lo + hi) // 2
                unit = cq.unit(mid)
                if unit is None or unit[0] < min_phys:
                    lo = mid + 1
                    continue
                batch = self.commitlog.read_one(unit[0])
                stored = int(batch.rows[0, rec.R_STORE_TS]) if batch is not None else 0
                if stored < timestamp_ms:
                    lo = mid + 1
                else:
                    hi = mid
            return lo
