"""Consume-queue kernels: unit writes, the valid-unit walk, and 4.9's getMessage loop over
units (``select_units``) against a model written from RocketMQ 4.9's
``DefaultMessageStore.getMessage``."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from shmq.codec.consume_queue import (
    BLANK_UNIT_SIZE,
    CQ_UNIT_DTYPE,
    FETCH_DTYPE,
    NO_CODES,
    SCAN_FOUND,
    SCAN_NO_MATCHED,
    SCAN_WAS_REMOVING,
    count_valid_units,
    put_units,
    select_units,
)


def test_put_units_layout_and_valid_walk():
    buf = np.zeros(20 * 10, dtype=np.uint8)
    put_units(
        buf,
        2,
        np.array([100, 200, 300], np.int64),
        np.array([10, 20, 30], np.int64),
        np.array([-5, 0, 7], np.int64),
    )
    units = np.frombuffer(buf, dtype=CQ_UNIT_DTYPE)
    assert list(units["offset"][2:5]) == [100, 200, 300]
    assert list(units["tags_code"][2:5]) == [-5, 0, 7]
    assert count_valid_units(buf, 2, 10) == 3
    assert count_valid_units(buf, 0, 10) == 0  # unit 0 is all zeros: the end


def model(units, max_nums, codes, r):
    """4.9's loop, unit by unit, as its Java reads: (status, scanned, [(phys, size, i)],
    the CommitLog offset of the last unit read: maxPhyOffsetPulling)."""
    scan = min(len(units), max(16_000 // 20, max_nums))
    status, total, taken, next_file, last = SCAN_NO_MATCHED, 0, [], None, 0
    i = 0
    while i < scan:
        phys, size, tags = units[i]
        last = phys
        if next_file is not None and phys < next_file:
            i += 1
            continue
        in_disk = r["write_offset"] - phys > r["memory"]
        count_limit = r["count_in_disk"] if in_disk else r["count_in_memory"]
        bytes_limit = r["bytes_in_disk"] if in_disk else r["bytes_in_memory"]
        if (
            total
            and taken
            and (
                max_nums <= len(taken) or total + size > bytes_limit or len(taken) > count_limit - 1
            )
        ):
            break
        signed = (tags & 0xFFFFFFFF) - ((tags & 0x80000000) << 1)  # Java's (int) tagsCode
        if codes is not None and signed not in codes:
            if total == 0:
                status = SCAN_NO_MATCHED
            i += 1
            continue
        if phys == 0 and size == BLANK_UNIT_SIZE:  # shmq: the padding before a first message
            i += 1
            continue
        if phys < r["min_phys"]:  # commitLog.getMessage answers null: removed by cleanup
            if total == 0:
                status = SCAN_WAS_REMOVING
            next_file = phys - phys % r["file_size"] + r["file_size"]
            i += 1
            continue
        taken.append((phys, size, r["first_offset"] + i))
        total += size
        status, next_file = SCAN_FOUND, None
        i += 1
    return status, i, taken, last


unit = st.one_of(
    st.tuples(st.integers(0, 4000), st.integers(1, 300), st.integers(-(2**40), 2**40)),
    st.just((0, BLANK_UNIT_SIZE, 0)),
)


@settings(max_examples=300, deadline=None)
@given(
    units=st.lists(unit, min_size=1, max_size=900),
    start=st.integers(0, 3),
    max_nums=st.integers(1, 40),
    filtered=st.booleans(),
    counts=st.tuples(st.integers(1, 40), st.integers(1, 40)),
    sizes=st.tuples(st.integers(1, 3000), st.integers(1, 3000)),
    memory=st.integers(0, 5000),
    min_phys=st.integers(0, 2000),
    file_size=st.sampled_from([100, 1000, 1 << 20]),
)
def test_select_units_is_4_9s_loop(units, start, max_nums, filtered, counts, sizes, memory,
                                   min_phys, file_size):  # fmt: skip
    units = sorted(units, key=lambda u: u[0])  # a queue's records go forward in the CommitLog
    buf = np.zeros(20 * (start + len(units)), dtype=np.uint8)
    put_units(buf, start, *(np.array(c, np.int64) for c in zip(*units, strict=True)))
    buf.flags.writeable = False
    codes = sorted({(t & 0xFFFFFFFF) - ((t & 0x80000000) << 1) for _, _, t in units[::3]})
    request = np.zeros(1, FETCH_DTYPE)
    request[0] = (500, max_nums, counts[0], sizes[0], counts[1], sizes[1], memory, 4000,
                  min_phys, file_size)  # fmt: skip
    picks = np.zeros((3, max_nums), np.int64)
    got = select_units(buf, start, len(units), np.array(codes, np.int64) if filtered else NO_CODES,
                       request, picks)  # fmt: skip
    expected = model(units, max_nums, set(codes) if filtered else None, request[0])
    status, scanned, taken, last = expected
    assert (got.status, got.scanned, got.chosen, got.last_phys) == (status, scanned, len(taken),
                                                                    last)  # fmt: skip
    assert [tuple(picks[:, k]) for k in range(got.chosen)] == taken


def test_a_tag_filter_looks_at_16000_bytes_of_units():
    """4.9 scans ``max(16000, maxMsgNums * 20)`` bytes of units: 800 units, not 16,000."""
    n = 5000
    buf = np.zeros(20 * n, dtype=np.uint8)
    put_units(buf, 0, np.arange(1, n + 1, dtype=np.int64) * 100, np.full(n, 50, np.int64),
              np.full(n, 7, np.int64))  # fmt: skip
    request = np.zeros(1, FETCH_DTYPE)
    request[0] = (0, 32, 32, 1 << 20, 8, 1 << 16, 1 << 40, n * 100, 0, 1 << 30)
    picks = np.zeros((3, 32), np.int64)
    got = select_units(buf, 0, n, np.array([8], np.int64), request, picks)
    assert (got.status, got.scanned, got.chosen) == (SCAN_NO_MATCHED, 800, 0)
    request[0]["max_nums"] = 2000  # more units than 16,000 bytes hold: maxMsgNums of them
    got = select_units(buf, 0, n, np.array([8], np.int64), request, np.zeros((3, 2000), np.int64))
    assert got.scanned == 2000
