"""``MessageStore``: the storage engine in one object (RocketMQ's ``DefaultMessageStore``).

Files only, no processes: the broker's agents later drive the same parts (CommitLog, consume
queues, index, checkpoint) from separate processes. Here one object appends, dispatches
(reput), reads, queries, flushes, recovers and cleans, so the engine can be used and tested
on a plain directory.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from shmq import files
from shmq.codec import record as rec
from shmq.codec.consume_queue import CQ_UNIT_SIZE
from shmq.codec.crc32 import body_crc_batch
from shmq.codec.record_pack import tail as record_tail
from shmq.config import MessageStoreConfig, parse_host
from shmq.errors import (
    DiskFullError,
    InvalidMessageError,
    InvalidMessageIdError,
    InvalidTopicError,
    MessageTooLargeError,
    StoreClosedError,
    StoreError,
)
from shmq.message import (
    MessageExt,
    body_arrays,
    pack_host,
    parse_offset_msg_id,
    validate_body,
    validate_topic,
)
from shmq.names import DELETED_TOPIC_LOG
from shmq.properties import build_properties
from shmq.store import cleanup
from shmq.store.checkpoint import Checkpoint
from shmq.store.commitlog import SCAN_ROWS, CommitLog
from shmq.store.consume_queue import next_life_offset
from shmq.store.dispatch.dispatcher import MAX_QUEUE_ID, Dispatcher
from shmq.store.dispatch.topic_purge import append_deletion
from shmq.store.fetch import QueueBounds, transfer_limits
from shmq.store.index.service import IndexService
from shmq.store.lock import AbortMarker, StoreLock
from shmq.store.reader import StoreReader
from shmq.store.recovery import RecoveryReport, recover_commitlog
from shmq.store.results import (
    BatchPutResult,
    GetResult,
    GetStatus,
    PutResult,
    PutStatus,
    parse_tag_filter,
)

log = logging.getLogger(__name__)

_new_tuple = tuple.__new__


class MessageStore:
    """RocketMQ's storage engine over one directory.

    Example::

        with MessageStore.open("/tmp/store", mapped_file_size_commit_log=1 << 24) as store:
            r = store.put("Orders", 0, b"hello", tags="TagA", keys=["order-1"])
            store.dispatch()
            got = store.get("Orders", 0, r.queue_offset, 1)
            assert got.messages[0].body == b"hello"
    """

    def __init__(self, config: MessageStoreConfig) -> None:
        self.config = config
        root = config.store_path_root_dir
        self.root = root
        self._lock = threading.Lock()
        self._closed = False
        self._rows = np.empty(SCAN_ROWS, dtype=rec.RECORD_ROW)  # kept for each dispatch
        files.set_file_mode(config.file_mode, config.local_client_gid)
        files.makedirs(root)
        self._store_lock = StoreLock(root)
        self._store_lock.acquire()
        try:
            self._open(root)
        except BaseException:
            self._close_files()
            self._store_lock.release()
            raise

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        config: MessageStoreConfig | None = None,
        **overrides: Any,
    ) -> MessageStore:
        """Open (creating or recovering) the store at ``path``.

        ``overrides`` are RocketMQ store config names in snake_case, e.g.
        ``mapped_file_size_commit_log=1 << 20`` or ``flush_disk_type="SYNC_FLUSH"``.
        """
        config = (config or MessageStoreConfig()).replace(
            store_path_root_dir=os.fspath(path), **overrides
        )
        return cls(config)

    # -- opening and recovery --------------------------------------------------------------

    def _open(self, root: str) -> None:
        cfg = self.config
        self._abort = AbortMarker(root)
        abnormal = self._abort.exists()
        host, port = parse_host(cfg.store_host)
        self._store_host = pack_host(host, port)
        self._store_host_bytes = self._store_host.to_bytes(8, "big", signed=True)
        self.commitlog = CommitLog(
            os.path.join(root, "commitlog"),
            cfg.mapped_file_size_commit_log,
            store_host=self._store_host,
            preallocate=cfg.preallocate_mapped_file_enable,
            warm=cfg.warm_mapped_file_enable,
            mlock=cfg.mlock_mapped_file_enable,
        )
        self.commitlog.load()
        self.checkpoint = Checkpoint(os.path.join(root, "checkpoint"))
        self.index = IndexService(
            os.path.join(root, "index"),
            cfg.max_hash_slot_num,
            cfg.max_index_num,
            cfg.max_msgs_num_batch,
            on_file_full=self._index_file_full,
            disk_reserve=cfg.mapped_file_size_commit_log,
        )
        self.index.load(not abnormal, self.checkpoint.index_msg_timestamp)
        self.dispatcher = Dispatcher(
            os.path.join(root, "consumequeue"),
            cfg.consume_queue_file_size,
            self.index if cfg.message_index_enable else None,
            cfg.delay_levels_ms,
        )
        self.dispatcher.load()
        self.consume_queues = self.dispatcher.consume_queues
        # reads go through the one reader every process has, on this store's files
        self.reader = StoreReader(
            root, cfg.mapped_file_size_commit_log, cfg.consume_queue_file_size
        )
        self._limits = transfer_limits(cfg)
        self.recovery = self._recover(abnormal)
        self._abort.create()
        self._put_count = 0
        self._last_store_timestamp = 0
        self._tails: dict[tuple[str, str | None], tuple[bytes, int]] = {}
        self._sync = cfg.sync_flush
        self._max_body = cfg.max_message_size
        self._caught_up = self._dispatch_what_fits()
        self._disk_full = not self._caught_up
        self._disk_checked_ms = 0

    def _recover(self, abnormal: bool) -> RecoveryReport:
        for cq in self.consume_queues.values():
            cq.recover()
        max_cq_phys = max((cq.max_physic_offset for cq in self.consume_queues.values()), default=-1)
        report = recover_commitlog(
            self.commitlog,
            self.checkpoint,
            abnormal=abnormal,
            check_crc=self.config.check_crc_on_recover,
            max_record_size=self.config.max_message_size + 64 * 1024,
            message_index=self.config.message_index_enable,
        )
        if max_cq_phys > report.valid_end:
            for cq in self.consume_queues.values():
                cq.truncate_dirty(report.valid_end)
        min_phys = self.commitlog.min_offset
        for cq in self.consume_queues.values():
            cq.correct_min_offset(min_phys)
        self._queue_offsets = {key: cq.max_offset for key, cq in self.consume_queues.items()}
        dispatched = max(
            (cq.max_physic_offset for cq in self.consume_queues.values()), default=min_phys
        )
        self.reput_from_offset = max(dispatched, min_phys)
        if report.redispatch_from is not None:
            self.reput_from_offset = max(report.redispatch_from, min_phys)
        self.reput_from_offset = min(self.reput_from_offset, self.commitlog.max_offset)
        log.info(
            "store %s recovered (%s exit): commitlog [%d, %d), reput from %d",
            self.root,
            "abnormal" if abnormal else "normal",
            self.commitlog.min_offset,
            self.commitlog.max_offset,
            self.reput_from_offset,
        )
        return report

    def truncate_to(self, offset: int) -> int:
        """Cut the CommitLog back to ``offset`` (a record boundary) and the consume queues
        with it; the bytes removed. A broker that was master of an epoch a successor ended
        drops what it wrote past the successor's start (controller mode): no slave took it,
        so no SYNC_MASTER send was acknowledged with it. Index entries past ``offset`` stay,
        as after a recovery that cuts a torn tail."""
        with self._lock:
            self._check_open()
            end = self.commitlog.max_offset
            if offset >= end:
                return 0
            start = self.commitlog.min_offset
            if offset < start:
                raise ValueError(f"cannot truncate to {offset}: the CommitLog starts at {start}")
            self.commitlog.queue.truncate(offset, self.config.max_message_size + 64 * 1024)
            for cq in self.consume_queues.values():
                cq.truncate_dirty(offset)
            self._queue_offsets = {key: cq.max_offset for key, cq in self.consume_queues.items()}
            self.reput_from_offset = min(self.reput_from_offset, offset)
            log.warning("store %s cut to %d: %d bytes removed", self.root, offset, end - offset)
            return end - offset

    def delete_topic(self, topic: str) -> int:
        """Delete ``topic``'s stored messages (``topic_purge``): append the record that
        deletes it and move its next queue offsets to where its next life starts; its
        consume queues are purged when the record is dispatched. Returns the record's
        physical offset."""
        _user_topic(topic)
        with self._lock:
            self._check_open()
            key = (DELETED_TOPIC_LOG, 0)
            log_offset = self._queue_offsets.get(key, 0)
            phys = append_deletion(self.commitlog, topic, log_offset, time.time_ns() // 1_000_000)
            self._queue_offsets[key] = log_offset + 1
            units = self.config.consume_queue_file_size // CQ_UNIT_SIZE
            for k, offset in self._queue_offsets.items():
                if k[0] == topic:
                    self._queue_offsets[k] = next_life_offset(offset, units)
            if self._sync and self._sync_flush() != PutStatus.PUT_OK:
                raise StoreError(f"the record deleting {topic} was not flushed")
            return phys

    def _index_file_full(self, end_timestamp: int) -> None:
        self.checkpoint.index_msg_timestamp = end_timestamp
        self.checkpoint.flush()

    # -- appending -------------------------------------------------------------------------

    def put(
        self,
        topic: str,
        queue_id: int,
        body: bytes,
        *,
        tags: str | None = None,
        keys: str | Sequence[str] = (),
        properties: Mapping[str, str] | None = None,
        flag: int = 0,
        born_timestamp: int | None = None,
    ) -> PutResult:
        """Append one message; returns where it went. Invalid input raises
        ``InvalidMessageError`` (its ``status`` names RocketMQ's answer); nothing is stored."""
        if self._closed:
            raise StoreClosedError(f"store {self.root} is closed")
        if type(body) is not bytes or not 0 < len(body) <= self._max_body:
            validate_body(body, self._max_body)
        if type(queue_id) is not int or not 0 <= queue_id <= MAX_QUEUE_ID:
            _check_queue_id(queue_id)
        if flag or born_timestamp is not None:
            _check_header_values(flag, born_timestamp)
        if keys or properties:
            tail = record_tail(_user_topic(topic), build_properties(tags, keys, properties))
        else:
            tail = self._tails.get((topic, tags))
            if tail is None:
                tail = record_tail(_user_topic(topic), build_properties(tags))
                self._tails[(topic, tags)] = tail
        now = time.time_ns() // 1_000_000
        with self._lock:
            if (
                self._disk_full_now(now)
                if now - self._disk_checked_ms >= 10_000
                else self._disk_full
            ):
                return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, -1, -1, now, b"")
            key = (topic, queue_id)
            queue_offset = self._queue_offsets.get(key, 0)
            phys = self.commitlog.append_one(
                body,
                tail,
                zlib.crc32(body) & 0x7FFFFFFF,
                queue_id,
                flag,
                queue_offset,
                now if born_timestamp is None else born_timestamp,
                now,
            )
            self._queue_offsets[key] = queue_offset + 1
            self._put_count += 1
            self._last_store_timestamp = now
            status = self._sync_flush() if self._sync else PutStatus.PUT_OK
        # tuple.__new__ skips NamedTuple's argument parsing: this is the hot path.
        return _new_tuple(PutResult, (status, phys, queue_offset, now, self._store_host_bytes))

    def put_batch(
        self,
        topic: str,
        queue_id: int,
        bodies: Sequence[bytes] | tuple[np.ndarray, np.ndarray],
        *,
        tags: str | None = None,
        keys: Sequence[str | Sequence[str] | None] | None = None,
        properties: Mapping[str, str] | None = None,
        body_crcs: np.ndarray | None = None,
        flag: int = 0,
        born_timestamp: int | None = None,
    ) -> BatchPutResult:
        """Append many messages of one topic and queue with one encode per file touched.

        ``bodies`` is a list of bytes, or ``(data, offsets)``: a uint8 array holding the
        bodies back to back and int64 boundaries (``n + 1`` entries). ``keys`` has one entry
        per message (a key, a list of keys, or None). ``body_crcs`` are the producer's
        ``crc32(body) & 0x7FFFFFFF`` values; without them the store computes them.
        """
        self._check_open()
        _check_queue_id(queue_id)
        _check_header_values(flag, born_timestamp)
        topic_raw = np.frombuffer(_user_topic(topic), dtype=np.uint8)
        data, offsets = body_arrays(bodies)
        n = offsets.shape[0] - 1
        if n == 0:
            raise InvalidMessageError("put_batch needs at least one message")
        if keys is not None:
            if len(keys) != n:
                raise InvalidMessageError(f"keys has {len(keys)} entries for {n} messages")
            base = build_properties(tags, (), properties)
            encoded = [build_properties(tags, k, properties) if k else base for k in keys]
            props = np.frombuffer(b"".join(encoded), dtype=np.uint8)
            props_offs = np.zeros(n + 1, dtype=np.int64)
            np.cumsum([len(e) for e in encoded], out=props_offs[1:])
        else:
            one = build_properties(tags, (), properties)
            props = np.frombuffer(one, dtype=np.uint8)
            props_offs = np.array([0, len(one)], dtype=np.int64)
        sizes = np.empty(n, dtype=np.int64)
        max_body = self.config.max_message_size
        bad = rec.batch_sizes(offsets, topic_raw.shape[0], props_offs, max_body, sizes)
        if bad >= 0:
            raise MessageTooLargeError(
                f"message {bad} of the batch has a {int(offsets[bad + 1] - offsets[bad])}-byte "
                f"body; bodies must be 1..{max_body} bytes (maxMessageSize)"
            )
        now = int(time.time() * 1000)
        # field by field: numpy copies a structured template into each row ~4x slower
        fields = np.zeros(n, dtype=rec.ENCODE_ROW)
        fields["queue_id"] = queue_id
        fields["flag"] = flag
        fields["born_ts"] = now if born_timestamp is None else born_timestamp
        fields["born_host"] = fields["store_host"] = self._store_host
        fields["store_ts"] = now
        if body_crcs is not None:
            if body_crcs.shape != (n,):
                raise InvalidMessageError(f"body_crcs has shape {body_crcs.shape}, not ({n},)")
            fields["body_crc"] = body_crcs
        else:
            body_crc_batch(data, offsets, fields["body_crc"])
        with self._lock:
            if self._disk_full_now(now):
                empty = np.empty(0, dtype=np.int64)
                return BatchPutResult(PutStatus.SERVICE_NOT_AVAILABLE, empty, empty, now, b"")
            key = (topic, queue_id)
            first = self._queue_offsets.get(key, 0)
            queue_offsets = np.arange(first, first + n, dtype=np.int64)
            fields["queue_offset"] = queue_offsets
            phys = self.commitlog.append(topic_raw, data, offsets, props, props_offs, fields, sizes)
            self._queue_offsets[key] = first + n
            self._put_count += n
            self._last_store_timestamp = now
            status = self._sync_flush() if self._sync else PutStatus.PUT_OK
        return BatchPutResult(status, queue_offsets, phys, now, self._store_host_bytes)

    def _sync_flush(self) -> PutStatus:
        """SYNC_FLUSH: msync now; a flush slower than ``syncFlushTimeout`` answers
        FLUSH_DISK_TIMEOUT (the data is still written), a failed one raises ``FlushError``."""
        started = time.monotonic()
        self._flush_commitlog(0)
        if (time.monotonic() - started) * 1000 > self.config.sync_flush_timeout:
            return PutStatus.FLUSH_DISK_TIMEOUT
        return PutStatus.PUT_OK

    def _disk_full_now(self, now_ms: int) -> bool:
        """Refuse writes above ``diskSpaceWarningLevelRatio``, and while the records found
        at open are not all dispatched (a full disk stopped it: their queues' next offsets
        are not known until they are); measured at most every 10 s."""
        if now_ms - self._disk_checked_ms >= 10_000:
            self._disk_checked_ms = now_ms
            if not self._caught_up:
                self._caught_up = self._dispatch_what_fits()
            ratio = cleanup.disk_used_ratio(self.root)
            was_full = self._disk_full
            self._disk_full = (
                ratio > self.config.disk_space_warning_level_ratio / 100 or not self._caught_up
            )
            if self._disk_full and not was_full:
                log.error("disk of %s is %.0f%% used: writes are refused", self.root, ratio * 100)
        return self._disk_full

    # -- dispatch (reput) ------------------------------------------------------------------

    @property
    def dispatch_limit(self) -> int:
        """Reput never passes this: the write offset, or in SYNC_FLUSH the flushed offset."""
        if self.config.sync_flush:
            return min(self.commitlog.flushed_offset, self.commitlog.max_offset)
        return self.commitlog.max_offset

    def dispatch(self) -> int:
        """Build consume queues and the index from the CommitLog up to ``dispatch_limit``;
        returns the number of records dispatched. Safe to call any number of times."""
        self._check_open()
        with self._lock:
            return self._dispatch()

    def _dispatch(self) -> int:
        start = self.reput_from_offset
        total, touched, last_ts, position, _ = self.dispatcher.dispatch_range(
            self.commitlog, start, self.dispatch_limit, self._rows
        )
        for key, cq in touched.items():
            self._queue_offsets[key] = max(self._queue_offsets.get(key, 0), cq.max_offset)
        if last_ts:
            self.checkpoint.logics_msg_timestamp = last_ts
        self.reput_from_offset = max(start, position)
        return total

    def _dispatch_what_fits(self) -> bool:
        """``_dispatch`` as open, hand-over and close do it, which a full disk must not
        fail: a consume-queue file without room stops it there (nothing is lost, dispatch
        is idempotent), and what is left waits for a later dispatch, this store's or the
        broker's reput agent's (from ``reput_from_offset``). Returns whether it finished."""
        try:
            self._dispatch()
        except DiskFullError as exc:
            log.error("dispatch stopped at CommitLog offset %d until there is room: %s",
                      self.reput_from_offset, str(exc))  # fmt: skip
            return False
        return True

    @property
    def min_physical_offset(self) -> int:
        return self.commitlog.min_offset

    @property
    def max_physical_offset(self) -> int:
        return self.commitlog.max_offset

    @property
    def flushed_offset(self) -> int:
        return self.commitlog.flushed_offset

    # -- flushing, cleaning, closing -------------------------------------------------------

    def _flush_commitlog(self, least_pages: int) -> None:
        before = self.commitlog.flushed_offset
        if self.commitlog.flush(least_pages) > before:
            self.checkpoint.physic_msg_timestamp = self._last_store_timestamp

    def flush(self) -> None:
        """Flush CommitLog, consume queues and index to disk, then the checkpoint."""
        self._check_open()
        with self._lock:
            self._flush()

    def _flush(self) -> None:
        self._flush_commitlog(0)
        for cq in self.consume_queues.values():
            cq.flush(0)
        self.index.flush()
        self.checkpoint.flush()

    def clean_expired(self, now: float | None = None, *, disk_used: float | None = None) -> dict:
        """Delete expired files as RocketMQ's clean services do (see ``store.cleanup``).

        ``now`` (epoch seconds) and ``disk_used`` (a 0..1 ratio) default to the real clock
        and the real filesystem; they are parameters so the policy can be tested.
        """
        self._check_open()
        with self._lock:
            return cleanup.clean_expired(self, time.time() if now is None else now, disk_used)

    def stats(self) -> dict[str, Any]:
        self._check_open()
        with self._lock:
            return {
                "root": self.root,
                "flush_disk_type": self.config.flush_disk_type,
                "commitlog_min_offset": self.commitlog.min_offset,
                "commitlog_max_offset": self.commitlog.max_offset,
                "commitlog_flushed_offset": self.commitlog.flushed_offset,
                "commitlog_files": len(self.commitlog.queue.files),
                "reput_from_offset": self.reput_from_offset,
                "dispatch_behind_bytes": self.dispatch_limit - self.reput_from_offset,
                "consume_queues": len(self.consume_queues),
                "messages_put": self._put_count,
                "index": self.index.stats(),
                "last_recovery": {
                    "abnormal": self.recovery.abnormal,
                    "valid_end": self.recovery.valid_end,
                    "cut_bytes": self.recovery.cut_bytes,
                    "stop_reason": self.recovery.stop_reason,
                },
            }

    def close(self) -> None:
        """Dispatch what is left, flush everything, remove ``abort`` and release the lock."""
        if self._closed:
            return
        with self._lock:
            try:
                self._dispatch_what_fits()
                self._flush()
                self._abort.remove()
            finally:
                self._closed = True
                self._close_files()
                self._store_lock.release()

    def hand_over(self) -> tuple[StoreLock, AbortMarker]:
        """Flush and unmap everything but keep the store locked and marked running: the
        broker's agents take the files over in their own processes, reput from
        ``reput_from_offset`` (short of the end when a full disk stopped dispatch). The
        caller releases the lock and removes ``abort`` after a clean stop."""
        with self._lock:
            try:
                self._dispatch_what_fits()
                self._flush()
            finally:
                self._closed = True
                self._close_files()
        return self._store_lock, self._abort

    def _close_files(self) -> None:
        """Unmap whatever is open (also after a failed open, where only some parts exist)."""
        parts = [getattr(self, "commitlog", None), getattr(self, "index", None)]
        parts.append(getattr(self, "reader", None))
        parts += list(getattr(self, "consume_queues", {}).values())
        parts.append(getattr(self, "checkpoint", None))
        for part in parts:
            if part is not None:
                part.close()

    # -- reads: RocketMQ's getMessage, viewMessage, queryMessage and the offset lookups ---

    def get(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int = 32,
        tag_filter: str | None = None,
    ) -> GetResult:
        """Read up to ``max_count`` dispatched messages from queue offset ``offset`` by
        RocketMQ 4.9's rule (``store.fetch``): offsets out of range give a status and a
        corrected ``next_begin_offset``, never an exception; ``tag_filter`` (``"A || B"``)
        compares tag hashes as the broker does; one call returns at most the config's
        ``maxTransfer*`` messages and bytes (the first message always)."""
        self._check_open()
        codes = parse_tag_filter(tag_filter)
        with self._lock:
            cq = self.consume_queues.get((topic, queue_id))
            if cq is None:
                return GetResult(GetStatus.NO_MATCHED_LOGIC_QUEUE, [], 0, 0, 0)
            cl = self.commitlog
            bounds = QueueBounds(cq.min_offset, cq.max_offset, cl.min_offset, cl.max_offset,
                                 self.config.mapped_file_size_commit_log)  # fmt: skip
            fetch = self.reader.fetch(topic, queue_id, offset, max_count, codes, bounds,
                                      self._limits)  # fmt: skip
            status, messages = fetch.status, []
            if status is GetStatus.FOUND:
                messages = self.reader.messages(topic, queue_id, fetch)
                if not messages:  # units that own no record (damaged): nothing to hand out
                    status = GetStatus.NO_MATCHED_MESSAGE
            return GetResult(status, messages, fetch.next_begin_offset, fetch.min_offset,
                             fetch.max_offset)  # fmt: skip

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
            return self._view(physical_offset)

    def _view(self, physical_offset: int) -> MessageExt | None:
        """The message at ``physical_offset`` if it lies in the CommitLog as it is now (a
        truncated tail's records are still in its file, but no longer stored)."""
        cl = self.commitlog
        if not cl.min_offset <= physical_offset < cl.max_offset:
            return None
        return self.reader.view(physical_offset)

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
                msg = self._view(phys)
                if (
                    msg is not None
                    and msg.topic == topic
                    and (key in msg.keys or msg.uniq_key == key)
                    and msg.queue_offset >= self.get_min_offset_in_queue(topic, msg.queue_id)
                ):  # not a message of a deleted topic's earlier life (``topic_purge``)
                    found.append(msg)
            return found

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
            return self.reader.offset_by_time(topic, queue_id, timestamp_ms, cq.min_offset,
                                              cq.max_offset)  # fmt: skip

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"store {self.root} is closed")

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _user_topic(topic: str) -> bytes:
    """The topic's bytes, if a message may be put there (only ``delete_topic`` writes the
    deletion log)."""
    raw = validate_topic(topic)
    if topic == DELETED_TOPIC_LOG:
        raise InvalidTopicError(f"topic {topic} is reserved: only delete_topic writes it")
    return raw


def _check_queue_id(queue_id: int) -> None:
    if not isinstance(queue_id, int) or not 0 <= queue_id <= MAX_QUEUE_ID:
        raise InvalidMessageError(f"queue id {queue_id!r} is not an int in 0..{MAX_QUEUE_ID}")


def _check_header_values(flag: int, born_timestamp: int | None) -> None:
    if type(flag) is not int or not -(2**31) <= flag < 2**31:
        raise InvalidMessageError(f"flag {flag!r} is not a 32-bit int")
    if born_timestamp is not None and (
        type(born_timestamp) is not int or not 0 <= born_timestamp < 2**63
    ):
        raise InvalidMessageError(f"born timestamp {born_timestamp!r} is not epoch milliseconds")
