"""A store written by shmq is laid out and encoded exactly as the spec says: the independent
decoder in ``tests/spec_decoder.py`` reads back the CommitLog, consume queues, index files
and checkpoint."""

from __future__ import annotations

import os

from shmq.store import MessageStore
from spec_decoder import (
    java_hash,
    read_checkpoint,
    read_consume_queue,
    read_index_files,
    walk_commitlog,
)

SIZES = {
    "mapped_file_size_commit_log": 8192,
    "mapped_file_size_consume_queue": 20 * 32,
    "max_hash_slot_num": 32,
    "max_index_num": 40,
    "preallocate_mapped_file_enable": False,
}


def test_files_decode_independently(store_dir):
    sent = []
    with MessageStore.open(store_dir, **SIZES) as store:
        for i in range(120):
            topic = "Interop" if i % 7 else "Other"
            kwargs = {"tags": f"Tag{i % 3}", "keys": [f"key-{i}", f"alt-{i}"]}
            if i % 5 == 0:
                kwargs["properties"] = {"color": "blue", "n": str(i)}
            r = store.put(topic, i % 4, os.urandom(1 + i * 13 % 400), **kwargs)
            sent.append((topic, i % 4, r))
        batch = store.put_batch("Interop", 3, [b"b%d" % i for i in range(50)], tags="Bulk")
        store.dispatch()
        expected_bodies = {
            r.physical_offset: store.view_by_offset(r.physical_offset).body for _, _, r in sent
        }
    # CommitLog: every record valid, contiguous, in the spec's encoding
    records, end = walk_commitlog(os.path.join(store_dir, "commitlog"))
    assert len(records) == 120 + 50
    assert len(os.listdir(os.path.join(store_dir, "commitlog"))) > 5  # rolled, with blanks
    by_phys = {r["phys"]: r for r in records}
    for topic, qid, r in sent:
        rec = by_phys[r.physical_offset]
        assert (rec["topic"], rec["queue_id"], rec["queue_offset"]) == (topic, qid, r.queue_offset)
        assert rec["body"] == expected_bodies[r.physical_offset]
        assert rec["offset_msg_id"] == r.msg_id
        assert rec["store_timestamp"] == r.store_timestamp
        assert rec["magic"] == 0xDAA320A7 and rec["sysflag"] == 0
        assert rec["properties"]["TAGS"].startswith("Tag")
        assert rec["properties"]["KEYS"].startswith("key-")
    assert [by_phys[int(p)]["body"] for p in batch.physical_offsets] == [
        b"b%d" % i for i in range(50)
    ]
    assert end == records[-1]["phys"] + records[-1]["size"]
    # ConsumeQueue: units point at the records of their queue, with the Java tag hash
    for qid in range(4):
        units = read_consume_queue(store_dir, "Interop", qid)
        mine = [r for r in records if r["topic"] == "Interop" and r["queue_id"] == qid]
        assert [(u.offset, u.size) for u in units] == [(r["phys"], r["size"]) for r in mine]
        assert [u.tags_code for u in units] == [java_hash(r["properties"]["TAGS"]) for r in mine]
        assert [r["queue_offset"] for r in mine] == list(range(len(mine)))
    # IndexFile: every key and alt key found through the slot chains, across rolled files
    views = read_index_files(store_dir, SIZES["max_hash_slot_num"], SIZES["max_index_num"])
    assert len(views) >= 6
    for topic, _, r in sent:
        i = next(n for n, (_, _, rr) in enumerate(sent) if rr is r)
        for key in (f"key-{i}", f"alt-{i}"):
            hits = [p for v in views for p in v.lookup(f"{topic}#{key}")]
            assert r.physical_offset in hits
    # Checkpoint: written, and not ahead of the data
    cp = read_checkpoint(os.path.join(store_dir, "checkpoint"))
    assert 0 < cp["physic"] <= records[-1]["store_timestamp"]
    assert 0 < cp["logics"] <= records[-1]["store_timestamp"]
    assert not os.path.exists(os.path.join(store_dir, "abort"))
