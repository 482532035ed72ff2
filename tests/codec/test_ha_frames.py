"""The HA wire format: RocketMQ 4.9's byte layout, and a parser that rejects, never
misreads, whatever a peer sends."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shmq.codec import ha_frames as hf
from shmq.errors import HAFrameError


def test_layout_is_rocketmq_big_endian():
    assert hf.pack_header(0x0102030405060708, 0x0A0B0C0D) == bytes(
        [1, 2, 3, 4, 5, 6, 7, 8, 0x0A, 0x0B, 0x0C, 0x0D]
    )
    assert hf.pack_report(1 << 40) == struct.pack(">q", 1 << 40)
    assert hf.parse_header(b"xx" + hf.pack_header(4096, 100), 2, 32768) == (4096, 100)


def test_the_last_complete_report_counts_and_a_partial_one_is_kept():
    data = hf.pack_report(10) + hf.pack_report(20) + b"\x00\x00\x00"
    assert hf.last_report(data, len(data)) == (20, 16)
    assert hf.last_report(b"\x00" * 7, 7) == (-1, 0)


@pytest.mark.parametrize(
    ("header", "problem"),
    [((-1, 0), "negative offset"), ((0, -5), "body of -5"), ((0, 32769), "at most 32768")],
)
def test_bad_headers_are_refused_naming_the_problem(header, problem):
    with pytest.raises(HAFrameError, match=problem):
        hf.parse_header(struct.pack(">qi", *header), 0, 32768)


def test_a_negative_report_is_refused():
    with pytest.raises(HAFrameError, match="negative offset"):
        hf.last_report(struct.pack(">q", -8), 8)


@settings(max_examples=500, deadline=None)
@given(st.binary(min_size=12, max_size=64), st.integers(0, 1 << 20))
def test_any_header_bytes_parse_within_limits_or_fail_cleanly(data, max_body):
    try:
        offset, size = hf.parse_header(data, 0, max_body)
    except HAFrameError:
        return
    assert offset >= 0 and 0 <= size <= max_body
    assert hf.pack_header(offset, size) == data[:12]


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=100))
def test_any_report_bytes_parse_within_limits_or_fail_cleanly(data):
    try:
        offset, used = hf.last_report(data, len(data))
    except HAFrameError:
        return
    assert used % 8 == 0 and len(data) - used < 8
    assert (offset == -1) == (used == 0)
    if used:
        assert offset >= 0 and hf.pack_report(offset) == data[used - 8 : used]
