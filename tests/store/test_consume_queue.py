"""ConsumeQueue: units, idempotent writes, blank padding, recovery, truncation and cleanup."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from shmq.codec.consume_queue import CQ_UNIT_DTYPE
from shmq.store.consume_queue import ConsumeQueue


def arrays(first, count, phys_start=0, size=100, tag=5):
    q = np.arange(first, first + count, dtype=np.int64)
    phys = phys_start + np.arange(count, dtype=np.int64) * size
    return q, phys, np.full(count, size, np.int64), np.full(count, tag, np.int64)


def make(tmp_path, units_per_file=10):
    cq = ConsumeQueue(str(tmp_path), "T", 3, 20 * units_per_file)
    cq.load()
    return cq


def test_units_layout_and_spanning_files(tmp_path):
    cq = make(tmp_path)
    assert cq.put(*arrays(0, 25)) == 25
    assert (cq.min_offset, cq.max_offset) == (0, 25)
    assert len(cq.queue.files) == 3
    assert cq.unit(12) == (1200, 100, 5)
    assert cq.unit(25) is None
    raw = Path(cq.queue.files[1].path).read_bytes()
    unit = np.frombuffer(raw, dtype=CQ_UNIT_DTYPE)[0]
    assert (int(unit["offset"]), int(unit["size"]), int(unit["tags_code"])) == (1000, 100, 5)
    _, view = cq.units(8, 10)
    assert view.size == 2  # a read stays within one file
    cq.close()


def test_put_is_idempotent(tmp_path):
    cq = make(tmp_path)
    cq.put(*arrays(0, 5))
    assert cq.put(*arrays(0, 5)) == 0
    assert cq.put(*arrays(3, 4, phys_start=300)) == 2  # only the new tail
    assert cq.max_offset == 7
    cq.close()


def test_first_unit_past_zero_pads_with_blank_units(tmp_path):
    cq = make(tmp_path)
    cq.put(*arrays(23, 2, phys_start=5000))
    assert (cq.min_offset, cq.max_offset) == (23, 25)
    assert len(cq.queue.files) == 1 and cq.queue.files[0].file_from_offset == 400
    _, view = cq.units(20, 3)
    assert list(view["size"]) == [0x7FFFFFFF] * 3  # RocketMQ's blank units
    assert cq.unit(22) is None  # below the min offset: never handed out
    cq.close()


def test_recover_truncates_after_last_valid_unit(tmp_path):
    cq = make(tmp_path)
    cq.put(*arrays(0, 14))
    mf = cq.queue.files[1]
    mf.buf[3 * 20 + 8 : 3 * 20 + 12] = 0  # unit 13 gets size 0: the valid data ends there
    cq.close()
    again = make(tmp_path)
    again.recover()
    assert again.max_offset == 13
    assert again.max_physic_offset == 1300
    assert not again.queue.files[1].buf[3 * 20 :].any()
    again.close()


def test_truncate_dirty_drops_units_past_the_commitlog(tmp_path):
    cq = make(tmp_path)
    cq.put(*arrays(0, 25))
    cq.truncate_dirty(1250)  # units pointing at 1300+ go; 1200 stays (it starts before)
    assert cq.max_offset == 13 and len(cq.queue.files) == 2
    assert cq.max_physic_offset == 1300
    cq.truncate_dirty(0)
    assert cq.max_offset == 0
    cq.close()


def test_delete_expired_and_min_offset(tmp_path):
    cq = make(tmp_path)
    cq.put(*arrays(0, 35))
    assert cq.delete_expired(2150) == 2  # files ending with 900 and 1900 go; 2900 stays
    assert cq.min_offset == 22 and cq.max_offset == 35
    assert cq.unit(21) is None and cq.unit(22) == (2200, 100, 5)
    cq.close()
