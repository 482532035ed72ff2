"""RocketMQ 4.9's ``getMessage`` rule, once: what one read of a consume queue returns,
with which status, and where the next read begins.

Every read by queue offset takes its answer from here: ``MessageStore.get``, the broker's
PULL_MESSAGE over TCP, consumers on the broker's host reading the mapped files, and
Spark's reads. They differ only in how they hand over the records chosen (messages, the
records as stored, a batch of bodies: ``StoreReader``), and in the transfer limits they
pass: a TCP pull is bounded as RocketMQ's (``maxTransfer*OnMessageIn{Memory,Disk}``), a
read on the broker's host by its own batch size only (nothing crosses a socket).

The rule (4.9's ``DefaultMessageStore.getMessage``):

- by offsets alone: a queue with nothing is NO_MESSAGE_IN_QUEUE (next 0); an offset
  below the queue's first is OFFSET_TOO_SMALL (next: the first); the queue's end is
  OFFSET_OVERFLOW_ONE (next: itself); past it OFFSET_OVERFLOW_BADLY (next: 0 when the
  queue's first offset is 0, else its end: 4.9.0-4.9.3's rule, kept because a queue that
  starts at 0 holds nothing the consumer has seen, e.g. after its store was replaced;
  4.9.4 and 5.x answer the end always, and such a consumer skips what the queue holds);
  no consume-queue file where the offset lies is OFFSET_FOUND_NULL (next: the next
  file's first offset);
- else the units from the offset are looked at (``codec.consume_queue.select_units``): at
  most 16,000 bytes of them (800 units) or ``max_nums`` units, within one file; FOUND
  when any message is taken, MESSAGE_WAS_REMOVING when the first it would take was
  removed by cleanup, NO_MATCHED_MESSAGE otherwise; the next read begins after the units
  looked at, taken or skipped by the tag filter.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from shmq.codec.consume_queue import (
    FETCH_DTYPE,
    NO_CODES,
    SCAN_FOUND,
    SCAN_NO_MATCHED,
    SCAN_WAS_REMOVING,
    UNLIMITED,
    select_own_records,
    select_units,
)
from shmq.config import MessageStoreConfig
from shmq.remoting.codes import ResponseCode
from shmq.store.results import GetStatus

if TYPE_CHECKING:
    from shmq.store.mapped_file import MappedFile


_SCANNED = {
    SCAN_FOUND: GetStatus.FOUND,
    SCAN_NO_MATCHED: GetStatus.NO_MATCHED_MESSAGE,
    SCAN_WAS_REMOVING: GetStatus.MESSAGE_WAS_REMOVING,
}


@dataclass(frozen=True)
class TransferLimits:
    """How much one read may hand over (4.9's ``isTheBatchFull``): messages and bytes for
    records near the CommitLog's end ("in memory") and for records further behind it than
    ``memory`` bytes ("in disk"). The first message always goes."""

    count_in_memory: int = 32  # maxTransferCountOnMessageInMemory
    bytes_in_memory: int = 256 * 1024  # maxTransferBytesOnMessageInMemory
    count_in_disk: int = 8  # maxTransferCountOnMessageInDisk
    bytes_in_disk: int = 64 * 1024  # maxTransferBytesOnMessageInDisk
    memory: int = UNLIMITED  # accessMessageInMemoryMaxRatio % of the host's RAM


# A read on the broker's host: only its own batch size bounds it.
LOCAL = TransferLimits(UNLIMITED, UNLIMITED, UNLIMITED, UNLIMITED, UNLIMITED)


def transfer_limits(config: MessageStoreConfig) -> TransferLimits:
    """A broker's limits for reads that cross a socket (PULL_MESSAGE) or stand for one
    (``MessageStore.get``), from its config and this host's RAM."""
    ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return TransferLimits(
        config.max_transfer_count_on_message_in_memory,
        config.max_transfer_bytes_on_message_in_memory,
        config.max_transfer_count_on_message_in_disk,
        config.max_transfer_bytes_on_message_in_disk,
        ram * config.access_message_in_memory_max_ratio // 100,
    )


class QueueBounds(NamedTuple):
    """What a read needs to know beyond the units: the queue's first and end offsets, and
    the CommitLog's first offset (units below it point at removed records), end and file
    size. (Tuples: a consumer's read makes one each time.)"""

    min_offset: int
    max_offset: int
    min_phys: int
    write_offset: int
    file_size: int


class Fetch(NamedTuple):
    """One read's answer without the records (4.9's ``GetMessageResult``): the status, where
    the next read begins, the queue's offsets, and the units taken, in queue order (their
    CommitLog offsets, sizes and queue offsets); ``suggest_slave`` when the read is further
    behind the CommitLog's end than the transfer limits' ``memory``."""

    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    phys: np.ndarray
    sizes: np.ndarray
    queue_offsets: np.ndarray
    suggest_slave: bool = False

    @property
    def count(self) -> int:
        return int(self.phys.shape[0])


_NONE = np.empty(0, dtype=np.int64)

# The consume-queue file holding a queue offset: ``(its units as uint8, the offset's unit
# index in it)``, or None when there is no such file.
UnitsFile = Callable[[int], "tuple[np.ndarray, int] | None"]


def by_offsets(offset: int, bounds: QueueBounds) -> Fetch | None:
    """The statuses the offsets alone decide, or None when units must be read."""
    lo, hi = bounds.min_offset, bounds.max_offset
    if hi == 0:
        status, next_offset = GetStatus.NO_MESSAGE_IN_QUEUE, 0
    elif offset < lo:
        status, next_offset = GetStatus.OFFSET_TOO_SMALL, lo
    elif offset == hi:
        status, next_offset = GetStatus.OFFSET_OVERFLOW_ONE, offset
    elif offset > hi:
        status, next_offset = GetStatus.OFFSET_OVERFLOW_BADLY, 0 if lo == 0 else hi
    else:
        return None
    return Fetch(status, next_offset, lo, hi, _NONE, _NONE, _NONE)


def get_message(
    units_file: UnitsFile,
    units_per_file: int,
    offset: int,
    max_nums: int,
    codes: np.ndarray | None,
    bounds: QueueBounds,
    limits: TransferLimits,
) -> Fetch:
    """4.9's ``getMessage`` for the queue whose files ``units_file`` finds (see the module
    docstring); ``codes``: the subscription's sorted tag hashes (None: every message)."""
    read = _units_read(units_file, units_per_file, offset, max_nums, bounds)
    if isinstance(read, Fetch):
        return read
    return _select(read, offset, max_nums, codes, bounds, limits)


def _select(
    read: tuple[np.ndarray, int, int, np.ndarray],
    offset: int,
    max_nums: int,
    codes: np.ndarray | None,
    bounds: QueueBounds,
    limits: TransferLimits,
) -> Fetch:
    """``select_units`` over what ``_units_read`` found, as a ``Fetch``."""
    units, start, count, picks = read
    chosen = select_units(units, start, count, NO_CODES if codes is None else codes,
                          _request(offset, max_nums, bounds, limits), picks)  # fmt: skip
    return _chosen(offset, bounds, limits, picks, *chosen)


class OwnedRecords(NamedTuple):
    """The records of a read's units that own them (``own_records``): ``cols`` rows of
    ``MESSAGE_COLS`` for ``count`` records lying in ``[start, end)`` of ``file``, a
    CommitLog file, ``total`` bytes."""

    file: MappedFile
    cols: np.ndarray
    count: int
    start: int
    end: int
    total: int


def get_owned_messages(
    units_file: UnitsFile,
    units_per_file: int,
    offset: int,
    max_nums: int,
    codes: np.ndarray | None,
    bounds: QueueBounds,
    newest: Callable[[], MappedFile | None],
    topic: np.ndarray,
    queue_id: int,
) -> tuple[Fetch, OwnedRecords | None]:
    """``get_message`` with ``LOCAL`` limits, and the records its units own when they all
    lie in the CommitLog file ``newest()`` maps (asked only when units are read): one
    kernel call for a consumer that keeps up (``select_own_records``). The records are
    None when a unit points elsewhere, or there is no such file: read them file by file."""
    read = _units_read(units_file, units_per_file, offset, max_nums, bounds)
    if isinstance(read, Fetch):
        return read, None
    mf = newest()
    if mf is None:
        return _select(read, offset, max_nums, codes, bounds, LOCAL), None
    units, start, count, picks = read
    cols = np.empty((picks.shape[1], 5), dtype=np.int64)
    status, scanned, n, last_phys, k, lo, hi, total = select_own_records(
        units, start, count, NO_CODES if codes is None else codes, offset, max(1, max_nums),
        bounds.write_offset, bounds.min_phys, bounds.file_size, picks, mf.read_view,
        mf.file_from_offset, topic, queue_id, cols,
    )  # fmt: skip
    fetch = _chosen(offset, bounds, LOCAL, picks, status, scanned, n, last_phys)
    return fetch, (OwnedRecords(mf, cols, k, lo, hi, total) if k >= 0 else None)


def _units_read(
    units_file: UnitsFile, units_per_file: int, offset: int, max_nums: int, bounds: QueueBounds
) -> Fetch | tuple[np.ndarray, int, int, np.ndarray]:
    """What the offsets or a missing file decide (a ``Fetch``), else the units
    ``select_units`` looks at: ``(a file's units, index of the first, how many, the picks
    array the selection fills)``."""
    decided = by_offsets(offset, bounds)
    if decided is not None:
        return decided
    found = units_file(offset)
    if found is None:
        next_file = offset - offset % units_per_file + units_per_file
        return Fetch(GetStatus.OFFSET_FOUND_NULL, next_file, bounds.min_offset,
                     bounds.max_offset, _NONE, _NONE, _NONE)  # fmt: skip
    units, start = found
    count = min(units_per_file - start, bounds.max_offset - offset)
    return units, start, count, np.empty((3, max(1, min(count, max_nums))), dtype=np.int64)


def _request(offset: int, max_nums: int, bounds: QueueBounds, limits: TransferLimits) -> np.ndarray:
    """The ``FETCH_DTYPE`` record of one read."""
    request = np.empty(1, dtype=FETCH_DTYPE)
    request[0] = (
        offset, max(1, max_nums), limits.count_in_memory, limits.bytes_in_memory,
        limits.count_in_disk, limits.bytes_in_disk, limits.memory, bounds.write_offset,
        bounds.min_phys, bounds.file_size,
    )  # fmt: skip
    return request


def _chosen(
    offset: int,
    bounds: QueueBounds,
    limits: TransferLimits,
    picks: np.ndarray,
    status: int,
    scanned: int,
    n: int,
    last_phys: int,
) -> Fetch:
    """The ``Fetch`` of what ``select_units`` chose into ``picks``."""
    return Fetch(
        _SCANNED[status],
        offset + scanned,
        bounds.min_offset,
        bounds.max_offset,
        picks[0, :n],
        picks[1, :n],
        picks[2, :n],
        bounds.write_offset - last_phys > limits.memory,
    )


# What 4.9's PullMessageProcessor answers a pull with, by the store's status (on a master)
_PULL_CODES = {
    GetStatus.FOUND: ResponseCode.SUCCESS,
    GetStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}


def pull_response_code(status: GetStatus, offset: int) -> ResponseCode:
    """4.9's PullMessageProcessor's answer to a pull from ``offset`` the store answered
    with ``status``: a queue with nothing (or none) moves a consumer's offset unless it
    asked from 0. The broker sends it; a consumer on the broker's host, which reads the
    store itself, takes the same answer from here."""
    code = _PULL_CODES.get(status)
    if code is None:  # NO_MESSAGE_IN_QUEUE, NO_MATCHED_LOGIC_QUEUE
        return ResponseCode.PULL_OFFSET_MOVED if offset != 0 else ResponseCode.PULL_NOT_FOUND
    return code
