"""Recovery properties: any torn tail or corrupted tail byte recovers to exactly the longest
valid prefix, judged by a decoder written here from the spec (not shmq's own), and the
consume queues and index agree with it. Both the normal and the abnormal (abort marker) path."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shmq.store import GetStatus, MessageStore
from spec_decoder import walk_commitlog as spec_walk

FILE_SIZE = 4096
SMALL = {
    "mapped_file_size_commit_log": FILE_SIZE,
    "mapped_file_size_consume_queue": 20 * 16,
    "max_hash_slot_num": 64,
    "max_index_num": 32,
    "preallocate_mapped_file_enable": False,
}
TOPIC_RE = re.compile(r"[%|a-zA-Z0-9_-]{1,127}")


def dispatched(rec: dict) -> bool:
    return (
        rec["sysflag"] & 0xC in (0, 0x8)
        and TOPIC_RE.fullmatch(rec["topic"]) is not None
        and 0 <= rec["queue_id"] <= 65535
    )


def visible(store: MessageStore) -> dict[tuple[str, int], list[tuple[int, bytes]]]:
    seen: dict[tuple[str, int], list[tuple[int, bytes]]] = {}
    for topic, qid in list(store.consume_queues):
        offset = store.get_min_offset_in_queue(topic, qid)
        while True:
            got = store.get(topic, qid, offset, 32)
            if got.status is not GetStatus.FOUND:
                break
            seen.setdefault((topic, qid), []).extend(
                (m.physical_offset, m.body) for m in got.messages
            )
            offset = got.next_begin_offset
    return seen


messages = st.lists(
    st.tuples(st.integers(0, 2), st.integers(1, 700), st.booleans()), min_size=3, max_size=40
)


def write_store(root: str, spec: list[tuple[int, int, bool]]) -> None:
    with MessageStore.open(root, **SMALL) as store:
        for i, (qid, size, keyed) in enumerate(spec):
            body = bytes([i % 256]) * size
            store.put("Rec", qid, body, tags=f"t{i % 3}", keys=[f"key{i}"] if keyed else ())


def check_recovered(root: str, abnormal: bool, damaged: int | None = None) -> None:
    """``damaged``: the offset of a record whose bytes were changed. If it still validates
    (a change in a field no check covers, as in RocketMQ), whether it shows depends on what
    was dispatched before; every other record must show exactly as the oracle says."""
    cl_dir = os.path.join(root, "commitlog")
    oracle, oracle_end = spec_walk(cl_dir)
    if abnormal:
        Path(root, "abort").touch()
    with MessageStore.open(root, **SMALL) as store:
        assert store.recovery.abnormal == abnormal
        assert store.max_physical_offset == oracle_end
        expected: dict[tuple[str, int], list[tuple[int, bytes]]] = {}
        for rec in oracle:
            if dispatched(rec):
                expected.setdefault((rec["topic"], rec["queue_id"]), []).append(
                    (rec["phys"], rec["body"])
                )
        seen = visible(store)
        if damaged is not None:
            original = {rec["phys"]: rec["body"] for rec in oracle}
            for key in list(seen):
                shown = [(p, b) for p, b in seen[key] if p != damaged]
                assert all(original.get(p) == b for p, b in seen[key] if p == damaged)
                seen[key] = shown
            for key in list(expected):
                expected[key] = [(p, b) for p, b in expected[key] if p != damaged]
            seen = {k: v for k, v in seen.items() if v}
            expected = {k: v for k, v in expected.items() if v}
        assert seen == expected
        # A damaged record that still validates may carry a wrong store timestamp (no CRC
        # covers it, as in RocketMQ); as the index's first entry it then sets the file's
        # begin time and IndexFile.putKey clamps later entries' time offsets to it, so other
        # keys may fall outside a query's time range, exactly as in RocketMQ.
        index_trusted = damaged is None or all(rec["phys"] != damaged for rec in oracle)
        for rec in oracle:
            msg = store.view_by_offset(rec["phys"])
            assert msg is not None and msg.body == rec["body"]
            keyed = b"KEYS\x01" in rec["properties_raw"] and index_trusted
            if dispatched(rec) and keyed and rec["topic"] == "Rec":
                key = rec["properties_raw"].split(b"KEYS\x01")[1].split(b"\x02")[0].decode()
                assert rec["phys"] in [m.physical_offset for m in store.query_by_key("Rec", key)]
        # the tail past the valid end holds nothing that a later recovery could resurrect
        assert spec_walk(cl_dir)[1] == oracle_end
        # and the store accepts new data right after it
        r = store.put("Rec", 0, b"after")
        assert r.physical_offset >= oracle_end
        assert store.view(r.msg_id).body == b"after"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=messages, cut=st.floats(0, 1), abnormal=st.booleans())
def test_torn_tail_recovers_the_longest_valid_prefix(spec, cut, abnormal):
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "store")
        write_store(root, spec)
        cl_dir = os.path.join(root, "commitlog")
        names = sorted(os.listdir(cl_dir))
        total = len(names) * FILE_SIZE
        x = int(cut * total)
        written, _ = spec_walk(cl_dir)
        complete = [r["phys"] for r in written if r["phys"] + r["size"] <= x]
        for name in names:
            start = int(name)
            path = Path(cl_dir, name)
            if start > x:
                path.unlink()
            elif x < start + FILE_SIZE:
                data = bytearray(path.read_bytes())
                data[x - start :] = bytes(FILE_SIZE - (x - start))
                path.write_bytes(bytes(data))
        # a torn tail keeps exactly the records that were complete before the cut
        assert [r["phys"] for r in spec_walk(cl_dir)[0]] == complete
        check_recovered(root, abnormal)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    spec=messages,
    which=st.integers(1, 3),
    where=st.floats(0, 1, exclude_max=True),
    flip=st.integers(1, 255),
    abnormal=st.booleans(),
)
def test_corrupt_tail_byte_recovers_the_longest_valid_prefix(spec, which, where, flip, abnormal):
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "store")
        write_store(root, spec)
        cl_dir = os.path.join(root, "commitlog")
        records, _ = spec_walk(cl_dir)
        target = records[-min(which, len(records))]
        pos = target["phys"] + int(where * target["size"])
        name = f"{pos - pos % FILE_SIZE:020d}"
        path = Path(cl_dir, name)
        data = bytearray(path.read_bytes())
        data[pos % FILE_SIZE] ^= flip
        path.write_bytes(bytes(data))
        check_recovered(root, abnormal, damaged=target["phys"])


def test_a_normal_restart_reads_only_the_last_three_commitlog_files(tmp_path):
    """Restart time must not grow with history: a clean shutdown's recovery walks the last
    three CommitLog files (RocketMQ's recoverNormally), however many there are."""
    root = str(tmp_path / "store")
    opts = {"mapped_file_size_commit_log": 64 * 1024, "mapped_file_size_consume_queue": 20 * 64}
    with MessageStore.open(root, **opts) as store:
        for _ in range(8):
            store.put_batch("History", 0, [b"h" * 1000] * 60)
        store.dispatch()
        files = sorted(os.listdir(os.path.join(root, "commitlog")))
    assert len(files) >= 8
    with MessageStore.open(root, **opts) as store:
        assert not store.recovery.abnormal
        assert store.recovery.scanned_from == int(files[-3])
        assert len(store.get("History", 0, 0, max_count=32).messages) == 32
