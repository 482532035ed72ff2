"""RocketMQ's batch body decoder: round trips against the independent encoder in
``tests/wire_client.py``, and hostile bodies (it must only ever raise ``BatchBodyError``)."""

from __future__ import annotations

import contextlib
import struct

import pytest
import wire_client as wc
from hypothesis import given, settings
from hypothesis import strategies as st

from shmq.codec.batch_body import BatchBodyError, decode_batch, warm_up

names = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=8)
messages = st.lists(
    st.tuples(
        st.integers(-(2**31), 2**31 - 1),
        st.binary(min_size=1, max_size=64),
        st.dictionaries(names, names, max_size=4),
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=200, deadline=None)
@given(messages, st.sampled_from([b"", b"CLUSTER\x01c\x02", b"WAIT\x01true\x02CLUSTER\x01c\x02"]))
def test_round_trip_with_the_batch_properties_after_each(batch, suffix):
    decoded = decode_batch(wc.batch_body(batch), suffix)
    assert len(decoded) == len(batch)
    for k, (flag, body, props) in enumerate(batch):
        assert int(decoded.flags[k]) == flag
        s, e = decoded.body_offs[k], decoded.body_offs[k + 1]
        assert decoded.bodies[s:e].tobytes() == body
        s, e = decoded.props_offs[k], decoded.props_offs[k + 1]
        assert decoded.props[s:e].tobytes() == wc.properties(props).encode() + suffix


def test_a_separator_is_added_when_a_messages_properties_lack_the_last_one():
    body = struct.pack(">iiiii", 22 + 1 + 3, 0, 0, 0, 1) + b"x" + struct.pack(">h", 3) + b"a\x01b"
    decoded = decode_batch(body, b"C\x01d\x02")
    assert decoded.props.tobytes() == b"a\x01b\x02C\x01d\x02"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"", "no message"),
        (b"\x00" * 21, "message 0: fewer bytes left"),
        (struct.pack(">iiiii", 22, 0, 0, 0, -1) + b"\x00\x00", "negative BODYLENGTH"),
        (struct.pack(">iiiii", 22, 0, 0, 0, 5) + b"\x00\x00", "BODYLENGTH runs past"),
        (struct.pack(">iiiii", 23, 0, 0, 0, 1) + b"x\xff\xff", "negative PROPERTIESLENGTH"),
        (struct.pack(">iiiii", 30, 0, 0, 0, 1) + b"x\x00\x09ab", "PROPERTIESLENGTH runs past"),
        (struct.pack(">iiiii", 99, 0, 0, 0, 1) + b"x\x00\x00", "TOTALSIZE does not match"),
        (struct.pack(">iiiii", 22, 0, 0, 0, 0) + b"\x00\x00", "message 0 has an empty body"),
    ],
)
def test_bad_bodies_name_the_message_and_the_rule(body, reason):
    with pytest.raises(BatchBodyError, match=reason):
        decode_batch(body)


def test_properties_over_the_limit_with_the_suffix():
    body = wc.batch_body([(0, b"x", {"k": "v" * 32750})])
    with pytest.raises(BatchBodyError, match="message 0 has 32776 bytes of properties, above"):
        decode_batch(body, b"CLUSTER\x01DefaultCluster\x02")


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_decode_or_raise_batch_body_error(raw):
    try:
        decoded = decode_batch(raw)
    except BatchBodyError:
        return
    assert len(decoded) >= 1 and decoded.body_offs[-1] <= len(raw)


@settings(max_examples=300, deadline=None)
@given(messages, st.data())
def test_a_corrupted_valid_body_decodes_or_raises_batch_body_error(batch, data):
    raw = bytearray(wc.batch_body(batch))
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    with contextlib.suppress(BatchBodyError):
        decode_batch(bytes(raw[:cut]))


def test_warm_up_encodes_a_batch_that_decodes():
    batch = decode_batch(warm_up())
    assert len(batch) == 1 and batch.bodies.tobytes() == b"x"
