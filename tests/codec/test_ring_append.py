"""The writer's append kernel on plain arrays: what it stores, answers, refuses and where it
stops, checked against the independent decoder."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from shmq.codec import record as rec
from shmq.codec import ring_append as ra
from shmq.ipc import ring
from spec_decoder import decode_record

TOPIC = b"Orders"


def encode(bodies: list[bytes], topic: bytes = TOPIC, queue_id: int = 0, crc: int = 0,
           sysflag: int = 0):  # fmt: skip
    """A ring holding ``bodies`` as a producer encodes them (BODYCRC ``crc``, -1: right)."""
    data = np.zeros(1 << 16, dtype=np.uint8)
    flat = np.frombuffer(b"".join(bodies), dtype=np.uint8)
    offs = np.zeros(len(bodies) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in bodies], out=offs[1:])
    props = np.frombuffer(b"TAGS\x01t\x02", dtype=np.uint8)
    fields = np.zeros(len(bodies), dtype=rec.ENCODE_ROW)
    fields["queue_id"] = queue_id
    fields["body_crc"] = crc
    fields["sysflag"] = sysflag
    end = rec.encode_batch(data, 0, 0, np.frombuffer(topic, dtype=np.uint8), flat, offs, props,
                           np.array([0, len(props)], dtype=np.int64), fields)  # fmt: skip
    return data, int(end)


def index_of(*topics: tuple[bytes, int, int, list[int] | None]) -> ra.TopicIndex:
    index = ra.TopicIndex()
    for name, reason, write_q, slots in topics:
        index.set(name, reason, write_q, slots)
    index.build()
    return index


def params(check_crc: bool = False, refuse: int = 0) -> np.ndarray:
    p = np.zeros(1, dtype=ra.APPEND_PARAMS)
    p["max_body"] = 1 << 20
    p["store_ts"] = 1_700_000_000_000
    p["store_host"] = 0x7F00000100002A9F
    p["refuse"] = refuse
    p["check_crc"] = check_crc
    p["reason_queue"] = ring.REASON_QUEUE_ID
    p["reason_size"] = ring.REASON_TOO_LARGE
    p["reason_sysflag"] = ring.REASON_SYSFLAG
    p["reason_corrupt"] = ring.REASON_CORRUPT
    return p


def run(src, end, index, p, dst=None, dst_pos=0, base=4096, next_qoff=None, max_records=99):
    """One kernel call over ``src[:end]``; returns its result as a dict of the fields."""
    dst = np.zeros(1 << 16, dtype=np.uint8) if dst is None else dst
    next_qoff = np.zeros(8, dtype=np.int64) if next_qoff is None else next_qoff
    comp = np.zeros((16, 4), dtype=np.int64)
    p["limit"], p["max_records"] = end, max_records
    p["dst_pos"], p["dst_room"], p["dst_base"] = dst_pos, dst.shape[0] - dst_pos, base
    result = np.zeros(1, dtype=ra.APPEND_RESULT)
    ra.append_from_ring(src, index.names, index.name_offs, index.table, index.info, index.slots,
                        dst, next_qoff, comp, p, result)  # fmt: skip
    out = dict(zip(result.dtype.names, result[0].item(), strict=True))
    return out, dst, comp, next_qoff


def fields(out: dict, *names: str) -> tuple:
    return tuple(out[name] for name in names)


def test_the_status_values_are_the_rings():
    assert (ra._SEND_OK, ra._REJECTED) == (ring.SEND_OK, ring.REJECTED)


@pytest.mark.parametrize("claimed", [0, -1, 12345])
def test_records_are_stored_with_the_writers_crc_and_answered(claimed):
    bodies = [b"a" * 10, b"bb" * 40, b"c"]
    src, end = encode(bodies, queue_id=1, crc=claimed)
    index = index_of((TOPIC, 0, 2, [5, 6]))
    qoff = np.zeros(8, dtype=np.int64)
    qoff[6] = 40
    out, dst, comp, qoff = run(src, end, index, params(), next_qoff=qoff)
    assert out == {"records": 3, "ring_bytes": end, "file_bytes": end, "kept": 3,
                   "code": rec.PARSE_END, "stop": end}  # fmt: skip
    assert qoff[6] == 43
    p = 0
    for i, body in enumerate(bodies):
        record = decode_record(dst.tobytes(), p, 4096)  # the decoder checks BODYCRC
        assert record is not None and record["body"] == body
        assert record["body_crc"] == zlib.crc32(body) & 0x7FFFFFFF
        assert (record["queue_id"], record["queue_offset"]) == (1, 40 + i)
        assert comp[i].tolist() == [ring.SEND_OK | (1 << 32), 40 + i, 4096 + p, 1_700_000_000_000]
        p += record["size"]


def test_a_checked_crc_refuses_only_the_record_that_lies():
    good, _ = encode([b"fine"], crc=-1)
    bad, end = encode([b"lies"], crc=7)
    index = index_of((TOPIC, 0, 1, [0]))
    out, _, comp, _ = run(good, end, index, params(check_crc=True))
    assert fields(out, "records", "kept", "code") == (1, 1, rec.PARSE_END)
    out, _, comp, _ = run(bad, end, index, params(check_crc=True))
    assert fields(out, "records", "file_bytes", "kept", "code") == (1, 0, 0, rec.PARSE_END)
    assert comp[0, 0] == ring.REJECTED | (ring.REASON_CORRUPT << 16)
    out, _, _, _ = run(bad, end, index, params(check_crc=False))
    assert fields(out, "records", "kept") == (1, 1)  # unchecked: stored, with the writer's CRC


def test_refusals_answer_with_their_reason_and_store_nothing():
    src, end = encode([b"x", b"y"], queue_id=3)
    index = index_of((TOPIC, 0, 2, [0, 1]))
    out, _, comp, _ = run(src, end, index, params())
    assert fields(out, "records", "file_bytes", "kept") == (2, 0, 0)
    assert (comp[:2, 0] >> 16 & 0xFFFF).tolist() == [ring.REASON_QUEUE_ID] * 2
    out, _, comp, _ = run(src, end, index_of((TOPIC, ring.REASON_NO_PERMISSION, 4, None)),
                          params())  # fmt: skip
    assert fields(out, "records", "file_bytes") == (2, 0)
    assert comp[0, 0] >> 16 & 0xFFFF == ring.REASON_NO_PERMISSION
    refused = params(refuse=ring.REASON_SERVICE_NOT_AVAILABLE)
    out, _, comp, _ = run(src, end, index_of((TOPIC, 0, 4, [0] * 4)), refused)
    assert fields(out, "records", "file_bytes") == (2, 0)
    assert comp[1, 0] >> 16 & 0xFFFF == ring.REASON_SERVICE_NOT_AVAILABLE


@pytest.mark.parametrize(
    ("tx_type", "stored"),
    [
        (0, True),
        (rec.SYSFLAG_TRANSACTION_COMMIT, True),  # the broker's commit of a half message
        (rec.SYSFLAG_TRANSACTION_PREPARED, False),
        (rec.SYSFLAG_TRANSACTION_ROLLBACK, False),
    ],
)
def test_only_plain_and_commit_transaction_types_are_stored(tx_type, stored):
    src, end = encode([b"x"], sysflag=tx_type)
    out, dst, comp, _ = run(src, end, index_of((TOPIC, 0, 1, [0])), params())
    assert fields(out, "records", "kept") == (1, int(stored))
    if stored:
        assert decode_record(dst.tobytes(), 0, 4096)["sysflag"] == tx_type
    else:
        assert out["file_bytes"] == 0 and comp[0, 0] >> 16 & 0xFFFF == ring.REASON_SYSFLAG


def test_it_stops_for_python_at_an_unknown_topic_and_a_full_file():
    src, end = encode([b"x"], topic=b"Other")
    out, _, _, _ = run(src, end, index_of((TOPIC, 0, 1, [0])), params())
    assert fields(out, "records", "code", "stop") == (0, ra.APPEND_TOPIC, 0)
    unslotted = index_of((b"Other", 0, 1, None))  # known, queue slots not given yet
    assert run(src, end, unslotted, params())[0]["code"] == ra.APPEND_TOPIC
    src, end = encode([b"x" * 100, b"y" * 100])
    size = end // 2
    dst = np.zeros(size + size // 2, dtype=np.uint8)
    out, _, _, _ = run(src, end, index_of((TOPIC, 0, 1, [0])), params(), dst=dst)
    assert fields(out, "records", "ring_bytes", "file_bytes", "code", "stop") == (
        1, size, size, ra.APPEND_FILE_FULL, size
    )  # fmt: skip


def test_it_stops_at_the_record_count_and_at_bytes_that_are_not_records():
    src, end = encode([b"x", b"y", b"z"])
    index = index_of((TOPIC, 0, 1, [0]))
    out, _, _, _ = run(src, end, index, params(), max_records=2)
    assert fields(out, "records", "code", "stop") == (2, ra.APPEND_DONE, 2 * (end // 3))
    src[end - 1] = ord("X")  # the last record's properties no longer end in 0x02
    out, _, _, _ = run(src, end, index, params())
    assert fields(out, "records", "code") == (2, rec.PARSE_CORRUPT)


def test_a_lap_closing_blank_is_seen_when_no_record_is_left_to_take():
    """A pass with no published record left must still report the blank that closes the
    ring's lap (the writer then moves to the next lap), not a record beyond the count."""
    src = np.zeros(64, dtype=np.uint8)
    rec.write_blank(src, 0, 64)
    out, _, _, _ = run(src, 64, index_of((TOPIC, 0, 1, [0])), params(), max_records=0)
    assert fields(out, "records", "code", "stop") == (0, rec.PARSE_BLANK, 0)
    record, end = encode([b"x"])
    out, _, _, _ = run(record, end, index_of((TOPIC, 0, 1, [0])), params(), max_records=0)
    assert fields(out, "records", "code") == (0, ra.APPEND_DONE)  # beyond the count: fenced
