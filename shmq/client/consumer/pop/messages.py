"""The messages of a POP answer: decoded from its body (over TCP), or read by the client
from the store's files (on the broker's host: shmq's ``shmqLocal`` pop, answered with the
header only).

Either way each message is presented as RocketMQ's client presents it: with the popped
topic (a message from the group's POP retry topic too), its receipt handle in ``POP_CK``
(built by the rebuild rule unless the broker put one: it does for messages it re-encoded
from the retry topic), ``1ST_POP_TIME`` when it has none, and for a FIFO pop the delivery
count from ``orderCountInfo`` as its reconsumeTimes.

The local read takes the offsets the header lists (``msgOffsetInfo``), in the topic or, for
retry flag 1 or 2, the group's POP retry topic, looks their units up in the consume queue
and reads their records through ``StoreReader``, as the local pull consumers do.
"""

from __future__ import annotations

import numpy as np

from shmq.client.consumer.pop.batch import PopBatch
from shmq.client.consumer.pop.receipt import PopHeader, queue_topic, topic_flag
from shmq.codec import record as rec
from shmq.codec.pull_body import parse_records_anywhere
from shmq.errors import RemotingFrameError
from shmq.message import (
    PROPERTY_FIRST_POP_TIME,
    PROPERTY_POP_CK,
    MessageBatch,
    MessageExt,
    stored_message,
)
from shmq.pop_receipt import parse_receipt
from shmq.store.fetch import Fetch
from shmq.store.reader import StoreReader
from shmq.store.results import GetStatus


def _popped(
    msg: MessageExt, header: PopHeader, broker_name: str, topic: str, flag: str
) -> MessageExt:
    """``msg`` as a POP returns it (see the module docstring)."""
    props = msg.properties
    if PROPERTY_POP_CK not in props:
        receipt = header.receipt(broker_name, flag, msg.queue_id, msg.queue_offset)
        props[PROPERTY_POP_CK] = receipt.encode()
    props.setdefault(PROPERTY_FIRST_POP_TIME, str(header.pop_time))
    count = header.delivery_count(flag, msg.queue_id, msg.queue_offset)
    if count is not None:
        msg.reconsume_times = count
    msg.topic = topic
    return msg


def body_messages(body: bytes, header: PopHeader, broker_name: str, topic: str) -> list[MessageExt]:
    """The messages of a POP response's body (stored records back to back, each of its own
    topic and queue); ``RemotingFrameError`` when a record does not decode."""
    buf = np.frombuffer(body, dtype=np.uint8)
    buf.flags.writeable = False
    rows = np.zeros(buf.shape[0] // rec.RECORD_OVERHEAD + 1, dtype=rec.RECORD_ROW)
    n, code = parse_records_anywhere(buf, rows)
    if code != rec.PARSE_OK:
        raise RemotingFrameError(f"POP body of {topic}: record {n} does not decode "
                                 f"({rec.PARSE_REASONS[code]})")  # fmt: skip
    out = []
    for row in rows[:n]:
        start, length = int(row["topic_start"]), int(row["topic_len"])
        stored = bytes(buf[start : start + length]).decode("utf-8", "replace")
        msg = stored_message(body, int(row["pos"]), stored, int(row["queue_id"]),
                             int(row["queue_offset"]), int(row["phys_offset"]),
                             int(row["size"]))  # fmt: skip
        out.append(_popped(msg, header, broker_name, topic, topic_flag(stored)))
    return out


def _units(reader: StoreReader, topic: str, queue_id: int, offsets: list[int]) -> Fetch:
    """The units at ``offsets`` of a queue as a ``Fetch`` for ``StoreReader``'s record
    readers (an offset whose consume-queue file is gone is left out)."""
    offsets = sorted(offsets)
    phys, sizes, qoffs = [], [], []
    i = 0
    while i < len(offsets):
        units, _ = reader.units(topic, queue_id, offsets[i], offsets[-1] + 1)
        if not units.size:
            i += 1
            continue
        first = offsets[i]
        j = i + int(np.searchsorted(offsets[i:], first + units.shape[0]))
        picked = units[np.asarray(offsets[i:j], dtype=np.int64) - first]
        phys.append(picked["offset"].astype(np.int64))
        sizes.append(picked["size"].astype(np.int64))
        qoffs.append(np.asarray(offsets[i:j], dtype=np.int64))
        i = j

    def column(parts: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)

    return Fetch(GetStatus.FOUND, offsets[-1] + 1 if offsets else 0, 0, 0, column(phys),
                 column(sizes), column(qoffs))  # fmt: skip


def store_messages(
    reader: StoreReader, header: PopHeader, broker_name: str, topic: str, group: str
) -> list[MessageExt]:
    """The messages a local pop's header lists, read from the store's files."""
    out = []
    for (flag, queue_id), offsets in header.msg_offsets.items():
        real = queue_topic(topic, group, flag)
        for msg in reader.messages(real, queue_id, _units(reader, real, queue_id, offsets)):
            out.append(_popped(msg, header, broker_name, topic, flag))
    return out


def store_batch(
    reader: StoreReader, header: PopHeader, broker_name: str, topic: str, group: str,
    tags: frozenset[str] | None,
) -> PopBatch:  # fmt: skip
    """A local pop's messages as one ``PopBatch`` (``tags``: only those whose tag is one of
    them, the string check after the broker's hash filter)."""
    parts = []
    for (flag, queue_id), offsets in header.msg_offsets.items():
        real = queue_topic(topic, group, flag)
        fetch = _units(reader, real, queue_id, offsets)
        parts.append((flag, queue_id, reader.message_batch(real, queue_id, fetch, tags)))
    return PopBatch(topic, broker_name, header, parts)


def messages_batch(
    msgs: list[MessageExt], header: PopHeader, broker_name: str, topic: str
) -> PopBatch:
    """Popped messages (a TCP pop's) as one ``PopBatch``."""
    by_queue: dict[tuple[str, int], list[MessageExt]] = {}
    for msg in msgs:
        receipt = parse_receipt(msg.receipt_handle)
        by_queue.setdefault((receipt.retry_flag, receipt.queue_id), []).append(msg)
    parts = []
    for (flag, queue_id), queue in by_queue.items():
        parts.append((flag, queue_id, MessageBatch.of_messages(topic, queue_id, queue)))
    return PopBatch(topic, broker_name, header, parts)
