"""The CommitLog: every message of every topic, appended in RocketMQ's V1 record format.

Appends encode a whole batch with one numba call per file it touches; when a batch does not
fit in the rest of the current file, the records that fit are written, a BLANK record closes
the file, and the rest continue in the next file (a record never spans two files).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from shmq.codec import record as rec
from shmq.codec.record_pack import record_struct
from shmq.errors import InvalidMessageError
from shmq.message import MessageExt, stored_message
from shmq.store.mapped_file import MappedFile
from shmq.store.mapped_file_queue import MappedFileQueue

log = logging.getLogger(__name__)

SCAN_ROWS = 4096

_BODY_START = rec.HEADER_BODY_START
_MIN_BLANK = rec.MIN_BLANK


@dataclass
class ScanBatch:
    """Records decoded by one kernel call: ``rows`` (a ``RECORD_ROW`` table, positions local to
    ``file``), all within one mapped file."""

    file: MappedFile
    rows: np.ndarray

    @property
    def buf(self) -> np.ndarray:
        return self.file.read_view

    def physical_offsets(self) -> np.ndarray:
        return self.rows["pos"] + self.file.file_from_offset

    def topic(self, i: int) -> str:
        row = self.rows[i]
        start = int(row["topic_start"])
        raw = self.buf[start : start + int(row["topic_len"])].tobytes()
        return raw.decode("utf-8", "replace")  # a damaged name must not raise; it fails validation

    def message(self, i: int, topic: str | None = None) -> MessageExt:
        """Record ``i`` as a ``MessageExt`` (its bytes copied out of the mapping)."""
        return self.messages(np.array([i]), topic or self.topic(i))[0]

    def messages(self, picked: np.ndarray, topic: str) -> list[MessageExt]:
        r"""Records ``picked`` (indices into ``rows``) of ``topic`` as ``MessageExt``\ s."""
        rows = self.rows[picked]
        if not rows.shape[0]:
            return []
        pos, size = rows["pos"], rows["size"]
        return stored_messages(self.buf, _message_cols(rows), int(pos.min()),
                               int((pos + size).max()), int(size.sum()), topic)  # fmt: skip


def stored_messages(
    buf: np.ndarray, cols: list[list[int]], start: int, end: int, total: int, topic: str
) -> list[MessageExt]:
    """Messages of ``topic`` whose records lie in ``buf[start:end]`` (``total`` bytes of
    them), one per row of ``cols`` (``MESSAGE_COLS``: position, queue id, queue offset,
    physical offset, size), decoded when read: the span is copied once for all of them
    (one copy each when other queues' records fill most of it)."""
    mv = memoryview(buf)
    if end - start <= 2 * total + _SPAN_SLACK:
        raw = bytes(mv[start:end])
        return [stored_message(raw, p - start, topic, qid, qoff, phys, n)
                for p, qid, qoff, phys, n in cols]  # fmt: skip
    return [stored_message(bytes(mv[p : p + n]), 0, topic, qid, qoff, phys, n)
            for p, qid, qoff, phys, n in cols]  # fmt: skip


def _message_cols(rows: np.ndarray) -> list[list[int]]:
    """``rows`` as ``MESSAGE_COLS`` lists (what ``read_units`` writes), for
    ``stored_messages``."""
    fields = ("pos", "queue_id", "queue_offset", "phys_offset", "size")
    return np.column_stack([rows[name] for name in fields]).tolist()


_SPAN_SLACK = 64 * 1024


class CommitLog:
    def __init__(
        self,
        directory: str,
        file_size: int,
        *,
        store_host: int = 0,
        readonly: bool = False,
        preallocate: bool = False,
        warm: bool = False,
        mlock: bool = False,
    ) -> None:
        self.file_size = file_size
        self.store_host = store_host  # packed ip:port, written as born and store host
        self.queue = MappedFileQueue(
            directory, file_size, readonly=readonly, preallocate=preallocate, warm=warm, mlock=mlock
        )

    def load(self) -> None:
        self.queue.load()

    # -- offsets ---------------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        """The first offset still stored (RocketMQ: the first file's start)."""
        return self.queue.min_offset

    @property
    def max_offset(self) -> int:
        """The offset where the next record goes."""
        return self.queue.max_offset

    @property
    def flushed_offset(self) -> int:
        return self.queue.flushed_where

    # -- appending -------------------------------------------------------------------------

    def append(
        self,
        topic: np.ndarray,
        bodies: np.ndarray,
        body_offs: np.ndarray,
        props: np.ndarray,
        props_offs: np.ndarray,
        fields: np.ndarray,
        sizes: np.ndarray,
    ) -> np.ndarray:
        """Append records (``fields``: ``rec.ENCODE_ROW`` rows); returns their physical offsets."""
        n = fields.shape[0]
        limit = self.file_size - rec.MIN_BLANK
        if n and int(sizes.max()) > limit:
            raise InvalidMessageError(
                f"a record of {int(sizes.max())} bytes cannot fit in a CommitLog file of "
                f"{self.file_size} bytes (mappedFileSizeCommitLog); at most {limit}"
            )
        offsets = np.empty(n, dtype=np.int64)
        done = 0
        while done < n:
            mf = self.writable_file()
            start = mf.wrote_position
            room = mf.size - start
            count, used = rec.place_batch(sizes, done, room, mf.file_from_offset + start, offsets)
            if count == 0:
                rec.write_blank(mf.buf, start, room)
                mf.wrote_position = mf.size
                continue
            rec.encode_batch(
                mf.buf,
                start,
                mf.file_from_offset,
                topic,
                bodies,
                body_offs[done : done + count + 1],
                props,
                props_offs if props_offs.shape[0] == 2 else props_offs[done : done + count + 1],
                fields[done : done + count],
            )
            mf.wrote_position = start + used
            done += count
        return offsets

    def set_write_offset(self, offset: int, max_gap: int) -> None:
        """Resume writing at ``offset`` (the published write offset after a writer restart):
        bytes written beyond it by a dead writer are zeroed, later files removed."""
        self.queue.truncate(offset, max_gap)

    def append_one(
        self,
        body: bytes,
        tail: tuple[bytes, int],
        body_crc: int,
        queue_id: int,
        flag: int,
        queue_offset: int,
        born_timestamp: int,
        store_timestamp: int,
    ) -> int:
        """Append one record; ``tail`` is its encoded topic and properties with the magic
        to use. Returns its physical offset."""
        tail, magic = tail
        n = len(body)
        size = _BODY_START + n + len(tail)
        files = self.queue.files
        mf = files[-1] if files else None
        if mf is None or mf.wrote_position + size + _MIN_BLANK > mf.size:
            mf = self._file_with_room(size)
        p = mf.wrote_position
        phys = mf.file_from_offset + p
        host = self.store_host
        record_struct(n, len(tail)).pack_into(
            mf.mm, p, size, magic, body_crc, queue_id, flag, queue_offset, phys, 0,
            born_timestamp, host, store_timestamp, host, 0, 0, n, body, tail,
        )  # fmt: skip
        mf.wrote_position = p + size
        return phys

    def _file_with_room(self, size: int) -> MappedFile:
        """The file to append a ``size``-byte record to, closing the current one with a
        blank record when the record does not fit in its rest."""
        if size + rec.MIN_BLANK > self.file_size:
            raise InvalidMessageError(
                f"a record of {size} bytes cannot fit in a CommitLog file of "
                f"{self.file_size} bytes (mappedFileSizeCommitLog)"
            )
        mf = self.writable_file()
        if size + rec.MIN_BLANK > mf.size - mf.wrote_position:
            mf = self.close_file(mf)
        return mf

    def close_file(self, mf: MappedFile) -> MappedFile:
        """End ``mf`` with the blank record and return the next file. The next file is
        created first, so a full disk (``DiskFullError``) leaves ``mf`` as it was."""
        self.queue.prepare(mf.file_end_offset)
        rec.write_blank(mf.buf, mf.wrote_position, mf.size - mf.wrote_position)
        mf.wrote_position = mf.size
        return self.writable_file()

    def writable_file(self) -> MappedFile:
        """The file the next record goes to (created when there is none or it is full)."""
        mf = self.queue.last_file()
        if mf is None:
            return self.queue.new_file(0)
        if mf.is_full:
            return self.queue.new_file(mf.file_end_offset)
        return mf

    def flush(self, least_pages: int = 0) -> int:
        return self.queue.flush(least_pages)

    # -- reading ---------------------------------------------------------------------------

    def read_rows(self, positions: np.ndarray, check_crc: bool = False) -> ScanBatch | None:
        """Decode records at physical ``positions`` that lie in one file (first position's)."""
        mf = self.queue.find_file(int(positions[0]))
        if mf is None:
            return None
        rows = np.zeros(positions.shape[0], dtype=rec.RECORD_ROW)
        local = positions - mf.file_from_offset
        limit = mf.size if mf.is_full else mf.wrote_position
        n = rec.parse_at(mf.read_view, local, limit, mf.file_from_offset, check_crc, rows)
        return ScanBatch(mf, rows[:n])

    def read_one(self, offset: int, check_crc: bool = False) -> ScanBatch | None:
        """Decode the record at ``offset``; None if no valid record starts there."""
        if offset < self.min_offset or offset >= self.max_offset:
            return None
        batch = self.read_rows(np.array([offset], dtype=np.int64), check_crc)
        return batch if batch is not None and batch.rows.shape[0] == 1 else None

    def scan(
        self,
        start: int,
        end: int | None = None,
        *,
        check_crc: bool = False,
        max_rows: int = SCAN_ROWS,
        rows: np.ndarray | None = None,
    ) -> Iterator[ScanBatch]:
        """Valid records from ``start`` up to ``end`` (default: the write position).

        Stops at the first record that does not validate; ``last_scan`` then tells where and
        why, which is what recovery needs. A caller that scans often passes its own
        ``rows`` (a ``rec.RECORD_ROW`` table, kept between calls): records are decoded
        into it and each batch's rows are a view of it, valid until the next batch, so a
        scan allocates and copies nothing.
        """
        end = self.max_offset if end is None else end
        offset = start
        own = rows is None
        if own:  # not zeroed: only the rows a parse fills are read
            rows = np.empty(max_rows, dtype=rec.RECORD_ROW)
        self.last_scan = (offset, rec.PARSE_END)
        while offset < end:
            mf = self.queue.find_file(offset)
            if mf is None:
                break
            local = offset - mf.file_from_offset
            limit = min(mf.size, end - mf.file_from_offset)
            n, pos, code = rec.parse_records(
                mf.read_view, local, limit, mf.file_from_offset, check_crc, rows
            )
            if n:
                yield ScanBatch(mf, rows[:n].copy() if own else rows[:n])
            offset = mf.file_from_offset + pos
            self.last_scan = (offset, code)
            if code == rec.PARSE_BLANK:
                offset = mf.file_end_offset
                self.last_scan = (offset, code)
            elif code != rec.PARSE_FULL:
                break

    def close(self) -> None:
        self.queue.close()
