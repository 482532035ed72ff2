"""MappedFile and MappedFileQueue: naming, sizes, flush, warm-up, truncation, pre-allocation."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from shmq.errors import CorruptStoreError
from shmq.store.mapped_file import (
    PAGE_SIZE,
    RESERVE_STEP,
    MappedFile,
    file_name_to_offset,
    offset_to_file_name,
)
from shmq.store.mapped_file_queue import PREFAULT_AHEAD, PREFAULT_TOP_UP, MappedFileQueue


def test_names_are_20_digit_offsets():
    assert offset_to_file_name(1073741824) == "00000000001073741824"
    assert file_name_to_offset("00000000001073741824") == 1073741824
    with pytest.raises(CorruptStoreError, match="20-digit"):
        file_name_to_offset("123")


def test_created_at_full_size_and_mapped_whole(tmp_path):
    mf = MappedFile(str(tmp_path / offset_to_file_name(8192)), 8192)
    assert os.path.getsize(mf.path) == 8192 and mf.buf.shape == (8192,)
    assert mf.file_from_offset == 8192 and mf.file_end_offset == 16384
    mf.buf[10:13] = (1, 2, 3)
    mf.wrote_position = 13
    mf.flush(0, 13)
    assert mf.flushed_position == 13
    mf.warm(lock=True)  # touches pages, madvise, mlock where allowed: must not fail
    mf.close()
    assert Path(mf.path).read_bytes()[10:13] == b"\x01\x02\x03"


def test_write_at_writes_parts_back_to_back_seen_through_the_mapping(tmp_path, monkeypatch):
    mf = MappedFile(str(tmp_path / offset_to_file_name(0)), 8192)
    data = memoryview(b"abcdefghij")
    real = os.pwritev
    # a pwritev that writes at most 3 bytes of the first part each time
    monkeypatch.setattr(os, "pwritev", lambda fd, parts, pos: real(fd, [parts[0][:3]], pos))
    assert mf.write_at(100, [data[:4], data[4:]]) == 110  # short writes: goes on with the rest
    monkeypatch.setattr(os, "pwritev", real)
    assert bytes(mf.buf[100:110]) == b"abcdefghij"
    with pytest.raises(ValueError, match="cannot write \\[8190, 8200\\)"):
        mf.write_at(8190, [data])
    mf.close()
    assert Path(mf.path).read_bytes()[100:110] == b"abcdefghij"


def test_wrong_size_file_is_refused(tmp_path):
    path = tmp_path / offset_to_file_name(0)
    path.write_bytes(b"x" * 100)
    with pytest.raises(CorruptStoreError, match="100 bytes; a store file here must be exactly"):
        MappedFile(str(path), 4096)


def test_queue_load_checks_alignment_and_gaps(tmp_path):
    q = MappedFileQueue(str(tmp_path), 4096)
    for start in (0, 4096, 8192):
        q.new_file(start)
    q.close()
    os.unlink(tmp_path / offset_to_file_name(4096))
    with pytest.raises(CorruptStoreError, match="missing"):
        MappedFileQueue(str(tmp_path), 4096).load()
    os.unlink(tmp_path / offset_to_file_name(8192))
    MappedFile(str(tmp_path / offset_to_file_name(1000)), 4096).close()
    with pytest.raises(CorruptStoreError, match="not a multiple"):
        MappedFileQueue(str(tmp_path), 4096).load()


def test_find_file_and_offsets(tmp_path):
    q = MappedFileQueue(str(tmp_path), 4096)
    a = q.new_file(0)
    a.wrote_position = 4096
    b = q.new_file(4096)
    b.wrote_position = 100
    assert q.find_file(0) is a and q.find_file(4095) is a and q.find_file(4096) is b
    assert q.find_file(8192) is None and q.find_file(-1) is None
    assert (q.min_offset, q.max_offset) == (0, 4196)
    q.close()


def test_truncate_zeroes_the_tail_and_deletes_later_files(tmp_path):
    q = MappedFileQueue(str(tmp_path), 4096)
    a = q.new_file(0)
    a.buf[:] = 7
    a.wrote_position = 4096
    b = q.new_file(4096)
    b.buf[:50] = 9
    b.wrote_position = 50
    q.truncate(1000, max_gap=64)
    assert len(q.files) == 1 and q.max_offset == 1000
    assert not a.buf[1000:].any() and a.buf[:1000].all()
    assert not os.path.exists(b.path)
    q.close()


def test_preallocation_creates_the_next_file_ahead(tmp_path):
    q = MappedFileQueue(str(tmp_path), 4096, preallocate=True, warm=True)
    q.new_file(0)
    q._ahead[4096].result(timeout=10)
    assert os.path.exists(tmp_path / offset_to_file_name(4096))
    second = q.new_file(4096)
    assert second.file_from_offset == 4096 and len(q.files) == 2
    q.close()


def test_flush_least_pages(tmp_path):
    q = MappedFileQueue(str(tmp_path), 64 * 1024)
    mf = q.new_file(0)
    mf.wrote_position = 4096 * 2
    assert q.flush(least_pages=4) == 0  # not enough dirty pages yet
    mf.wrote_position = 4096 * 4
    assert q.flush(least_pages=4) == 4096 * 4
    mf.wrote_position += 10
    assert q.flush() == 4096 * 4 + 10
    q.close()


def test_prefault_brings_in_only_never_written_pages(tmp_path):
    from page_cache import resident

    mib = 1 << 20
    size = 64 * mib  # beyond what the first write's fault reads ahead (read_ahead_kb)
    mf = MappedFile(str(tmp_path / offset_to_file_name(0)), size)
    data = np.random.default_rng(1).integers(1, 256, 5 * PAGE_SIZE + 100, dtype=np.uint8)
    mf.buf[: data.size] = data
    mf.wrote_position = data.size
    assert not any(resident(mf.path, 32 * mib, size))
    mf.prefault(48 * mib - 1)
    assert mf.prefaulted == 48 * mib
    assert all(resident(mf.path, 6 * PAGE_SIZE, 48 * mib))
    assert not any(resident(mf.path, 48 * mib, size))
    assert (mf.buf[: data.size] == data).all()  # the written bytes and their page, untouched
    assert not mf.buf[data.size :].any()
    mf.prefault(10 * size)  # never past the file's end
    assert mf.prefaulted == size
    mf.close()


def test_prefault_of_a_sparse_file_stops_at_its_reserved_blocks(tmp_path):
    mf = MappedFile(str(tmp_path / offset_to_file_name(0)), 4 * RESERVE_STEP, sparse=True)
    mf.prefault(RESERVE_STEP)
    assert mf.prefaulted == 0
    mf.reserve(1)
    mf.prefault(4 * RESERVE_STEP)
    assert mf.prefaulted == RESERVE_STEP
    assert os.stat(mf.path).st_blocks * 512 == RESERVE_STEP  # no block it did not reserve
    mf.close()


def test_prefault_ahead_tops_up_in_small_steps(tmp_path):
    """A top-up is at least ``PREFAULT_TOP_UP`` (not a page per pass) and, for a paced
    stream's small passes, about that much: the writer's next message waits for it."""
    q = MappedFileQueue(str(tmp_path / "cl"), 4 * PREFAULT_AHEAD)
    mf = q.new_file(0)
    assert mf.prefaulted == PREFAULT_AHEAD  # before its first write
    mf.wrote_position = PREFAULT_TOP_UP - 1  # less than a step used: nothing to do
    q.prefault_ahead()
    assert mf.prefaulted == PREFAULT_AHEAD
    mf.wrote_position = PREFAULT_TOP_UP + 1
    q.prefault_ahead()
    assert mf.prefaulted == -(-(mf.wrote_position + PREFAULT_AHEAD) // PAGE_SIZE) * PAGE_SIZE
    assert mf.prefaulted - PREFAULT_AHEAD <= PREFAULT_TOP_UP + PAGE_SIZE
    mf.wrote_position = 3 * PREFAULT_AHEAD  # a bulk pass: all of it in one call
    q.prefault_ahead()
    assert mf.prefaulted == 4 * PREFAULT_AHEAD
    q.close()


@pytest.mark.parametrize("warm", [False, True])
def test_a_file_that_exists_is_never_prefaulted_over(tmp_path, warm):
    """Only a file the queue created gets zeros: mapping one that holds data (write
    position 0 until its owner sets it) must leave every byte as it was."""
    q = MappedFileQueue(str(tmp_path / "cl"), 4 * PREFAULT_AHEAD)
    mf = q.new_file(0)
    assert mf.created
    data = np.random.default_rng(2).integers(1, 256, PREFAULT_AHEAD, dtype=np.uint8)
    mf.buf[PAGE_SIZE : PAGE_SIZE + data.size] = data
    q.close()
    again = MappedFileQueue(str(tmp_path / "cl"), 4 * PREFAULT_AHEAD, warm=warm)
    mf = again.new_file(0)  # not loaded: mapped as it is
    assert not mf.created and mf.prefaulted == 0
    assert (mf.buf[PAGE_SIZE : PAGE_SIZE + data.size] == data).all()
    again.close()


def test_a_failed_prefault_only_stops_prefaulting(tmp_path, caplog):
    """An OSError (here: the file is gone) is logged, ends prefaulting of that file, and
    leaves the mapping writable as before."""
    mf = MappedFile(str(tmp_path / offset_to_file_name(0)), 4 * RESERVE_STEP)
    os.unlink(mf.path)
    mf.prefault(RESERVE_STEP)
    assert mf.prefaulted == mf.size and "cannot prefault" in caplog.text
    mf.buf[:4] = 7
    assert mf.buf[:4].tolist() == [7] * 4
    mf.close()
