"""A new ring record from a stored one: what the broker's own senders write.

Delivering a delayed message, sending a failed one back for retry and committing a half
message all re-send a stored record under another topic, queue and properties, keeping its
body, flag, sysflag, born time and host (RocketMQ builds a ``MessageExtBrokerInner`` from
the ``MessageExt`` the same way). The header and body are copied as stored, so any host
layout passes through; the writer fills in the store fields and the CRC when it appends.
"""

from __future__ import annotations

import struct

import numpy as np

from shmq.codec import record as rec
from shmq.codec.record_pack import tail

_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_ZERO_OFFSETS = bytes(16)  # QUEUEOFFSET and PHYSICALOFFSET: the writer's to fill
QUEUE_ID_POS, MAGIC_POS, QUEUE_OFFSET_POS = 12, 4, 20
# RECONSUMETIMES sits 16 bytes before the body (then PREPARED_TRANSACTION_OFFSET 8 and
# BODYLENGTH 4), whatever the hosts' sizes
_RECONSUME_BEFORE_BODY = 16


def rebuild_record(
    buf: np.ndarray,
    row: np.ndarray,
    topic: bytes,
    queue_id: int,
    props: bytes,
    reconsume_times: int | None = None,
) -> bytearray:
    """Record ``row`` of ``buf`` (decoded ``R_*`` columns) under ``topic`` / ``queue_id``
    with properties ``props``; ``reconsume_times`` replaces RECONSUMETIMES when given."""
    pos = int(row[rec.R_POS])
    body_end = int(row[rec.R_BODY_START]) + int(row[rec.R_BODY_LEN])
    topic_part, magic = tail(topic, props)
    out = bytearray(buf[pos:body_end].tobytes())
    out += topic_part
    _I32.pack_into(out, 0, len(out))
    _U32.pack_into(out, MAGIC_POS, magic)
    _I32.pack_into(out, QUEUE_ID_POS, queue_id)
    out[QUEUE_OFFSET_POS : QUEUE_OFFSET_POS + 16] = _ZERO_OFFSETS
    if reconsume_times is not None:
        at = int(row[rec.R_BODY_START]) - pos - _RECONSUME_BEFORE_BODY
        _I32.pack_into(out, at, reconsume_times)
    return out


def edit_properties(
    raw: bytes,
    remove: frozenset[bytes] | set[bytes] = frozenset(),
    add: dict[str, str] | None = None,
) -> bytes:
    """RocketMQ's properties string ``raw`` without the pairs named in ``remove`` and with
    ``add`` appended (an added name replaces the stored pair). Pairs kept are kept byte for
    byte, in their order."""
    drop = set(remove)
    if add:
        drop.update(name.encode() for name in add)
    kept = [pair for pair in raw.split(b"\x02") if pair and pair.split(b"\x01", 1)[0] not in drop]
    out = b"".join(pair + b"\x02" for pair in kept)
    if add:
        out += "".join(f"{k}\x01{v}\x02" for k, v in add.items()).encode()
    return out


def property_value(raw: bytes, name: bytes) -> str | None:
    """The value of property ``name`` in ``raw`` (RocketMQ's rules: empty values absent)."""
    for pair in raw.split(b"\x02"):
        key, sep, value = pair.partition(b"\x01")
        if sep and key == name and value:
            return value.decode("utf-8", "replace")
    return None
