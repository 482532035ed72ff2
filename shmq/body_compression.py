"""Compressed message bodies, as RocketMQ's clients write and read them.

Why: a RocketMQ producer compresses a single message's body of ``compressMsgBodyOverHowmuch``
(4 KiB) or more and says so in the record's sysFlag; the broker stores the bytes as they
came, and every consumer decompresses (``MessageDecoder``). One module owns the sysFlag bits
and the three algorithms, so the producer, every read path (one message, a batch of
columns, Spark, admin queries) and the gRPC proxy agree.

sysFlag: ``COMPRESSED_FLAG`` (0x1) says the body is compressed; bits 8–10
(``COMPRESSION_TYPE_MASK``) name the algorithm: LZ4 1, ZSTD 2, ZLIB 3, and 0 (a sender
before RocketMQ 5) also means ZLIB. Formats: ZLIB is a zlib stream (Java's ``Deflater``; a
gzip stream, which a gRPC client's GZIP body may be, is read too), LZ4 an LZ4 *frame*, ZSTD
a zstd frame. LZ4 and ZSTD need the ``compression`` extra (``lz4``, ``zstandard``).

Example::

    flag = compression_sysflag(CompressionType.ZLIB)           # 0x301
    stored = compress(body, CompressionType.ZLIB, level=5)
    assert decompress(stored, flag, "order 42") == body
"""

from __future__ import annotations

import enum
import itertools
import zlib

import numpy as np

from shmq.errors import BodyDecompressionError, ConfigError

COMPRESSED_FLAG = 0x1  # MessageSysFlag.COMPRESSED_FLAG
COMPRESSION_TYPE_MASK = 0x700  # MessageSysFlag.COMPRESSION_TYPE_COMPARATOR
_TYPE_SHIFT = 8
# zlib's wbits for "a zlib or a gzip stream, whichever the header says"
_ZLIB_OR_GZIP = 32 + zlib.MAX_WBITS
# what one body may decompress to: a few stored bytes (a producer's "bomb") must not make a
# consumer allocate gigabytes; 32 times the largest body a broker stores by default
MAX_DECOMPRESSED = 128 << 20
_ZSTD_FEED = 1024


class CompressionType(enum.IntEnum):
    """RocketMQ's ``CompressionType``: the value in sysFlag bits 8–10."""

    LZ4 = 1
    ZSTD = 2
    ZLIB = 3

    @classmethod
    def of(cls, name: str | CompressionType) -> CompressionType:
        """The type named ``name`` (``"ZLIB"``, ``"lz4"``, ...), checked to be usable here:
        a ``ConfigError`` for an unknown name or a type whose library is not installed."""
        if isinstance(name, CompressionType):
            ctype = name
        else:
            try:
                ctype = cls[str(name).upper()]
            except KeyError:
                raise ConfigError(
                    f"compress_type must be one of ZLIB, LZ4, ZSTD, not {name!r}"
                ) from None
        if ctype is not cls.ZLIB and _codec(ctype) is None:
            raise ConfigError(f"compress_type {ctype.name} needs the {_PACKAGES[ctype]} package "
                              "(pip install 'shmq[compression]')")  # fmt: skip
        return ctype


_PACKAGES = {CompressionType.LZ4: "lz4", CompressionType.ZSTD: "zstandard"}


def compression_sysflag(ctype: CompressionType) -> int:
    """The sysFlag bits of a body compressed with ``ctype``: COMPRESSED plus its type (0x301
    for ZLIB, as RocketMQ 4.9.8 and 5.x producers set)."""
    return COMPRESSED_FLAG | (int(ctype) << _TYPE_SHIFT)


def compression_type(sysflag: int) -> CompressionType | None:
    """The algorithm a compressed record's sysFlag names (no type bits: ZLIB; None for a
    type value RocketMQ does not define)."""
    value = (sysflag & COMPRESSION_TYPE_MASK) >> _TYPE_SHIFT
    if value == 0:
        return CompressionType.ZLIB
    return CompressionType(value) if value <= 3 else None


def compress(body: bytes, ctype: CompressionType, level: int) -> bytes:
    """``body`` compressed as RocketMQ's compressor of ``ctype`` writes it (``level``: zlib
    0–9 and zstd's levels; LZ4's frame is written at its default level, as Java's
    ``LZ4FrameOutputStream`` is)."""
    if ctype is CompressionType.ZLIB:
        return zlib.compress(body, level)
    codec = _codec(ctype)
    if codec is None:
        raise ConfigError(f"{ctype.name} compression needs the {_PACKAGES[ctype]} package")
    if ctype is CompressionType.LZ4:
        return codec.compress(body)
    return codec.ZstdCompressor(level=level).compress(body)


def compress_bodies(
    bodies: np.ndarray, offsets: np.ndarray, ctype: CompressionType, level: int
) -> tuple[np.ndarray, np.ndarray]:
    """Every body of ``bodies`` (back to back, n + 1 ``offsets``) compressed, laid out the
    same way (a bulk send that asked for compression)."""
    data, ends = bodies.tobytes(), offsets.tolist()
    parts = [compress(data[a:b], ctype, level) for a, b in itertools.pairwise(ends)]
    new_offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, parts), np.int64, len(parts)), out=new_offsets[1:])
    return np.frombuffer(b"".join(parts), dtype=np.uint8), new_offsets


def decompress(body: bytes, sysflag: int, what: str) -> bytes:
    """The body as its producer gave it: ``body`` decompressed when ``sysflag`` has
    COMPRESSED, else ``body`` itself. ``what`` names the message in the
    ``BodyDecompressionError`` raised when the bytes do not decompress."""
    if not sysflag & COMPRESSED_FLAG:
        return body
    ctype = compression_type(sysflag)
    try:
        if ctype is CompressionType.ZLIB:
            inflater = zlib.decompressobj(_ZLIB_OR_GZIP)
            plain = inflater.decompress(body, MAX_DECOMPRESSED + 1)
            if not inflater.eof and not inflater.unconsumed_tail:
                raise zlib.error("the stream is truncated")
            return _bounded(plain, what, sysflag)
        codec = None if ctype is None else _codec(ctype)
        if codec is None:
            reason = (f"compression type {(sysflag & COMPRESSION_TYPE_MASK) >> _TYPE_SHIFT} "
                      "is unknown" if ctype is None else f"the {_PACKAGES[ctype]} package is "
                      "not installed (pip install 'shmq[compression]')")  # fmt: skip
            raise BodyDecompressionError(f"{what}: body (sysFlag {sysflag:#x}) cannot be "
                                         f"decompressed: {reason}")  # fmt: skip
        if ctype is CompressionType.LZ4:
            inflater = codec.LZ4FrameDecompressor()
            plain = inflater.decompress(bytes(body), MAX_DECOMPRESSED + 1)
            if not inflater.eof and len(plain) <= MAX_DECOMPRESSED:
                raise ValueError("the frame is truncated")
            return _bounded(plain, what, sysflag)
        # streaming (a frame written by Java's ZstdOutputStream has no content size), fed
        # 1 KiB at a time: a KiB of zstd yields at most a few tens of MiB, so the limit holds
        inflater = codec.ZstdDecompressor().decompressobj()
        parts, size = [], 0
        for start in range(0, len(body), _ZSTD_FEED):
            parts.append(inflater.decompress(bytes(body[start : start + _ZSTD_FEED])))
            size += len(parts[-1])
            if size > MAX_DECOMPRESSED:
                break
        if not inflater.eof and size <= MAX_DECOMPRESSED:
            raise ValueError("the frame is truncated")
        return _bounded(b"".join(parts), what, sysflag)
    except BodyDecompressionError:
        raise
    except Exception as exc:  # each library has its own error types
        name = ctype.name if ctype is not None else "?"
        raise BodyDecompressionError(f"{what}: body of {len(body)} bytes (sysFlag {sysflag:#x}) "
                                     f"does not decompress as {name}: {exc}") from exc  # fmt: skip


def _bounded(plain: bytes, what: str, sysflag: int) -> bytes:
    if len(plain) > MAX_DECOMPRESSED:
        raise BodyDecompressionError(f"{what}: body (sysFlag {sysflag:#x}) decompresses to "
                                     f"more than {MAX_DECOMPRESSED} bytes")  # fmt: skip
    return plain


def decompress_bodies(
    bodies: np.ndarray, offsets: np.ndarray, sysflags: np.ndarray, what: str
) -> tuple[np.ndarray, np.ndarray, dict[int, BodyDecompressionError]]:
    """Bodies laid back to back (uint8 ``bodies``, n + 1 int64 ``offsets``) with each one
    whose ``sysflags`` entry has COMPRESSED decompressed: the new ``(bodies, offsets)`` and,
    by index, the error of each body that does not decompress (it is kept as stored). One
    numpy mask finds the compressed ones; with none, the arrays come back as they are (no
    copy), so a backlog without compressed records pays one vectorised pass per batch."""
    errors: dict[int, BodyDecompressionError] = {}
    if not sysflags.shape[0] or not np.bitwise_or.reduce(sysflags) & COMPRESSED_FLAG:
        return bodies, offsets, errors  # the common case: one pass, no copy
    flagged = np.flatnonzero(sysflags & COMPRESSED_FLAG)
    ends = offsets.tolist()
    flags = sysflags[flagged].tolist()
    parts: list = []
    lengths = np.diff(offsets)
    done = 0
    for i, flag in zip(flagged.tolist(), flags, strict=True):
        parts.append(bodies[ends[done] : ends[i]])
        stored = bodies[ends[i] : ends[i + 1]].tobytes()
        try:
            plain = decompress(stored, flag, f"{what}, message {i} of the batch")
        except BodyDecompressionError as exc:
            errors[i] = exc
            plain = stored
        parts.append(np.frombuffer(plain, dtype=np.uint8))
        lengths[i] = len(plain)
        done = i + 1
    parts.append(bodies[ends[done] :])
    new_offsets = np.zeros_like(offsets)
    np.cumsum(lengths, out=new_offsets[1:])
    return np.concatenate(parts), new_offsets, errors


def _codec(ctype: CompressionType):
    """The module of ``ctype``'s algorithm (``lz4.frame`` or ``zstandard``), or None when
    it is not installed (imported on first use: most processes never meet these bodies)."""
    module = _CODECS.get(ctype, _MISSING)
    if module is _MISSING:
        try:
            if ctype is CompressionType.LZ4:
                import lz4.frame as module
            else:
                import zstandard as module
        except ImportError:
            module = None
        _CODECS[ctype] = module
    return module


_MISSING = object()
_CODECS: dict[CompressionType, object] = {}
