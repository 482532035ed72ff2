"""The body codec (``shmq.body_compression``): the sysFlag bits, the three algorithms'
round trips, the batch decompression against the one-body one, and the producer's
threshold (``compress_msg_body_over_howmuch``) for body sizes around it."""

from __future__ import annotations

import gzip
import importlib.util
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shmq.body_compression import (
    COMPRESSED_FLAG,
    MAX_DECOMPRESSED,
    CompressionType,
    compress,
    compress_bodies,
    compression_sysflag,
    compression_type,
    decompress,
    decompress_bodies,
)
from shmq.client.producer.producer import Producer
from shmq.client.producer.records import ONE_BODY, ONE_SYSFLAG
from shmq.errors import BodyDecompressionError
from shmq.message import Message

INSTALLED = [CompressionType.ZLIB] + [
    t
    for t, package in ((CompressionType.LZ4, "lz4"), (CompressionType.ZSTD, "zstandard"))
    if importlib.util.find_spec(package) is not None
]
THRESHOLD = 4096


def test_sysflag_bits_are_rocketmqs():
    assert [compression_sysflag(t) for t in CompressionType] == [0x101, 0x201, 0x301]
    assert compression_type(0x1) is CompressionType.ZLIB  # a sender before 5.x: no type bits
    assert compression_type(0x301 | 0x2 | 0x8) is CompressionType.ZLIB
    assert compression_type(0x701) is None


def test_zlib_is_what_javas_deflater_writes_and_gzip_reads_too():
    body = b"abc" * 2000
    stored = compress(body, CompressionType.ZLIB, 5)
    assert stored[0] == 0x78 and stored == zlib.compress(body, 5)
    assert decompress(gzip.compress(body), COMPRESSED_FLAG, "a gRPC GZIP body") == body


@pytest.mark.parametrize("ctype", INSTALLED)
@settings(max_examples=40, deadline=None)
@given(body=st.binary(min_size=1, max_size=20_000), level=st.integers(1, 9))
def test_every_installed_algorithm_round_trips(ctype, body, level):
    stored = compress(body, ctype, level)
    assert decompress(stored, compression_sysflag(ctype), "m") == body
    assert decompress(stored, 0, "m") == stored  # not flagged: the body as it is


@pytest.mark.parametrize("ctype", INSTALLED)
def test_bytes_that_do_not_decompress_name_the_message(ctype):
    with pytest.raises(BodyDecompressionError, match=f"Orders:3@7.*{ctype.name}"):
        decompress(b"\x00garbage", compression_sysflag(ctype), "message Orders:3@7")


@pytest.mark.parametrize("ctype", INSTALLED)
def test_a_body_that_decompresses_past_the_limit_or_is_cut_short_is_an_error(ctype):
    """A few hundred stored bytes must not make a consumer allocate gigabytes."""
    bomb = compress(bytes(MAX_DECOMPRESSED + 1), ctype, 9)
    with pytest.raises(BodyDecompressionError, match=f"more than {MAX_DECOMPRESSED} bytes"):
        decompress(bomb, compression_sysflag(ctype), "m")
    stored = compress(b"abc" * 5000, ctype, 5)
    with pytest.raises(BodyDecompressionError):
        decompress(stored[: len(stored) // 2], compression_sysflag(ctype), "m")


def test_an_unknown_type_is_an_error_too():
    with pytest.raises(BodyDecompressionError, match="compression type 7 is unknown"):
        decompress(b"x", 0x701, "m")


@settings(max_examples=60, deadline=None)
@given(
    entries=st.lists(
        st.tuples(st.binary(min_size=1, max_size=600), st.sampled_from(["plain", "zlib", "bad"])),
        min_size=1,
        max_size=20,
    )
)
def test_batch_decompression_equals_one_body_at_a_time(entries):
    stored, flags = [], []
    for body, kind in entries:
        stored.append(compress(body, CompressionType.ZLIB, 5) if kind == "zlib" else body)
        flags.append(0 if kind == "plain" else 0x301)
    offsets = np.zeros(len(stored) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in stored], out=offsets[1:])
    data = np.frombuffer(b"".join(stored), dtype=np.uint8)
    bodies, offs, errors = decompress_bodies(data, offsets, np.array(flags), "T:0")
    got = [bodies[offs[i] : offs[i + 1]].tobytes() for i in range(len(stored))]
    for i, ((body, kind), raw, flag) in enumerate(zip(entries, stored, flags, strict=True)):
        try:
            want = decompress(raw, flag, "m")
        except BodyDecompressionError:
            assert i in errors and got[i] == raw  # kept as stored
        else:
            assert i not in errors and got[i] == want
            if kind != "bad":
                assert want == body
    if all(kind == "plain" for _, kind in entries):
        assert bodies is data and offs is offsets  # nothing flagged: no copy


def test_compress_bodies_lays_them_out_again():
    bodies = [b"a" * 10, b"b" * 5000, b"c"]
    offsets = np.array([0, 10, 5010, 5011], dtype=np.int64)
    data, offs = compress_bodies(np.frombuffer(b"".join(bodies), np.uint8), offsets,
                                 CompressionType.ZLIB, 5)  # fmt: skip
    back, back_offs, errors = decompress_bodies(data, offs, np.full(3, 0x301), "bulk")
    assert [back[back_offs[i] : back_offs[i + 1]].tobytes() for i in range(3)] == bodies
    assert not errors


@pytest.fixture(scope="module")
def producers():
    """Producers that are never started (``_record`` only encodes), one per type."""
    made = {t: Producer(f"threshold-{t.name}", "127.0.0.1:1", compress_type=t.name)
            for t in INSTALLED}  # fmt: skip
    yield made
    for p in made.values():
        p.close()


@settings(max_examples=80, deadline=None)
@given(
    size=st.integers(THRESHOLD - 64, THRESHOLD + 64),
    fill=st.sampled_from([b"a", b"order 42 paid; ", bytes(range(256))]),
    ctype=st.sampled_from(INSTALLED),
)
def test_the_producer_compresses_bodies_from_the_threshold_on(producers, size, fill, ctype):
    body = (fill * (size // len(fill) + 1))[:size]
    one = producers[ctype]._record(Message("Threshold", body), None, None)
    if size >= THRESHOLD:
        assert one[ONE_SYSFLAG] == compression_sysflag(ctype)
        assert decompress(one[ONE_BODY], one[ONE_SYSFLAG], "m") == body
    else:
        assert one[ONE_SYSFLAG] == 0 and one[ONE_BODY] == body
