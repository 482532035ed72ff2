"""Deleting a topic's stored messages: a record in the CommitLog, then a purge by reput.

A topic's consume queues belong to reput (the master's, a slave's, and recovery's), so a
deletion travels as data: the writer appends a record to ``DELETED_TOPIC_LOG`` whose body
is the topic's name, and moves the topic's next queue offsets past the next consume-queue
file boundary (``next_life_offset``); every dispatcher that meets the record deletes the
topic's consume-queue files below it (``ConsumeQueue.purge_below``). A slave purges at the
same place in the log as its master, and a crash before the purge is done replays it.

Queue offsets are never reused: a re-created topic's queues go on from the boundary, so an
offset a group, a reader's stale mapping or a Spark checkpoint holds never names a message
of the topic's next life, and no consume-queue file holds units of both lives.
"""

from __future__ import annotations

import zlib

from shmq.codec.record_pack import tail as record_tail
from shmq.message import validate_topic
from shmq.names import DELETED_TOPIC_LOG
from shmq.store.commitlog import CommitLog, ScanBatch

_TAIL = record_tail(DELETED_TOPIC_LOG.encode(), b"")


def append_deletion(commitlog: CommitLog, topic: str, queue_offset: int, now_ms: int) -> int:
    """Append the record that deletes ``topic`` (at ``queue_offset`` of the deletion log's
    queue 0); returns its physical offset. ``DiskFullError`` when no file has room."""
    body = validate_topic(topic)
    crc = zlib.crc32(body) & 0x7FFFFFFF
    return commitlog.append_one(body, _TAIL, crc, 0, 0, queue_offset, now_ms, now_ms)


def deleted_topic(batch: ScanBatch, row: int) -> str | None:
    """The topic a deletion record names, or None when its body is not a topic name."""
    start = int(batch.rows["body_start"][row])
    raw = batch.buf[start : start + int(batch.rows["body_len"][row])].tobytes()
    try:
        topic = raw.decode()
        validate_topic(topic)
    except (UnicodeDecodeError, ValueError):
        return None
    return topic
