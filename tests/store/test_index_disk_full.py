"""The index yields to the CommitLog on a short disk: a new index file (or more entry blocks)
is taken only while what stays free still holds the CommitLog's next file; otherwise keys go
unindexed, said in the log, and indexing takes up again once space is back. The store is on
a small tmpfs; the disk is filled by a file the test writes and freed by deleting it."""

from __future__ import annotations

import logging
import os
import time

import pytest

from e2e_helpers import small_tmpfs
from shmq.store import MessageStore
from shmq.store.index.service import PAUSED_RETRY_S
from shmq.store.results import PutStatus

TOPIC = "Keys"
FILE = 1 << 20  # CommitLog file size
SLOTS = 100_000  # an index file of 400 KB of hash slots: more than the disk keeps spare
ENTRIES = 100


def fill(disk: str, leave: int) -> None:
    """Write a filler file until only ``leave`` bytes are free."""
    st = os.statvfs(disk)
    with open(os.path.join(disk, "filler"), "ab") as f:
        f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - leave))


def put_keyed(store: MessageStore, first: int, count: int) -> None:
    for i in range(first, first + count):
        r = store.put(TOPIC, 0, b"x" * 100, keys=[f"k{i}"])
        assert r.status is PutStatus.PUT_OK, r


@pytest.fixture
def disk(tmp_path):
    with small_tmpfs(tmp_path, "6m") as mnt:
        yield mnt


def test_a_new_index_file_does_not_take_the_commitlogs_next_file(disk, caplog):
    caplog.set_level(logging.INFO, logger="shmq.store.index")
    store = MessageStore.open(
        os.path.join(disk, "store"),
        mapped_file_size_commit_log=FILE,
        mapped_file_size_consume_queue=20 * 1000,
        max_hash_slot_num=SLOTS,
        max_index_num=ENTRIES,
        preallocate_mapped_file_enable=False,
        disk_space_warning_level_ratio=99,  # a slow run's 10 s check must not refuse puts
    )
    try:
        put_keyed(store, 0, ENTRIES - 1)  # the first index file fills up
        store.dispatch()
        assert [m.body for m in store.query_by_key(TOPIC, "k5")] == [b"x" * 100]
        fill(disk, leave=FILE + 3 * SLOTS)  # the CommitLog's next file, but not it and an index
        put_keyed(store, ENTRIES, 20)
        store.dispatch()  # the index would roll here: it must not take the space
        # on past the first CommitLog file: its next file still finds room
        for _ in range(FILE // 1000 + 10):
            assert store.put(TOPIC, 0, b"y" * 1000).status is PutStatus.PUT_OK
        assert store.stats()["commitlog_files"] == 2
        assert store.query_by_key(TOPIC, f"k{ENTRIES + 5}") == []
        assert "not indexed" in caplog.text, caplog.text
        os.unlink(os.path.join(disk, "filler"))
        time.sleep(PAUSED_RETRY_S)  # the index looks for room again after this
        put_keyed(store, 10_000, 1)
        store.dispatch()  # space is back: a new index file, keys indexed again
        assert [m.keys for m in store.query_by_key(TOPIC, "k10000")] == [["k10000"]]
        assert "indexed again" in caplog.text, caplog.text
        assert [m.body for m in store.query_by_key(TOPIC, "k5")] == [b"x" * 100]
    finally:
        store.close()
