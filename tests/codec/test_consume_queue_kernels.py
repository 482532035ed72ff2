"""Consume-queue kernels: unit writes, the valid-unit walk and the tag-hash filter."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from shmq.codec.consume_queue import CQ_UNIT_DTYPE, count_valid_units, match_tags, put_units


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


@settings(max_examples=200, deadline=None)
@given(
    codes=st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=60),
    wanted=st.sets(st.integers(-(2**31), 2**31 - 1), max_size=5),
    start=st.integers(0, 10),
)
def test_match_tags_is_exactly_the_low_32_bits_in_the_set(codes, wanted, start):
    wanted = set(wanted) | {codes[0]}
    n = len(codes)
    buf = np.zeros(20 * (n + start), dtype=np.uint8)
    put_units(
        buf, start, np.arange(n, dtype=np.int64), np.ones(n, np.int64), np.array(codes, np.int64)
    )
    out = np.empty(n, dtype=np.int64)
    k = match_tags(buf, start, n, np.array(sorted(wanted), np.int64), out)
    assert list(out[:k]) == [i for i, c in enumerate(codes) if c in wanted]
