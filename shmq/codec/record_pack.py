"""One CommitLog record per Python call: ``struct`` formats of a whole record.

For a single record, one ``struct.pack_into`` of the 15 header fields, the body and the tail
(topic and properties with their lengths) costs about a microsecond, less than a numba
dispatch with a dozen arguments (perf-notes). Single puts (``CommitLog.append_one``) and the
producer's single-message sends use it; batches use ``record.encode_batch``. Both write the
same bytes (a hypothesis test checks it).
"""

from __future__ import annotations

import struct

from shmq.codec import record as rec

# TOTALSIZE MAGIC BODYCRC QUEUEID FLAG QUEUEOFFSET PHYSICALOFFSET SYSFLAG BORNTIMESTAMP
# BORNHOST STORETIMESTAMP STOREHOST RECONSUMETIMES PREPARED_TRANSACTION_OFFSET BODYLENGTH
# (IPv4 hosts given as their signed int64 form)
HEADER_FORMAT = ">iIiiiqqiqqqqiqi"
assert struct.calcsize(HEADER_FORMAT) == rec.HEADER_BODY_START

# Whole-record formats by (body, tail) length. Bounded: sizes come and go, the cache is
# simply rebuilt.
_STRUCTS: dict[tuple[int, int], struct.Struct] = {}
MAX_STRUCTS = 4096


def record_struct(body_len: int, tail_len: int) -> struct.Struct:
    """The format of a record whose body and tail have these lengths (cached)."""
    made = _STRUCTS.get((body_len, tail_len))
    if made is None:
        if len(_STRUCTS) >= MAX_STRUCTS:
            _STRUCTS.clear()
        made = _STRUCTS[(body_len, tail_len)] = struct.Struct(
            f"{HEADER_FORMAT}{body_len}s{tail_len}s"
        )
    return made


def topic_head(topic: bytes) -> tuple[bytes, int]:
    """``TOPICLENGTH + TOPIC`` and the magic that goes with it (V2 for topics longer than
    127 bytes, whose length takes two bytes)."""
    if len(topic) > 127:
        return len(topic).to_bytes(2, "big") + topic, rec.MAGIC_V2
    return bytes((len(topic),)) + topic, rec.MAGIC_V1


def tail(topic: bytes, props: bytes) -> tuple[bytes, int]:
    """Encoded ``TOPICLENGTH + TOPIC + PROPERTIESLENGTH + PROPERTIES`` and the magic."""
    head, magic = topic_head(topic)
    return head + len(props).to_bytes(2, "big") + props, magic
