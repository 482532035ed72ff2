"""Record codec kernels on plain buffers: the spec's example, round trips, validation, fuzzing."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shmq.codec import record as rec
from spec_decoder import decode_record, java_hash

EXAMPLE = bytes.fromhex(
    "00000073 daa320a7 77d18982 00000000 00000000 0000000000000000 0000000000000000 00000000"
    " 0000018bcfe56800 7f000001 0000d431 0000018bcfe56805 c0a8000a 00002a9f 00000000"
    " 0000000000000000 00000005 48656c6c6f 09 546f70696354657374 000a 54414753 01 54616741 02"
)


def host(ip: str, port: int) -> int:
    raw = bytes(int(x) for x in ip.split(".")) + port.to_bytes(4, "big")
    return int.from_bytes(raw, "big", signed=True)


def fields_for(n: int, **values: int) -> np.ndarray:
    fields = np.zeros(n, dtype=rec.ENCODE_ROW)
    fields["body_crc"] = -1
    for name, value in values.items():
        fields[name] = value
    return fields


def encode(topic: bytes, bodies: list[bytes], props: list[bytes], fields, base=0, pos=0):
    body_offs = np.cumsum([0] + [len(b) for b in bodies]).astype(np.int64)
    props_offs = np.cumsum([0] + [len(p) for p in props]).astype(np.int64)
    sizes = [
        rec.record_size(len(b), len(topic), len(p)) for b, p in zip(bodies, props, strict=True)
    ]
    size = pos + sum(sizes)
    buf = np.zeros(size + 64, dtype=np.uint8)
    end = rec.encode_batch(
        buf,
        pos,
        base,
        np.frombuffer(topic, np.uint8),
        np.frombuffer(b"".join(bodies) or b"\0", np.uint8),
        body_offs,
        np.frombuffer(b"".join(props) or b"\0", np.uint8),
        props_offs,
        fields,
    )
    return buf, end


def test_worked_example_is_byte_exact():
    fields = fields_for(
        1,
        born_ts=1700000000000,
        born_host=host("127.0.0.1", 54321),
        store_ts=1700000000005,
        store_host=host("192.168.0.10", 10911),
    )
    buf, end = encode(b"TopicTest", [b"Hello"], [b"TAGS\x01TagA\x02"], fields)
    assert end == 115 and bytes(buf[:end]) == EXAMPLE
    out = np.zeros(2, dtype=rec.RECORD_ROW)
    assert rec.parse_records(buf, 0, end, 0, True, out) == (1, 115, rec.PARSE_END)
    assert out["tags_code"][0] == 2598919
    assert out["body_crc"][0] == 0x77D18982


topics = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789%|_-", min_size=1)
prop_text = st.text(
    st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=50,
)


@settings(max_examples=200, deadline=None)
@given(
    topic=st.one_of(
        topics.filter(lambda t: len(t) <= 127), st.text("LT", min_size=128, max_size=255)
    ),
    msgs=st.lists(
        st.tuples(
            st.binary(max_size=300),
            st.dictionaries(prop_text, prop_text, max_size=3),
            st.integers(-(2**31), 2**31 - 1),
            st.integers(0, 2**40),
        ),
        min_size=1,
        max_size=8,
    ),
    base=st.integers(0, 2**40),
    pos=st.integers(0, 50),
)
def test_round_trip_against_the_spec_decoder(topic, msgs, base, pos):
    raw_topic = topic.encode()
    bodies = [m[0] for m in msgs]
    props = ["".join(f"{k}\x01{v}\x02" for k, v in m[1].items()).encode() for m in msgs]
    fields = fields_for(len(msgs), queue_id=7, store_ts=123456789, born_ts=42)
    fields["flag"] = [m[2] for m in msgs]
    fields["queue_offset"] = [m[3] for m in msgs]
    buf, end = encode(raw_topic, bodies, props, fields, base=base, pos=pos)
    out = np.zeros(len(msgs) + 1, dtype=rec.RECORD_ROW)
    n, stop, code = rec.parse_records(buf, pos, end, base, True, out)
    assert (n, stop, code) == (len(msgs), end, rec.PARSE_END)
    data = buf.tobytes()
    p = pos
    for i, (body, _, flag, qoff) in enumerate(msgs):
        spec = decode_record(data, p, base)
        assert spec is not None
        assert spec["magic"] == (rec.MAGIC_V2 if len(raw_topic) > 127 else rec.MAGIC_V1)
        assert spec["body"] == body and spec["topic"] == topic
        assert spec["properties_raw"] == props[i]
        assert (spec["flag"], spec["queue_offset"], spec["phys"]) == (flag, qoff, base + p)
        row = out[i]
        assert (
            row["size"] == spec["size"] == rec.record_size(len(body), len(raw_topic), len(props[i]))
        )
        assert bytes(buf[row["body_start"] : row["body_start"] + row["body_len"]]) == body
        assert row["flag"] == flag and row["queue_offset"] == qoff
        tags = spec["properties"].get("TAGS")
        assert row["tags_code"] == (java_hash(tags) if tags else 0)
        p += spec["size"]


def test_shared_properties_for_a_whole_batch():
    props = b"TAGS\x01x\x02"
    bodies = [b"a", b"bb", b"ccc"]
    body_offs = np.array([0, 1, 3, 6], dtype=np.int64)
    buf = np.zeros(400, dtype=np.uint8)
    end = rec.encode_batch(
        buf, 0, 0, np.frombuffer(b"T", np.uint8), np.frombuffer(b"abbccc", np.uint8),
        body_offs, np.frombuffer(props, np.uint8), np.array([0, len(props)]), fields_for(3),
    )  # fmt: skip
    data = buf.tobytes()
    p = 0
    for body in bodies:
        spec = decode_record(data, p)
        assert spec["body"] == body and spec["properties_raw"] == props
        p += spec["size"]
    assert p == end


def valid_buffer(n: int = 5):
    bodies = [bytes([i]) * (10 + 17 * i) for i in range(n)]
    props = [b"KEYS\x01k%d\x02" % i for i in range(n)]
    return encode(b"Fuzz", bodies, props, fields_for(n))


def test_detects_each_kind_of_damage():
    buf, end = valid_buffer(1)
    out = np.zeros(2, dtype=rec.RECORD_ROW)
    damages = {
        "magic": (5, 0x01),
        "size": (3, 0x04),
        "crc": (9, 0x01),
        "phys offset": (35, 0x01),
        "body length": (87, 0x01),
        "body": (90, 0x01),
        "topic length": (end - 12 - 5, 0x01),
        "sysflag v6 bit": (39, 0x10),
    }
    for name, (where, bit) in damages.items():
        bad = buf.copy()
        bad[where] ^= bit
        n, stop, code = rec.parse_records(bad, 0, end, 0, True, out)
        assert (n, stop, code) == (0, 0, rec.PARSE_CORRUPT), name
    # without the CRC check a body flip passes: recovery turns the check on
    bad = buf.copy()
    bad[90] ^= 1
    assert rec.parse_records(bad, 0, end, 0, False, out)[0] == 1


def test_blank_record_and_fit():
    buf = np.zeros(64, dtype=np.uint8)
    rec.write_blank(buf, 16, 48)
    out = np.zeros(1, dtype=rec.RECORD_ROW)
    assert rec.parse_records(buf, 16, 64, 0, True, out) == (0, 16, rec.PARSE_BLANK)
    sizes = np.array([30, 30, 30], dtype=np.int64)
    placed = np.full(3, -1, dtype=np.int64)
    assert rec.place_batch(sizes, 0, 98, 1000, placed) == (3, 90)  # 8 bytes stay for a blank
    assert list(placed) == [1000, 1030, 1060]
    assert rec.place_batch(sizes, 0, 97, 0, placed) == (2, 60)
    assert rec.place_batch(sizes, 0, 67, 0, placed) == (1, 30)
    assert rec.place_batch(sizes, 2, 37, 0, placed) == (0, 0)


def test_prefix_truncation_parses_exactly_the_complete_records():
    buf, end = valid_buffer(6)
    out = np.zeros(8, dtype=rec.RECORD_ROW)
    n_all, _, _ = rec.parse_records(buf, 0, end, 0, True, out)
    ends = np.cumsum(out["size"][:n_all])
    for cut in range(end + 1):
        torn = buf.copy()
        torn[cut:] = 0
        n, stop, code = rec.parse_records(torn, 0, end, 0, True, out)
        complete = int(np.searchsorted(ends, cut, "right"))
        assert n == complete, f"cut at {cut}"
        assert stop == (ends[complete - 1] if complete else 0)
        assert code in (rec.PARSE_END, rec.PARSE_CORRUPT)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(min_size=0, max_size=600), start=st.integers(0, 100), check=st.booleans())
def test_fuzzed_bytes_never_read_out_of_bounds(data, start, check):
    buf = np.frombuffer(data, np.uint8).copy()
    limit = len(data)
    start = min(start, limit)
    out = np.zeros(16, dtype=rec.RECORD_ROW)
    n, stop, _ = rec.parse_records(buf, start, limit, 0, check, out)
    assert start <= stop <= limit and 0 <= n <= 16
    for row in out[:n]:
        for s, ln in (("body_start", "body_len"), ("topic_start", "topic_len"),
                      ("props_start", "props_len")):  # fmt: skip
            assert row[s] >= 0 and row[s] + row[ln] <= limit


@settings(max_examples=200, deadline=None)
@given(where=st.integers(0, 10_000), flip=st.integers(1, 255))
def test_fuzzed_damage_to_valid_records(where, flip):
    buf, end = valid_buffer(4)
    where %= end
    buf[where] ^= flip
    out = np.zeros(8, dtype=rec.RECORD_ROW)
    n, stop, _ = rec.parse_records(buf, 0, end, 0, True, out)
    data = buf.tobytes()
    p = 0
    for i in range(n):  # whatever parses also validates under the independent decoder
        spec = decode_record(data, p)
        assert spec is not None and spec["size"] == out["size"][i]
        p += spec["size"]
    assert stop == p


def test_dirty_end():
    buf = np.zeros(100, dtype=np.uint8)
    buf[[10, 12, 40]] = 1
    assert rec.dirty_end(buf, 0, 20) == 13  # the run of zeros after 12 stops the scan
    assert rec.dirty_end(buf, 0, 50) == 41
    assert rec.dirty_end(buf, 50, 10) == 50


@pytest.mark.parametrize("text", ["", "a", "TagA", "héllo wörld", "日本語", "😀🎉", "x" * 100])
def test_python_java_hash_matches_the_reference(text):
    from shmq.codec.jhash import java_hash as shmq_hash

    assert shmq_hash(text) == java_hash(text)


def test_body_crc_batch_matches_zlib():
    from shmq.codec.crc32 import body_crc_batch

    bodies = [b"", b"a", b"Hello", bytes(range(256)) * 3]
    data = np.frombuffer(b"".join(bodies), np.uint8)
    offs = np.cumsum([0] + [len(b) for b in bodies]).astype(np.int64)
    out = np.empty(len(bodies), dtype=np.int64)
    body_crc_batch(data, offs, out)
    assert list(out) == [zlib.crc32(b) & 0x7FFFFFFF for b in bodies]


def test_topic_ids_number_distinct_topics_exactly():
    topics = [b"A", b"B", b"A", b"AB", b"BA", b"B", b"A"]
    parts = [encode(t, [b"x"], [b""], fields_for(1))[0] for t in topics]
    sizes = [rec.record_size(1, len(t), 0) for t in topics]
    buf = np.zeros(sum(sizes), dtype=np.uint8)
    base = 0
    for part, size in zip(parts, sizes, strict=True):
        record = part[:size].copy()
        record[28:36] = np.frombuffer(base.to_bytes(8, "big"), np.uint8)  # its own position
        buf[base : base + size] = record
        base += size
    out = np.zeros(len(topics), dtype=rec.RECORD_ROW)
    assert rec.parse_records(buf, 0, base, 0, False, out)[0] == len(topics)
    ids = np.empty(len(topics), dtype=np.int64)
    first = np.empty(len(topics), dtype=np.int64)
    assert rec.topic_ids(buf, out, ids, first) == 4
    assert list(ids) == [0, 1, 0, 2, 3, 1, 0]
    assert list(first[:4]) == [0, 1, 3, 4]


def test_batch_sizes_and_body_limits():
    sizes = np.empty(3, dtype=np.int64)
    offs = np.array([0, 5, 15, 16], dtype=np.int64)
    assert rec.batch_sizes(offs, 3, np.array([0, 4]), 100, sizes) == -1
    assert list(sizes) == [rec.record_size(n, 3, 4) for n in (5, 10, 1)]
    props = np.array([0, 1, 3, 6], dtype=np.int64)  # one property run per record
    assert rec.batch_sizes(offs, 200, props, 100, sizes) == -1
    assert list(sizes) == [rec.record_size(n, 200, p) for n, p in ((5, 1), (10, 2), (1, 3))]
    assert rec.batch_sizes(offs, 3, np.array([0, 0]), 9, sizes) == 1  # 10 bytes > 9
    assert rec.batch_sizes(np.array([0, 0, 1]), 3, np.array([0, 0]), 9, sizes[:2]) == 0


prop_bytes = st.lists(
    st.sampled_from([b"TAGS", b"KEYS", b"UNIQ_KEY", b"x", b"\x01", b"\x02", b"a b", b"\xc3\xa9"]),
    max_size=12,
).map(lambda parts: b"".join(parts) + b"\x02")


@settings(max_examples=300, deadline=None)
@given(props=prop_bytes)
def test_tag_code_and_index_flags_follow_decode_properties(props):
    """The parser reads properties as ``decode_properties`` does, malformed pairs too (pairs
    split at 0x02 first, a name and a value needed, a later pair wins)."""
    from shmq.codec.jhash import java_hash
    from shmq.properties import decode_properties

    buf = np.zeros(4096, dtype=np.uint8)
    fields = np.zeros(1, dtype=rec.ENCODE_ROW)
    fields["body_crc"][0] = -1
    raw = np.frombuffer(props, dtype=np.uint8)
    rec.encode_batch(buf, 0, 0, np.frombuffer(b"T", np.uint8), np.ones(1, np.uint8),
                     np.array([0, 1], np.int64), raw, np.array([0, len(props)], np.int64),
                     fields)  # fmt: skip
    rows = np.zeros(1, dtype=rec.RECORD_ROW)
    assert rec.parse_records(buf, 0, 4096, 0, True, rows)[0] == 1
    decoded = decode_properties(props)
    tags = decoded.get("TAGS")
    assert rows["tags_code"][0] == (java_hash(tags) if tags else 0)
    flags = (rec.INDEX_HAS_KEYS if "KEYS" in decoded else 0) | (
        rec.INDEX_HAS_UNIQ_KEY if "UNIQ_KEY" in decoded else 0
    )
    assert rows["index_flags"][0] == flags
