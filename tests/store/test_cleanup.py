"""Cleanup policy: what goes, when, and what must never go."""

from __future__ import annotations

import os
import time

from shmq.store import GetStatus


def fill(store, n=400, size=500):
    for i in range(n):
        store.put("C", i % 2, bytes([i % 256]) * size, keys=f"k{i}")
    store.dispatch()
    store.flush()


def age_files(directory: str, hours: float) -> None:
    past = time.time() - hours * 3600
    for name in os.listdir(directory):
        os.utime(os.path.join(directory, name), (past, past))


def local_hour_epoch(hour: int) -> float:
    t = time.localtime()
    return time.mktime((t.tm_year, t.tm_mon, t.tm_mday, hour, 30, 0, 0, 0, -1))


def test_nothing_is_deleted_outside_delete_when_with_free_disk(open_store):
    store = open_store(delete_when="04")
    fill(store)
    age_files(store.commitlog.queue.directory, 100)
    report = store.clean_expired(now=local_hour_epoch(10), disk_used=0.10)
    assert report["commitlog_files"] == 0
    assert not report["time_to_delete"] and not report["space_to_delete"]


def test_expired_files_go_at_delete_when_but_never_the_current_one(open_store):
    store = open_store(delete_when="03;04", file_reserved_time=72)
    fill(store)
    files_before = len(store.commitlog.queue.files)
    age_files(store.commitlog.queue.directory, 100)
    report = store.clean_expired(now=local_hour_epoch(4), disk_used=0.10)
    assert report["commitlog_files"] == min(files_before - 1, 10)
    assert len(store.commitlog.queue.files) >= 1
    assert store.min_physical_offset == store.commitlog.queue.files[0].file_from_offset > 0
    # the newest data still reads back; old offsets are corrected, not errors
    last = store.get_max_offset_in_queue("C", 0) - 1
    assert store.get("C", 0, last, 1).messages[0].body[0] == (2 * last) % 256
    low = store.get_min_offset_in_queue("C", 0)
    assert low > 0
    too_small = store.get("C", 0, 0, 1)
    assert too_small.status is GetStatus.OFFSET_TOO_SMALL and too_small.next_begin_offset == low
    assert store.get("C", 0, low, 1).status is GetStatus.FOUND


def test_young_files_stay_at_delete_when(open_store):
    store = open_store()
    fill(store)
    report = store.clean_expired(now=local_hour_epoch(4), disk_used=0.10)
    assert report["time_to_delete"] and report["commitlog_files"] == 0


def test_disk_pressure_deletes_old_files_any_hour(open_store):
    store = open_store()
    fill(store)
    age_files(store.commitlog.queue.directory, 100)
    report = store.clean_expired(now=local_hour_epoch(12), disk_used=0.80)
    assert report["space_to_delete"] and not report["clean_immediately"]
    assert report["commitlog_files"] > 0


def test_disk_almost_full_deletes_regardless_of_age(open_store):
    store = open_store(delete_files_batch_max=2)
    fill(store)
    report = store.clean_expired(now=local_hour_epoch(12), disk_used=0.88)
    assert report["clean_immediately"] and report["commitlog_files"] == 2


def test_stop_at_first_file_that_must_stay(open_store):
    store = open_store()
    fill(store)
    files = store.commitlog.queue.files
    age_files(store.commitlog.queue.directory, 100)
    young = files[1].path
    os.utime(young, None)
    report = store.clean_expired(now=time.time(), disk_used=0.80)
    assert report["commitlog_files"] == 1


def test_consume_queue_and_index_files_below_min_offset_go(open_store):
    store = open_store(max_index_num=64)
    fill(store, n=600)
    cq = store.consume_queues[("C", 0)]
    cq_files = len(cq.queue.files)
    index_files = len(store.index.files)
    assert cq_files > 2 and index_files > 2
    age_files(store.commitlog.queue.directory, 100)
    report = store.clean_expired(now=time.time(), disk_used=0.88)
    assert report["consume_queue_files"] > 0 and report["index_files"] > 0
    assert len(cq.queue.files) < cq_files
    assert len(store.index.files) < index_files
    min_phys = store.min_physical_offset
    first = cq.unit(cq.min_offset)
    assert first is not None and first[0] >= min_phys
    # everything still listed by the queue reads back
    got = store.get("C", 0, cq.min_offset, 32)
    assert got.status is GetStatus.FOUND


def test_cleanup_survives_reopen(open_store, store_dir):
    store = open_store()
    fill(store)
    store.clean_expired(now=time.time(), disk_used=0.88)
    low = store.get_min_offset_in_queue("C", 0)
    high = store.get_max_offset_in_queue("C", 0)
    store.close()
    again = open_store()
    assert again.get_min_offset_in_queue("C", 0) == low
    assert again.get_max_offset_in_queue("C", 0) == high
    assert again.get("C", 0, low, 1).status is GetStatus.FOUND
