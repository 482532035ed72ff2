"""One stored record's bytes as a message: what a broker sends a client when it asks about
a message it holds (``CHECK_TRANSACTION_STATE``, ``CONSUME_MESSAGE_DIRECTLY``)."""

from __future__ import annotations

import numpy as np

from shmq.codec import record as rec
from shmq.message import MessageExt, stored_message


def record_message(raw: bytes) -> MessageExt | None:
    """The message whose whole record is ``raw`` (RocketMQ's ``MessageDecoder.encode``: the
    body of a transaction check-back or of a direct consumption), or None when the bytes
    are not one valid record."""
    if len(raw) < rec.RECORD_OVERHEAD:
        return None
    buf = np.frombuffer(raw, dtype=np.uint8)
    rows = np.zeros(1, dtype=rec.RECORD_ROW)
    phys = int.from_bytes(raw[28:36], "big", signed=True)
    if rec.parse_at(buf, np.zeros(1, np.int64), len(raw), phys, True, rows) != 1:
        return None
    row = rows[0]
    if int(row["size"]) != len(raw):
        return None
    start, size = int(row["topic_start"]), int(row["topic_len"])
    topic = raw[start : start + size].decode("utf-8", "replace")
    return stored_message(raw, 0, topic, int(row["queue_id"]), int(row["queue_offset"]), phys,
                          len(raw))  # fmt: skip
