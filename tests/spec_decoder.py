"""An independent decoder of RocketMQ 4.9 store files, written from ``spec/store-format.md``
and ``spec/rocketmq-reference.md`` with ``struct`` only.

It exists so tests can check the files shmq writes (and what shmq recovers) against the spec
without trusting shmq's own codec: nothing here imports ``shmq``.
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

MAGIC_V1 = 0xDAA320A7
MAGIC_V2 = 0xDAA320AB
MAGIC_BLANK = 0xCBD43194
TOPIC_ALPHABET = b"%|_-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def java_hash(text: str) -> int:
    """``String.hashCode()`` over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    units = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def parse_properties(raw: bytes) -> dict[str, str]:
    props = {}
    for segment in raw.decode("utf-8", "replace").split("\x02"):
        i = segment.find("\x01")
        if len(segment) >= 3 and 0 < i < len(segment) - 1:
            props[segment[:i]] = segment[i + 1 :]
    return props


def decode_record(data: bytes, p: int, base: int = 0) -> dict | None:
    """The record at ``data[p:]`` (V1 or V2, IPv4 or IPv6 hosts) if it is valid per the spec:
    known magic, TOTALSIZE equal to the length formula, PHYSICALOFFSET equal to its position
    (``base + p``), BODYCRC equal to ``crc32(body) & 0x7FFFFFFF``, properties ending with
    0x02 and a topic in RocketMQ's alphabet; else None."""
    try:
        total, magic, crc, qid, flag, qoff, phys, sysflag, born_ts = struct.unpack_from(
            ">iIiiiqqiq", data, p
        )
        if magic not in (MAGIC_V1, MAGIC_V2) or total < 91 or p + total > len(data):
            return None
        born_len = 20 if sysflag & 0x10 else 8
        store_len = 20 if sysflag & 0x20 else 8
        q = p + 48
        born_host = data[q : q + born_len]
        q += born_len
        (store_ts,) = struct.unpack_from(">q", data, q)
        store_host = data[q + 8 : q + 8 + store_len]
        q += 8 + store_len
        reconsume, prep_tx, body_len = struct.unpack_from(">iqi", data, q)
        q += 16
        body = data[q : q + body_len]
        q += body_len
        if magic == MAGIC_V1:
            (topic_len,) = struct.unpack_from(">b", data, q)
            q += 1
        else:
            (topic_len,) = struct.unpack_from(">h", data, q)
            q += 2
        topic = data[q : q + topic_len]
        q += topic_len
        (props_len,) = struct.unpack_from(">h", data, q)
        props = data[q + 2 : q + 2 + props_len]
    except struct.error:
        return None
    formula = (
        68
        + born_len
        + store_len
        + 4
        + body_len
        + (1 if magic == MAGIC_V1 else 2)
        + topic_len
        + 2
        + props_len
    )
    if body_len < 0 or topic_len <= 0 or props_len < 0 or formula != total:
        return None
    # every property pair ends with 0x02; topics use RocketMQ's alphabet
    if props and props[-1] != 2:
        return None
    if topic.strip(TOPIC_ALPHABET):
        return None
    if phys != base + p or zlib.crc32(body) & 0x7FFFFFFF != crc:
        return None
    return {
        "size": total,
        "magic": magic,
        "body_crc": crc,
        "queue_id": qid,
        "flag": flag,
        "queue_offset": qoff,
        "phys": phys,
        "sysflag": sysflag,
        "born_timestamp": born_ts,
        "born_host": born_host,
        "store_timestamp": store_ts,
        "store_host": store_host,
        "reconsume_times": reconsume,
        "prepared_transaction_offset": prep_tx,
        "body": body,
        "topic": topic.decode("utf-8", "replace"),
        "properties_raw": props,
        "properties": parse_properties(props),
        "offset_msg_id": (store_host + phys.to_bytes(8, "big", signed=True)).hex().upper(),
    }


def walk_commitlog(commitlog_dir: str) -> tuple[list[dict], int]:
    """Valid records from the first file on, stopping at the first invalid one, and where
    valid data ends. A blank record ends a file (the end then moves to the next file's
    start); files must be named by 20-digit offsets and follow each other without gaps."""
    records: list[dict] = []
    end: int | None = None
    for name in sorted(os.listdir(commitlog_dir)):
        assert len(name) == 20 and name.isdigit(), f"bad commitlog file name {name!r}"
        base = int(name)
        data = Path(commitlog_dir, name).read_bytes()
        if end is None:
            end = base
        if base != end:
            break
        p = 0
        while True:
            if p + 8 > len(data):
                return records, end
            total, magic = struct.unpack_from(">iI", data, p)
            if magic == MAGIC_BLANK:
                if total != len(data) - p:  # a blank record fills the rest of its file
                    return records, end
                end = base + len(data)
                break
            rec = decode_record(data, p, base)
            if rec is None:
                return records, end
            records.append(rec)
            p += total
            end = base + p
    return records, end or 0


@dataclass
class ConsumeQueueUnit:
    offset: int
    size: int
    tags_code: int


def read_consume_queue(store_dir: str, topic: str, queue_id: int) -> list[ConsumeQueueUnit]:
    """Units of ``consumequeue/{topic}/{queueId}`` in order, until the first all-zero unit.
    Files are named by the byte offset of their first unit."""
    qdir = Path(store_dir, "consumequeue", topic, str(queue_id))
    units: list[ConsumeQueueUnit] = []
    expected = None
    for name in sorted(os.listdir(qdir)):
        start = int(name)
        data = (qdir / name).read_bytes()
        assert len(data) % 20 == 0 and start % len(data) == 0
        if expected is not None and start != expected:
            break
        for p in range(0, len(data), 20):
            offset, size, tags = struct.unpack_from(">qiq", data, p)
            if offset == 0 and size == 0 and tags == 0:
                return units
            units.append(ConsumeQueueUnit(offset, size, tags))
        expected = start + len(data)
    return units


@dataclass
class IndexFileView:
    path: str
    hash_slot_num: int
    index_num: int
    data: bytes = field(repr=False)

    @property
    def header(self) -> dict:
        names = (
            "begin_timestamp",
            "end_timestamp",
            "begin_phy_offset",
            "end_phy_offset",
            "hash_slot_count",
            "index_count",
        )
        return dict(zip(names, struct.unpack_from(">qqqqii", self.data), strict=True))

    def lookup(self, key: str) -> list[int]:
        """Offsets whose key hash matches ``key`` (``topic#key``), newest first, by walking
        the slot chain exactly as the spec describes."""
        h = java_hash(key)
        h = 0 if h == -(2**31) else abs(h)
        (current,) = struct.unpack_from(">i", self.data, 40 + (h % self.hash_slot_num) * 4)
        count = self.header["index_count"]
        found = []
        while 0 < current <= count:
            pos = 40 + self.hash_slot_num * 4 + current * 20
            key_hash, phys, _diff, prev = struct.unpack_from(">iqii", self.data, pos)
            if key_hash == h:
                found.append(phys)
            if prev == current:
                break
            current = prev
        return found


def read_index_files(store_dir: str, hash_slot_num: int, index_num: int) -> list[IndexFileView]:
    index_dir = Path(store_dir, "index")
    views = []
    for name in sorted(os.listdir(index_dir)):
        assert len(name) == 17 and name.isdigit(), f"bad index file name {name!r}"
        data = (index_dir / name).read_bytes()
        assert len(data) == 40 + hash_slot_num * 4 + index_num * 20
        views.append(IndexFileView(str(index_dir / name), hash_slot_num, index_num, data))
    return views


def read_checkpoint(path: str) -> dict:
    data = Path(path).read_bytes()
    assert len(data) == 4096
    physic, logics, index = struct.unpack_from(">qqq", data)
    return {"physic": physic, "logics": logics, "index": index}
