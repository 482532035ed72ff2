"""CRC-32 against zlib and the Java string hash against a UTF-16 reference, for any input."""

from __future__ import annotations

import zlib

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from shmq.codec.crc32 import crc32, crc32_range
from shmq.codec.jhash import java_hash
from spec_decoder import java_hash as reference_java_hash


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=300), a=st.integers(0, 300), b=st.integers(0, 300))
def test_crc32_matches_zlib(data, a, b):
    buf = np.frombuffer(data, np.uint8) if data else np.zeros(0, np.uint8)
    assert crc32(buf) == zlib.crc32(data)
    lo, hi = sorted((min(a, len(data)), min(b, len(data))))
    assert crc32_range(buf, lo, hi) == zlib.crc32(data[lo:hi])


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_java_hash_matches_utf16_reference(text):
    assert java_hash(text) == reference_java_hash(text)


def test_known_values():
    assert java_hash("TagA") == 2598919
    assert java_hash("TopicTest#OrderID188") == -1231271670
    assert zlib.crc32(b"Hello") == crc32(np.frombuffer(b"Hello", np.uint8)) == 0xF7D18982
