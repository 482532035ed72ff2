"""One RocketMQ IndexFile: a hash index from message keys to CommitLog offsets.

Layout (big-endian)::

    header 40 B: beginTimestamp 8 | endTimestamp 8 | beginPhyOffset 8 | endPhyOffset 8
                 | hashSlotCount 4 | indexCount 4 (starts at 1: entry 0 is never used)
    hashSlotNum slots of 4 B: number of the newest entry in that slot (0 = empty)
    indexNum entries of 20 B: keyHash 4 | phyOffset 8 | timeDiff s 4 | prevIndex 4

The file is named by its creation time ``yyyyMMddHHmmssSSS`` (local time). Keys go in with
``put_key`` and chains are walked with ``select_phy_offsets``, each one numba call.
"""

from __future__ import annotations

import mmap
import os
import time

import numpy as np
from numba import njit

from shmq import files
from shmq.codec import record as rec
from shmq.codec.jhash import java_hash_continue, signed32
from shmq.codec.record import get_i32, get_i64, put_i32, put_i64
from shmq.errors import CorruptStoreError
from shmq.store.mapped_file import allocate, reserve_blocks

HEADER_SIZE = 40
SLOT_SIZE = 4
ENTRY_SIZE = 20
_INT_MAX = 0x7FFFFFFF


def index_file_size(hash_slot_num: int, index_num: int) -> int:
    return HEADER_SIZE + hash_slot_num * SLOT_SIZE + index_num * ENTRY_SIZE


def index_file_name(epoch_ms: int) -> str:
    """``yyyyMMddHHmmssSSS`` in local time, as RocketMQ's ``timeMillisToHumanString``."""
    return (
        time.strftime("%Y%m%d%H%M%S", time.localtime(epoch_ms // 1000)) + f"{epoch_ms % 1000:03d}"
    )


@njit(cache=True, nogil=True)
def put_key(buf, slot_num, index_num, key_hash, phy_offset, store_timestamp):
    """RocketMQ's ``IndexFile.putKey``; False when the file is full."""
    index_count = get_i32(buf, 36)
    if index_count >= index_num:
        return False
    slot_pos = HEADER_SIZE + (key_hash % slot_num) * SLOT_SIZE
    slot_value = get_i32(buf, slot_pos)
    if slot_value <= 0 or slot_value > index_count:
        slot_value = 0
    begin_ts = get_i64(buf, 0)
    diff = store_timestamp - begin_ts
    if begin_ts <= 0:
        diff = 0
    diff //= 1000
    if diff > _INT_MAX:
        diff = _INT_MAX
    elif diff < 0:
        diff = 0
    pos = HEADER_SIZE + slot_num * SLOT_SIZE + index_count * ENTRY_SIZE
    put_i32(buf, pos, key_hash)
    put_i64(buf, pos + 4, phy_offset)
    put_i32(buf, pos + 12, diff)
    put_i32(buf, pos + 16, slot_value)
    put_i32(buf, slot_pos, index_count)
    if index_count <= 1:
        put_i64(buf, 16, phy_offset)
        put_i64(buf, 0, store_timestamp)
    if slot_value == 0:
        put_i32(buf, 32, get_i32(buf, 32) + 1)
    put_i32(buf, 36, index_count + 1)
    put_i64(buf, 24, phy_offset)
    put_i64(buf, 8, store_timestamp)
    return True


# ``put_record_keys`` outcomes
KEYS_DONE, KEYS_FILE_FULL, KEYS_RESERVE = 0, 1, 2


@njit(cache=True, nogil=True, inline="always")
def _index_hash(h):
    """RocketMQ's ``indexKeyHashMethod``: ``abs(hashCode)``, ``Integer.MIN_VALUE`` → 0."""
    v = signed32(h)
    return 0 if v == -2147483648 else abs(v)


@njit(cache=True, nogil=True)
def put_record_keys(buf, slot_num, index_num, entry_limit, src, rows, picks, start, skip, base):
    """Index ``topic#UNIQ_KEY`` and ``topic#key`` for every key of the records
    ``rows[picks[start:]]`` (parsed from ``src``, a CommitLog file whose byte 0 is physical
    offset ``base``), as ``IndexService.build_index`` does one record at a time, the first
    ``skip`` keys of the first record excepted (already in the previous file). A record
    below the file's end offset was indexed before (re-dispatch after recovery) and is
    skipped. Stops before a key that would pass ``index_num`` entries (the file is full:
    the next file takes the rest, as RocketMQ's ``putKey`` does) or ``entry_limit`` (the
    blocks reserved so far). Returns ``(next pick, keys of it done, KEYS_*)``."""
    uniq_name, keys_name = rec.PROP_UNIQ_KEY, rec.PROP_KEYS
    for k in range(start, picks.shape[0]):
        r = picks[k]
        phy = base + rows[r].pos
        if phy < get_i64(buf, 24):
            skip = 0
            continue
        # the last UNIQ_KEY and KEYS pairs with a name and a value, as decode_properties keeps
        us = ue = ks = ke = 0
        p = rows[r].props_start
        end = p + rows[r].props_len
        while p < end:
            stop, sep = rec.property_pair(src, p, end)
            if p < sep < stop - 1:
                if rec.bytes_equal(src, p, sep, uniq_name):
                    us, ue = sep + 1, stop
                elif rec.bytes_equal(src, p, sep, keys_name):
                    ks, ke = sep + 1, stop
            p = stop + 1
        topic = rows[r].topic_start
        h = java_hash_continue(np.int64(0), src, topic, topic + rows[r].topic_len)
        h = (h * 31 + 35) & 0xFFFFFFFF  # '#'
        store_ts = rows[r].store_ts
        j = 0  # keys of this record seen: UNIQ_KEY first, then KEYS split at spaces
        q = ks
        while True:
            if j == 0 and ue > us:
                a, e = us, ue
            else:
                while q < ke and src[q] == 32:
                    q += 1
                if q >= ke:
                    break
                a = q
                while q < ke and src[q] != 32:
                    q += 1
                e = q
            if j == 0 and ue <= us:
                j = 1  # no UNIQ_KEY: KEYS start at key 1
            if j >= skip:
                count = get_i32(buf, 36)
                if count >= index_num:
                    return k, j, KEYS_FILE_FULL
                if count + 1 > entry_limit:
                    return k, j, KEYS_RESERVE
                put_key(buf, slot_num, index_num, _index_hash(java_hash_continue(h, src, a, e)),
                        phy, store_ts)  # fmt: skip
            j += 1
        skip = 0
    return picks.shape[0], 0, KEYS_DONE


@njit(cache=True, nogil=True)
def select_phy_offsets(buf, slot_num, key_hash, begin, end, out):
    """RocketMQ's ``selectPhyOffset``: walk the key's slot chain, newest first, collecting
    offsets whose hash matches and whose time is within ``[begin, end]``; returns the count."""
    index_count = get_i32(buf, 36)
    current = get_i32(buf, HEADER_SIZE + (key_hash % slot_num) * SLOT_SIZE)
    if current <= 0 or current > index_count or index_count <= 1:
        return 0
    begin_ts = get_i64(buf, 0)
    n = 0
    while n < out.shape[0]:
        pos = HEADER_SIZE + slot_num * SLOT_SIZE + current * ENTRY_SIZE
        diff = get_i32(buf, pos + 12)
        if diff < 0:
            break
        stamp = begin_ts + diff * 1000
        if get_i32(buf, pos) == key_hash and begin <= stamp <= end:
            out[n] = get_i64(buf, pos + 4)
            n += 1
        prev = get_i32(buf, pos + 16)
        if prev <= 0 or prev > index_count or prev == current or stamp < begin:
            break
        current = prev
    return n


class IndexFile:
    def __init__(self, path: str, hash_slot_num: int, index_num: int) -> None:
        self.path = path
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        size = index_file_size(hash_slot_num, index_num)
        self._entries_at = HEADER_SIZE + hash_slot_num * SLOT_SIZE
        self._reserved = size  # an existing file: its blocks were reserved as it grew
        fd = files.create(path, os.O_RDWR)
        try:
            actual = os.fstat(fd).st_size
            if actual == 0:
                # header and hash slots get blocks now (slots are written anywhere); entries,
                # written in order, get them ahead of use (``put_key``): a full disk is a
                # DiskFullError, never a SIGBUS
                os.ftruncate(fd, size)
                allocate(fd, self._entries_at, path)
                self._reserved = self._entries_at
            elif actual != size:
                raise CorruptStoreError(
                    f"{path} is {actual} bytes; an index file with {hash_slot_num} slots and "
                    f"{index_num} entries must be {size} bytes"
                )
            self._mm = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self.buf = np.frombuffer(self._mm, dtype=np.uint8)
        if self.index_count <= 0:  # new file: entry 0 is never used
            put_i32(self.buf, 36, 1)

    @classmethod
    def create(
        cls, path: str, hash_slot_num: int, index_num: int, previous: IndexFile | None
    ) -> IndexFile:
        """A new file; like RocketMQ it starts with the previous file's end offset and end
        time as both its begin and end (the first key then overwrites the begin fields)."""
        f = cls(path, hash_slot_num, index_num)
        if previous is not None:
            put_i64(f.buf, 0, previous.end_timestamp)
            put_i64(f.buf, 8, previous.end_timestamp)
            put_i64(f.buf, 16, previous.end_phy_offset)
            put_i64(f.buf, 24, previous.end_phy_offset)
        return f

    # header fields
    @property
    def begin_timestamp(self) -> int:
        return int(get_i64(self.buf, 0))

    @property
    def end_timestamp(self) -> int:
        return int(get_i64(self.buf, 8))

    @property
    def begin_phy_offset(self) -> int:
        return int(get_i64(self.buf, 16))

    @property
    def end_phy_offset(self) -> int:
        return int(get_i64(self.buf, 24))

    @property
    def hash_slot_count(self) -> int:
        return int(get_i32(self.buf, 32))

    @property
    def index_count(self) -> int:
        return int(get_i32(self.buf, 36))

    @property
    def is_full(self) -> bool:
        return self.index_count >= self.index_num

    def entry_limit(self) -> int:
        """How many entries the blocks reserved so far hold."""
        return (self._reserved - self._entries_at) // ENTRY_SIZE

    @property
    def unreserved(self) -> int:
        """Bytes of the file without disk blocks yet (entries not reserved)."""
        return self.buf.shape[0] - self._reserved

    def reserve_entries(self, count: int) -> None:
        """Disk blocks for ``count`` more entries (``DiskFullError`` when there is none)."""
        end = self._entries_at + (self.index_count + count) * ENTRY_SIZE
        if end > self._reserved:
            self._reserved = reserve_blocks(self.path, self._reserved, end, self.buf.shape[0])

    def put_key(self, key_hash: int, phy_offset: int, store_timestamp: int) -> bool:
        end = self._entries_at + (self.index_count + 1) * ENTRY_SIZE
        if end > self._reserved:
            self._reserved = reserve_blocks(self.path, self._reserved, end, self.buf.shape[0])
        return bool(
            put_key(
                self.buf, self.hash_slot_num, self.index_num, key_hash, phy_offset, store_timestamp
            )
        )

    def select_phy_offsets(self, key_hash: int, max_num: int, begin: int, end: int) -> list[int]:
        out = np.empty(max_num, dtype=np.int64)
        n = select_phy_offsets(self.buf, self.hash_slot_num, key_hash, begin, end, out)
        return out[:n].tolist()

    def is_time_matched(self, begin: int, end: int) -> bool:
        lo, hi = self.begin_timestamp, self.end_timestamp
        return (begin < lo and end > hi) or lo <= begin <= hi or lo <= end <= hi

    def flush(self) -> None:
        self._mm.flush()

    def close(self) -> None:
        if self._mm is not None:
            self.buf = None
            self._mm.close()
            self._mm = None

    def destroy(self) -> None:
        self.close()
        os.unlink(self.path)
