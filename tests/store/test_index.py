"""IndexFile and IndexService: RocketMQ's byte layout, chains, rolling, reload and cleanup."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shmq.codec.jhash import java_hash
from shmq.errors import CorruptStoreError
from shmq.store.index.file import IndexFile, index_file_name, index_file_size
from shmq.store.index.service import IndexService, key_hash

SLOTS, ENTRIES = 8, 6


def test_key_hash_matches_the_spec_example():
    assert java_hash("TopicTest#OrderID188") == -1231271670
    assert key_hash("TopicTest#OrderID188") == 1231271670
    assert key_hash("TopicTest#OrderID188") % 5_000_000 == 1271670  # slot at byte 5086720
    assert index_file_size(5_000_000, 20_000_000) == 420_000_040


def test_layout_of_header_slots_and_entries(tmp_path):
    f = IndexFile(str(tmp_path / index_file_name(1_700_000_000_000)), SLOTS, ENTRIES)
    assert f.index_count == 1  # entry 0 is never used
    assert f.put_key(13, 1000, 1_700_000_005_000)
    assert f.put_key(5, 2000, 1_700_000_009_999)  # same slot (13 % 8 == 5 % 8)
    f.flush()
    raw = Path(f.path).read_bytes()
    assert len(raw) == 40 + SLOTS * 4 + ENTRIES * 20
    begin, end, begin_phy, end_phy, slot_count, count = struct.unpack_from(">qqqqii", raw)
    assert (begin, end, begin_phy, end_phy) == (1_700_000_005_000, 1_700_000_009_999, 1000, 2000)
    assert (slot_count, count) == (1, 3)
    assert struct.unpack_from(">i", raw, 40 + 5 * 4) == (2,)  # newest entry of slot 5
    e1 = struct.unpack_from(">iqii", raw, 40 + SLOTS * 4 + 20)
    e2 = struct.unpack_from(">iqii", raw, 40 + SLOTS * 4 + 40)
    assert e1 == (13, 1000, 0, 0)
    assert e2 == (5, 2000, 4, 1)  # 4.999 s after begin, previous entry 1
    f.close()


def test_chain_walk_filters_hash_and_time(tmp_path):
    f = IndexFile(str(tmp_path / index_file_name(0)), SLOTS, ENTRIES)
    for i, (h, ts) in enumerate([(1, 10_000), (9, 11_000), (1, 12_000), (1, 13_000)]):
        f.put_key(h, 100 * i, ts)
    assert f.select_phy_offsets(1, 10, 0, 20_000) == [300, 200, 0]
    assert f.select_phy_offsets(9, 10, 0, 20_000) == [100]
    assert f.select_phy_offsets(1, 2, 0, 20_000) == [300, 200]
    assert f.select_phy_offsets(1, 10, 11_500, 12_500) == [200]
    assert f.select_phy_offsets(4, 10, 0, 20_000) == []
    assert f.is_time_matched(0, 10_500) and not f.is_time_matched(14_000, 15_000)
    f.close()


def test_full_file_refuses_and_service_rolls(tmp_path):
    full: list[int] = []
    svc = IndexService(str(tmp_path), SLOTS, ENTRIES, on_file_full=full.append)
    for i in range(12):
        svc.build_index("T", [f"k{i}"], None, 100 * i, 1000 + i)
    assert len(svc.files) == 3  # 5 usable entries per file
    assert full == [1004, 1009]
    second = svc.files[1]
    assert second.begin_phy_offset == 500 and second.begin_timestamp == 1005
    for i in range(12):
        assert svc.query("T", f"k{i}", 10, 0, 10_000) == [100 * i]
    svc.close()


def test_uniq_key_and_keys_and_idempotent_rebuild(tmp_path):
    svc = IndexService(str(tmp_path), 64, 64)
    svc.build_index("T", ["a", "", "b"], "U1", 500, 1000)
    assert svc.stats()["entries"] == 3
    svc.build_index("T", ["a"], "U1", 400, 1000)  # before the end offset: already indexed
    assert svc.stats()["entries"] == 3
    assert svc.query("T", "U1", 10, 0, 2000) == [500]
    assert svc.query("T", "b", 10, 0, 2000) == [500]
    assert svc.query("Other", "b", 10, 0, 2000) == []
    svc.close()


def test_query_names_each_record_once(tmp_path):
    svc = IndexService(str(tmp_path), SLOTS, ENTRIES)
    for i in range(5):
        svc.build_index("T", ["k"], None, 100 * i, 1000 + i)
    svc.build_index("T", ["x"], None, 600, 1006)  # rolls: the next file starts empty
    svc.files[-1].put_key(key_hash("T#k"), 400, 1007)  # as a crash re-dispatch could
    assert svc.query("T", "k", 10, 0, 9999) == [400, 300, 200, 100, 0]
    svc.close()


def test_query_is_capped_and_newest_first(tmp_path):
    svc = IndexService(str(tmp_path), 16, 200, max_msgs_num_batch=4)
    for i in range(10):
        svc.build_index("T", ["same"], None, i * 10, 1000)
    assert svc.query("T", "same", 100, 0, 5000) == [90, 80, 70, 60]
    svc.close()


def test_reload_and_abnormal_exit_rule(tmp_path):
    svc = IndexService(str(tmp_path), SLOTS, ENTRIES)
    for i in range(8):
        svc.build_index("T", [f"k{i}"], None, 100 * i, 1000 + i)
    svc.flush()
    svc.close()
    normal = IndexService(str(tmp_path), SLOTS, ENTRIES)
    normal.load(True, 0)
    assert len(normal.files) == 2 and normal.query("T", "k7", 5, 0, 9999) == [700]
    normal.close()
    crashed = IndexService(str(tmp_path), SLOTS, ENTRIES)
    crashed.load(False, 1004)  # the checkpoint covers only the first (full) file
    assert len(crashed.files) == 1 and crashed.query("T", "k7", 5, 0, 9999) == []
    crashed.close()


def test_delete_expired_never_the_last(tmp_path):
    svc = IndexService(str(tmp_path), SLOTS, ENTRIES)
    for i in range(12):
        svc.build_index("T", [f"k{i}"], None, 100 * i, 1000 + i)
    assert svc.delete_expired(450) == 1  # first file ends at 400
    assert svc.delete_expired(10**9) == 1  # the last file always stays
    assert len(svc.files) == 1
    svc.close()


def test_wrong_size_file_is_an_error(tmp_path):
    path = tmp_path / index_file_name(0)
    path.write_bytes(b"\0" * 10)
    with pytest.raises(CorruptStoreError, match="index file"):
        IndexFile(str(path), SLOTS, ENTRIES)
    svc = IndexService(str(tmp_path), SLOTS, ENTRIES)
    with pytest.raises(CorruptStoreError):
        svc.load(True, 0)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.text(min_size=1, max_size=12), st.integers(0, 50)), max_size=60))
def test_every_key_is_found_and_no_other_hash_is_returned(tmp_path_factory, items):
    root = tmp_path_factory.mktemp("idx")
    svc = IndexService(str(root), 16, 8, max_msgs_num_batch=1000)
    wanted: dict[str, set[int]] = {}
    for phy, (key, second) in enumerate(items):
        key = key.replace(" ", "_")
        svc.build_index("T", [key], None, phy, 1_000_000 + second * 1000)
        wanted.setdefault(key, set()).add(phy)
    by_offset = {phy: key for phy, (key, _) in enumerate(items)}
    for key, offsets in wanted.items():
        got = svc.query("T", key, 1000, 0, 2_000_000)
        assert offsets <= set(got)
        assert all(
            key_hash(f"T#{by_offset[p].replace(' ', '_')}") == key_hash(f"T#{key}") for p in got
        )
    svc.close()
    for name in os.listdir(root):
        os.unlink(root / name)


key_text = st.text(
    st.characters(exclude_characters="\x00\x01\x02 ", exclude_categories=("Cs",)),
    min_size=1,
    max_size=10,
)


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(
        st.tuples(
            st.none() | key_text,  # UNIQ_KEY
            st.lists(key_text, max_size=4),  # KEYS
            st.integers(1, 3),  # spaces between keys (empty tokens are no keys)
            st.integers(0, 3000),  # store time offset, ms
        ),
        min_size=1,
        max_size=40,
    ),
    topic=st.from_regex(r"[A-Za-z0-9_%|-]{1,20}", fullmatch=True),
)
def test_the_batch_index_kernel_writes_what_one_record_at_a_time_writes(
    tmp_path_factory, records, topic
):
    """Reput indexes a whole scan batch with one kernel call per file; the files must be
    byte for byte those of ``build_index`` called per record with the decoded keys."""
    import numpy as np

    from shmq.codec import record as rec
    from shmq.properties import decode_properties

    props = []
    for uniq, keys, gap, _ in records:
        raw = b""
        if uniq is not None:
            raw += b"UNIQ_KEY\x01" + uniq.encode() + b"\x02"
        if keys:
            raw += b"KEYS\x01" + (" " * gap).join(keys).encode() + b"\x02"
        props.append(raw)
    n = len(records)
    buf = np.zeros(1 << 16, dtype=np.uint8)
    props_offs = np.zeros(n + 1, dtype=np.int64)
    np.cumsum([len(p) for p in props], out=props_offs[1:])
    fields = np.zeros(n, dtype=rec.ENCODE_ROW)
    fields["store_ts"] = [1_700_000_000_000 + r[3] for r in records]
    fields["body_crc"] = -1
    rec.encode_batch(buf, 0, 1 << 30, np.frombuffer(topic.encode(), np.uint8),
                     np.full(n, 7, dtype=np.uint8), np.arange(n + 1, dtype=np.int64),
                     np.frombuffer(b"".join(props), np.uint8), props_offs, fields)  # fmt: skip
    rows = np.zeros(n, dtype=rec.RECORD_ROW)
    count, _, _ = rec.parse_records(buf, 0, buf.shape[0], 1 << 30, True, rows)
    assert count == n
    root = tmp_path_factory.mktemp("batch")
    one_by_one = IndexService(str(root / "python"), 16, 12)
    batch = IndexService(str(root / "kernel"), 16, 12)
    for i in np.flatnonzero(rows["index_flags"] != 0).tolist():  # as dispatch did
        values = decode_properties(props[i])
        keys = [k for k in values.get("KEYS", "").split(" ") if k]
        phy = (1 << 30) + int(rows["pos"][i])
        one_by_one.build_index(topic, keys, values.get("UNIQ_KEY"), phy, int(fields["store_ts"][i]))
    batch.build_index_batch(buf, rows, np.flatnonzero(rows["index_flags"] != 0), 1 << 30)
    assert len(batch.files) == len(one_by_one.files)
    for a, b in zip(one_by_one.files, batch.files, strict=True):
        assert a.buf.tobytes() == b.buf.tobytes()
    one_by_one.close()
    batch.close()
