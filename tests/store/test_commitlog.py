"""CommitLog: the single-record and batch encoders agree byte for byte; appends roll files
with blank records; scans and reads cross files."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from shmq.codec import record as rec
from shmq.errors import InvalidMessageError
from shmq.message import pack_host
from shmq.store.commitlog import CommitLog

HOST = pack_host("127.0.0.1", 10911)
TOPIC = b"Log"


def tail(props: bytes) -> tuple[bytes, int]:
    return bytes([len(TOPIC)]) + TOPIC + len(props).to_bytes(2, "big") + props, rec.MAGIC_V1


def batch_args(bodies: list[bytes], props: bytes, first_queue_offset: int, now: int):
    n = len(bodies)
    fields = np.zeros(n, dtype=rec.ENCODE_ROW)
    fields["queue_id"] = 2
    fields["flag"] = 5
    fields["queue_offset"] = np.arange(first_queue_offset, first_queue_offset + n)
    fields["born_ts"] = fields["store_ts"] = now
    fields["born_host"] = fields["store_host"] = HOST
    fields["body_crc"] = -1
    offsets = np.cumsum([0] + [len(b) for b in bodies]).astype(np.int64)
    sizes = np.array([rec.record_size(len(b), len(TOPIC), len(props)) for b in bodies])
    return (
        np.frombuffer(TOPIC, np.uint8),
        np.frombuffer(b"".join(bodies), np.uint8),
        offsets,
        np.frombuffer(props, np.uint8),
        np.array([0, len(props)], dtype=np.int64),
        fields,
        sizes,
    )


def open_log(path, size=4096) -> CommitLog:
    log = CommitLog(str(path), size, store_host=HOST)
    log.load()
    return log


def test_single_and_batch_encoders_write_identical_bytes(tmp_path):
    bodies = [bytes([i]) * (1 + i * 37) for i in range(30)]
    props = b"TAGS\x01t\x02"
    single, batch = open_log(tmp_path / "a"), open_log(tmp_path / "b")
    for i, body in enumerate(bodies):
        single.append_one(body, tail(props), zlib.crc32(body) & 0x7FFFFFFF, 2, 5, i, 7, 7)
    offsets = batch.append(*batch_args(bodies, props, 0, 7))
    assert single.max_offset == batch.max_offset
    assert len(single.queue.files) == len(batch.queue.files) > 1  # rolled, same blank records
    for a, b in zip(single.queue.files, batch.queue.files, strict=True):
        assert bytes(a.buf) == bytes(b.buf)
    assert list(offsets) == [int(r.physical_offsets()[0]) for r in map(single.read_one, offsets)]
    single.close()
    batch.close()


def test_scan_crosses_blank_records_and_read_one(tmp_path):
    log = open_log(tmp_path)
    bodies = [b"m%03d" % i * 50 for i in range(60)]
    offsets = log.append(*batch_args(bodies, b"", 0, 1))
    seen = [int(p) for batch in log.scan(0) for p in batch.physical_offsets()]
    assert seen == list(offsets)
    assert log.last_scan == (log.max_offset, rec.PARSE_END)
    assert log.read_one(int(offsets[7])).message(0).body == bodies[7]
    assert log.read_one(int(offsets[7]) + 1) is None  # not a record start
    assert log.read_one(log.max_offset) is None
    assert [int(p) for b in log.scan(int(offsets[30]), int(offsets[40])) for p in
            b.physical_offsets()] == list(offsets[30:40])  # fmt: skip
    log.close()


def test_a_record_larger_than_a_file_is_refused(tmp_path):
    log = open_log(tmp_path)
    with pytest.raises(InvalidMessageError, match="cannot fit"):
        log.append_one(b"x" * 5000, tail(b""), 0, 0, 0, 0, 0, 0)
    with pytest.raises(InvalidMessageError, match="cannot fit"):
        log.append(*batch_args([b"x" * 5000], b"", 0, 0))
    assert log.max_offset == 0
    log.close()


def test_flush_tracks_the_flushed_offset(tmp_path):
    log = open_log(tmp_path)
    log.append(*batch_args([b"a" * 100] * 5, b"", 0, 0))
    assert log.flushed_offset == 0
    assert log.flush() == log.max_offset
    log.close()
