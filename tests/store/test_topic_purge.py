"""Deleting a topic's stored messages: the deletion record, the purge at dispatch, queue
offsets that go on from the next consume-queue file, restarts and replays."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from shmq.errors import InvalidTopicError
from shmq.names import DELETED_TOPIC_LOG
from shmq.store import GetStatus
from shmq.store.reader import VANISHED_CHECK_S, StoreReader
from shmq.store.results import parse_tag_filter

UNITS = 64  # SMALL_STORE's consume-queue files hold 64 units


def bodies(store, topic: str, queue_id: int) -> list[bytes]:
    got = store.get(topic, queue_id, store.consume_queues[(topic, queue_id)].min_offset, 256)
    return [m.body for m in got.messages]


def cq_files(root, topic: str, queue_id: int) -> list[int]:
    names = os.listdir(Path(root, "consumequeue", topic, str(queue_id)))
    return sorted(int(n) // 20 for n in names)


def fill(store, topic: str, count: int, queues: int = 2, tag: str = "old") -> None:
    for i in range(count):
        store.put(topic, i % queues, f"{tag}-{i}".encode())


@pytest.mark.parametrize("dispatch_between", [True, False])
def test_deleted_topic_starts_again_at_the_next_file(open_store, store_dir, dispatch_between):
    store = open_store()
    fill(store, "Gone", 150)  # 75 a queue: two files each
    fill(store, "Kept", 10)
    if dispatch_between:
        store.dispatch()
    phys = store.delete_topic("Gone")
    new = [store.put("Gone", 0, b"new-%d" % i) for i in range(3)]
    # the next life starts in a file of its own, after a blank unit that marks its start
    assert [r.queue_offset for r in new] == [2 * UNITS + 1, 2 * UNITS + 2, 2 * UNITS + 3]
    store.dispatch()  # in one batch when nothing was dispatched before: split at the record

    q0 = store.consume_queues[("Gone", 0)]
    assert (q0.min_offset, q0.max_offset) == (2 * UNITS + 1, 2 * UNITS + 4)
    assert bodies(store, "Gone", 0) == [b"new-0", b"new-1", b"new-2"]
    assert cq_files(store_dir, "Gone", 0) == [2 * UNITS]
    old = store.get("Gone", 0, 0, 10)
    assert old.status is GetStatus.OFFSET_TOO_SMALL and old.next_begin_offset == 2 * UNITS + 1
    # a queue with nothing new has the file of its next life, with the blank unit only
    q1 = store.consume_queues[("Gone", 1)]
    assert (q1.min_offset, q1.max_offset) == (2 * UNITS + 1, 2 * UNITS + 1)
    assert cq_files(store_dir, "Gone", 1) == [2 * UNITS]
    assert store.get("Gone", 1, 0, 10).messages == []
    assert bodies(store, "Kept", 0) == [b"old-%d" % i for i in range(0, 10, 2)]
    [entry] = store.get(DELETED_TOPIC_LOG, 0, 0, 10).messages
    assert entry.body == b"Gone" and entry.physical_offset == phys


def test_the_next_life_survives_restarts_and_replays(open_store, store_dir, tmp_path):
    store = open_store()
    fill(store, "Gone", 40)
    store.dispatch()
    saved = tmp_path / "before"
    shutil.copytree(Path(store_dir, "consumequeue", "Gone"), saved)
    store.delete_topic("Gone")
    store.put("Gone", 0, b"new-0")
    store.dispatch()
    store.close()

    again = open_store()  # a clean restart: offsets go on where the next life is
    assert again.put("Gone", 1, b"new-1").queue_offset == UNITS + 1
    assert again.put("Gone", 0, b"new-2").queue_offset == UNITS + 2
    again.dispatch()
    assert bodies(again, "Gone", 1) == [b"new-1"]  # its life had only the blank unit
    assert bodies(again, "Gone", 0) == [b"new-0", b"new-2"]
    again.close()

    # a crash before the purge: the old files are back and the abort marker is left;
    # recovery re-dispatches from before the deletion record and purges again
    shutil.rmtree(Path(store_dir, "consumequeue", "Gone"))
    shutil.copytree(saved, Path(store_dir, "consumequeue", "Gone"))
    Path(store_dir, "abort").touch()
    Path(store_dir, "checkpoint").unlink()
    replayed = open_store()
    assert replayed.recovery.abnormal
    assert bodies(replayed, "Gone", 0) == [b"new-0", b"new-2"]
    assert bodies(replayed, "Gone", 1) == [b"new-1"]
    assert cq_files(store_dir, "Gone", 0) == [UNITS]


def test_deleting_a_topic_without_messages_and_twice(open_store):
    store = open_store()
    store.delete_topic("Never")
    fill(store, "Twice", 4)
    store.delete_topic("Twice")
    store.delete_topic("Twice")  # a second life with no message: a third one starts
    assert store.put("Twice", 0, b"x").queue_offset == 2 * UNITS + 1
    store.dispatch()
    assert bodies(store, "Twice", 0) == [b"x"]
    assert store.get(DELETED_TOPIC_LOG, 0, 0, 10).max_offset == 3


def test_nobody_puts_to_the_deletion_log(open_store):
    store = open_store()
    with pytest.raises(InvalidTopicError, match="reserved"):
        store.put(DELETED_TOPIC_LOG, 0, b"Other")
    with pytest.raises(InvalidTopicError, match="reserved"):
        store.put_batch(DELETED_TOPIC_LOG, 0, [b"Other"])
    with pytest.raises(InvalidTopicError, match="reserved"):
        store.delete_topic(DELETED_TOPIC_LOG)
    with pytest.raises(InvalidTopicError, match="invalid"):
        store.delete_topic("no spaces")


@pytest.mark.parametrize("tags", [None, "a"])
def test_readers_of_another_process_skip_the_old_life_and_the_blank_unit(
    open_store, store_dir, tags
):
    store = open_store()
    fill(store, "Gone", 70, queues=1)  # two files
    store.dispatch()
    cfg = store.config
    reader = StoreReader(store_dir, cfg.mapped_file_size_commit_log, cfg.consume_queue_file_size)
    codes = parse_tag_filter(tags)
    try:
        old, next_offset = reader.read_queue("Gone", 0, 0, 70, 10, codes)
        assert len(old) == (0 if tags else 10)  # file 0 is mapped now
        store.delete_topic("Gone")
        for i in range(3):
            store.put("Gone", 0, b"new-%d" % i, tags="a")
        store.dispatch()
        high = store.consume_queues[("Gone", 0)].max_offset
        assert high == 2 * UNITS + 4
        time.sleep(VANISHED_CHECK_S)  # a reader drops deleted files within this
        # the files of the old life are gone: reading goes on a file at a time (4.9's
        # OFFSET_FOUND_NULL) to the next life's
        assert reader.read_queue("Gone", 0, 10, high, 10, codes) == ([], UNITS)
        assert reader.read_queue("Gone", 0, UNITS, high, 10, codes) == ([], 2 * UNITS)
        batch, _ = reader.read_queue_bulk("Gone", 0, 10, high, 10, codes)
        assert len(batch) == 0
        msgs, next_offset = reader.read_queue("Gone", 0, 2 * UNITS, high, 10, codes)
        assert [m.body for m in msgs] == [b"new-0", b"new-1", b"new-2"] and next_offset == high
        batch, next_offset = reader.read_queue_bulk("Gone", 0, 2 * UNITS, high, 10, codes)
        assert list(batch) == [b"new-0", b"new-1", b"new-2"] and next_offset == high
    finally:
        reader.close()
