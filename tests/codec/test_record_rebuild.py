"""The delivery rebuild kernel: a delayed record under its real topic and queue, the one
property removed, everything else as stored; fuzzed against the per-record builder and the
independent decoder."""

from __future__ import annotations

import zlib

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from shmq.codec import record as rec
from shmq.codec.record_pack import record_struct, tail
from shmq.codec.record_rebuild import (
    BAD_REAL_QID,
    HALF_MESSAGE,
    NO_REAL_TOPIC,
    edit_properties,
    rebuild_deliveries,
    rebuild_record,
    stamp_positions,
)
from spec_decoder import decode_record

names = st.from_regex(r"[A-Za-z0-9_%|-]{1,40}", fullmatch=True)
printable = st.characters(min_codepoint=33, max_codepoint=0x2FF, exclude_categories=("Zs", "Cc"))
values = st.text(printable, min_size=1, max_size=10)


def stored(topic: bytes, body: bytes, props: bytes, queue_id: int = 3) -> tuple[bytes, np.ndarray]:
    """One record as the writer stores it, and its decoded row."""
    rest, magic = tail(topic, props)
    size = rec.HEADER_BODY_START + len(body) + len(rest)
    raw = bytearray(size)
    record_struct(len(body), len(rest)).pack_into(
        raw, 0, size, magic, zlib.crc32(body) & 0x7FFFFFFF, queue_id, 7, 11, 0, 0, 1234, 99,
        5678, 42, 2, 0, len(body), body, rest,
    )  # fmt: skip
    buf = np.frombuffer(bytes(raw), dtype=np.uint8)
    rows = np.zeros(1, dtype=rec.RECORD_ROW)
    assert rec.parse_at(buf, np.zeros(1, np.int64), size, 0, True, rows) == 1
    return bytes(raw), rows


def rebuild(raw: bytes, rows: np.ndarray, remove: bytes) -> tuple[bytes, int]:
    buf = np.frombuffer(raw, dtype=np.uint8)
    out = np.zeros(len(raw) + 256, dtype=np.uint8)
    ends = np.zeros(2, dtype=np.int64)
    problems = np.zeros(1, dtype=np.int64)
    name = np.frombuffer(remove, dtype=np.uint8)
    end = rebuild_deliveries(buf, rows, np.zeros(1, np.int64), name, out, ends, problems)
    return out[: max(end, 0)].tobytes(), int(problems[0])


@settings(max_examples=200, deadline=None)
@given(real=names, qid=st.integers(0, 65535), body=st.binary(min_size=1, max_size=300),
       user=st.dictionaries(names, values, max_size=4), level=st.integers(1, 18))  # fmt: skip
def test_the_kernel_writes_what_the_per_record_builder_writes(real, qid, body, user, level):
    props = "".join(f"{k}\x01{v}\x02" for k, v in user.items() if k not in ("REAL_TOPIC",
                    "REAL_QID", "DELAY"))  # fmt: skip
    props += f"REAL_TOPIC\x01{real}\x02REAL_QID\x01{qid}\x02DELAY\x01{level}\x02"
    raw, rows = stored(b"SCHEDULE_TOPIC_XXXX", body, props.encode())
    built, problem = rebuild(raw, rows, b"DELAY")
    assert problem == 0
    expected = rebuild_record(
        np.frombuffer(raw, np.uint8), rows[0], real.encode(), qid,
        edit_properties(props.encode(), remove={b"DELAY"}),
    )  # fmt: skip
    assert built == bytes(expected)
    decoded = decode_record(built, 0)  # the independent decoder agrees
    assert decoded is not None
    assert (decoded["topic"], decoded["queue_id"], decoded["body"]) == (real, qid, body)
    assert "DELAY" not in decoded["properties"]
    assert decoded["properties"]["REAL_TOPIC"] == real
    assert (decoded["born_timestamp"], decoded["reconsume_times"]) == (1234, 2)


def test_nothing_is_removed_when_the_name_is_empty():
    props = b"TIMER_OUT_MS\x015\x02REAL_TOPIC\x01T\x02REAL_QID\x010\x02"
    raw, rows = stored(b"rmq_sys_wheel_timer", b"x", props)
    built, problem = rebuild(raw, rows, b"")
    assert problem == 0
    assert decode_record(built, 0)["properties_raw"] == props


def test_records_that_cannot_be_delivered_are_flagged_and_take_no_bytes():
    cases = {
        b"DELAY\x013\x02": NO_REAL_TOPIC,
        b"REAL_TOPIC\x01bad topic\x02REAL_QID\x010\x02": NO_REAL_TOPIC,
        b"REAL_TOPIC\x01T\x02": BAD_REAL_QID,
        b"REAL_TOPIC\x01T\x02REAL_QID\x0170000\x02": BAD_REAL_QID,
        b"REAL_TOPIC\x01T\x02REAL_QID\x01-1\x02": BAD_REAL_QID,
        b"REAL_TOPIC\x01RMQ_SYS_TRANS_HALF_TOPIC\x02REAL_QID\x010\x02": HALF_MESSAGE,
    }
    for props, problem in cases.items():
        raw, rows = stored(b"SCHEDULE_TOPIC_XXXX", b"x", props)
        built, found = rebuild(raw, rows, b"DELAY")
        assert (built, found) == (b"", problem), props


def test_ring_positions_are_stamped_for_the_writer():
    raw, rows = stored(b"SCHEDULE_TOPIC_XXXX", b"abc", b"REAL_TOPIC\x01T\x02REAL_QID\x011\x02")
    one, _ = rebuild(raw, rows, b"DELAY")
    data = np.zeros(1024, dtype=np.uint8)
    data[100 : 100 + 2 * len(one)] = np.frombuffer(one * 2, np.uint8)
    ends = np.array([0, len(one), 2 * len(one)], dtype=np.int64)
    stamp_positions(data, 100, ends, 0, 2, 5000)
    for k, base in enumerate((5000, 5000 + len(one))):
        record = decode_record(data.tobytes(), 100 + k * len(one), base - 100 - k * len(one))
        assert record is not None and record["phys"] == base


def test_a_commit_record_gets_its_sysflag_and_prepared_offset_and_keeps_the_rest():
    props = b"TRAN_MSG\x01true\x02PGROUP\x01G\x02REAL_TOPIC\x01Orders\x02REAL_QID\x015\x02"
    raw, rows = stored(b"RMQ_SYS_TRANS_HALF_TOPIC", b"paid", props)
    built = rebuild_record(np.frombuffer(raw, np.uint8), rows[0], b"Orders", 5, props,
                           sysflag=rec.SYSFLAG_TRANSACTION_COMMIT,
                           prepared_offset=123_456_789_012)  # fmt: skip
    decoded = decode_record(bytes(built), 0)
    assert decoded is not None
    assert (decoded["topic"], decoded["queue_id"], decoded["body"]) == ("Orders", 5, b"paid")
    assert decoded["sysflag"] == rec.SYSFLAG_TRANSACTION_COMMIT
    assert decoded["prepared_transaction_offset"] == 123_456_789_012
    assert (decoded["born_timestamp"], decoded["reconsume_times"], decoded["flag"]) == (1234, 2, 7)
    assert decoded["properties_raw"] == props
