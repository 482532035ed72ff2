"""A batch's comma-joined offset message ids: the broker's kernel writes what
``offset_msg_id`` writes for each message, and the producer's kernel reads them back, or
names the first byte that is neither a hex digit nor a comma where one belongs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shmq.codec.msg_ids import joined_offset_msg_ids, split_offset_ids
from shmq.message import offset_msg_id, pack_host

HOST = pack_host("192.168.0.10", 10911).to_bytes(8, "big", signed=True)


@settings(deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=60))
def test_ids_are_offset_msg_ids_joined_and_read_back(offsets):
    joined = joined_offset_msg_ids(HOST, np.array(offsets, dtype=np.int64))
    assert joined == ",".join(offset_msg_id(HOST, p) for p in offsets)
    host, phys = split_offset_ids(joined)
    assert host == HOST and phys.tolist() == offsets
    assert split_offset_ids(joined.lower())[1].tolist() == offsets  # hex in either case


def test_no_offsets_join_to_nothing():
    assert joined_offset_msg_ids(HOST, np.zeros(0, dtype=np.int64)) == ""


@settings(deadline=None)
@given(st.lists(st.integers(0, 2**40), min_size=1, max_size=8), st.data())
def test_a_byte_out_of_place_is_named(offsets, data):
    joined = joined_offset_msg_ids(HOST, np.array(offsets, dtype=np.int64))
    at = data.draw(st.integers(0, len(joined) - 1))
    bad = data.draw(st.sampled_from("G-;x ," if joined[at] != "," else "0Fa;"))
    broken = joined[:at] + bad + joined[at + 1 :]
    if broken == joined:
        return
    with pytest.raises(ValueError, match=f"at {at}, not a hex digit or a comma"):
        split_offset_ids(broken)


@pytest.mark.parametrize("text", ["", "C0A8", "C0A8000A00002A9F000000000000040", "é" * 32,
                                  "C0A8000A00002A9F0000000000000400,"])  # fmt: skip
def test_text_of_the_wrong_length_is_refused(text):
    with pytest.raises(ValueError, match="is not comma-joined 32-digit ids"):
        split_offset_ids(text)
