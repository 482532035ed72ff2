"""Rows of Arrow batches sent through a producer: what both Spark sinks share.

Rows are grouped by topic and tags and sent with ``send_bulk`` (one encode per chunk, the
producer's fast path); rows that carry keys or user properties go through ``send_batch`` as
``Message``\\ s. A failed send raises ``SendError`` with the producer's reason, which fails
the Spark task. The at-least-once sink (``writer``) uses ``RowSender`` as it is; the
exactly-once sink (``transactional_sink``) overrides the two sends to store half messages.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shmq.client.producer.producer import Producer
from shmq.client.types import SendStatus
from shmq.errors import InvalidMessageError, SendError, ShmqError
from shmq.message import Message
from shmq.spark.options import WriteOptions


@dataclass(frozen=True)
class SinkColumns:
    """Which optional columns the written DataFrame has (checked on the driver)."""

    topic: bool
    tags: bool
    keys: bool
    properties: bool


def _first_null(arr: pa.Array) -> int:
    return int(np.argmax(np.asarray(arr.is_null())))


def body_buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """``(uint8 data, int64 boundaries from 0)`` of a binary/string Arrow array, no copy of
    the bytes (the producer's bulk path takes exactly this)."""
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        arr = arr.cast(pa.large_binary() if pa.types.is_large_string(arr.type) else pa.binary())
    large = pa.types.is_large_binary(arr.type)
    _, offs_buf, data_buf = arr.buffers()
    dtype = np.int64 if large else np.int32
    offsets = np.frombuffer(offs_buf, dtype=dtype, count=len(arr) + 1 + arr.offset)[arr.offset :]
    data = (
        np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.empty(0, np.uint8)
    )
    first, last = int(offsets[0]), int(offsets[-1])
    return data[first:last], offsets.astype(np.int64) - first


def _codes(arr: pa.Array) -> tuple[np.ndarray, list[str | None]]:
    """Group numbers of a string column's values (null is a group of its own)."""
    encoded = pc.dictionary_encode(arr, null_encoding="encode")
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    return np.asarray(encoded.indices.fill_null(0)), encoded.dictionary.to_pylist()


class RowSender:
    """Sends Arrow batches through one producer; counts what was sent. The sends of one
    chunk are ``_send_chunk`` / ``_send_list``: the transactional sink sends half
    messages there instead."""

    def __init__(self, opts: WriteOptions, cols: SinkColumns) -> None:
        self.opts = opts
        self.cols = cols
        self.sent = 0
        self.producer = self._producer()

    def _producer(self) -> Producer:
        o = self.opts
        return Producer(o.producer_group, o.namesrv, send_timeout=o.send_timeout,
                        credentials=o.credentials, tls=o.tls)  # fmt: skip

    def _send_chunk(
        self, topic: str, chunk: tuple[np.ndarray, np.ndarray], tags: str | None
    ) -> SendStatus:
        """Send one chunk of bodies of ``topic`` sharing ``tags``; its status."""
        return self.producer.send_bulk(topic, chunk, tags=tags).send_status

    def _send_list(self, messages: list[Message]) -> SendStatus:
        """Send messages of one topic; the first status that is not SEND_OK, if any."""
        return _status(self.producer.send_batch(messages))

    def close(self) -> None:
        self.producer.close()

    def send(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        body = batch.column("body")
        if body.null_count:
            raise InvalidMessageError(f"shmq sink: column body is null in row {_first_null(body)}")
        topics = None  # the option topic wins over a topic column, as in Kafka's sink
        if self.opts.topic is None:
            topics = batch.column("topic")
            if topics.null_count:
                raise InvalidMessageError(
                    f"shmq sink: column topic is null in row {_first_null(topics)} (or set "
                    "option topic)"
                )
        detailed = (self.cols.keys and batch.column("keys").null_count < batch.num_rows) or (
            self.cols.properties and batch.column("properties").null_count < batch.num_rows
        )
        if detailed:
            self._send_messages(batch, topics)
        else:
            self._send_bulk(batch, body, topics)

    def _send_bulk(self, batch: pa.RecordBatch, body: pa.Array, topics: pa.Array | None) -> None:
        if topics is None:
            topic_codes, topic_names = np.zeros(batch.num_rows, np.int64), [self.opts.topic]
        else:
            topic_codes, topic_names = _codes(topics)
        if self.cols.tags:
            tag_codes, tag_names = _codes(batch.column("tags"))
        else:
            tag_codes, tag_names = np.zeros(batch.num_rows, np.int64), [None]
        key = topic_codes.astype(np.int64) * len(tag_names) + tag_codes
        groups, inverse = np.unique(key, return_inverse=True)
        for g, k in enumerate(groups):
            topic = topic_names[int(k) // len(tag_names)]
            tags = tag_names[int(k) % len(tag_names)]
            part = (
                body if groups.shape[0] == 1 else body.take(pa.array(np.flatnonzero(inverse == g)))
            )
            data, offsets = body_buffers(part)
            step = self.opts.write_batch_size
            for a in range(0, offsets.shape[0] - 1, step):
                b = min(a + step, offsets.shape[0] - 1)
                chunk = (data[offsets[a] : offsets[b]], offsets[a : b + 1] - offsets[a])
                self._call(topic, b - a, lambda c=chunk, t=topic, g=tags: self._send_chunk(
                    t, c, g))  # fmt: skip

    def _send_messages(self, batch: pa.RecordBatch, topics: pa.Array | None) -> None:
        bodies = batch.column("body").to_pylist()
        topic_list = [self.opts.topic] * len(bodies) if topics is None else topics.to_pylist()
        tags = batch.column("tags").to_pylist() if self.cols.tags else [None] * batch.num_rows
        keys = batch.column("keys").to_pylist() if self.cols.keys else [None] * batch.num_rows
        props = (
            batch.column("properties").to_pylist() if self.cols.properties else [None] * len(bodies)
        )
        by_topic: dict[str, list[Message]] = {}
        for i, (b, t, g, k, p) in enumerate(
            zip(bodies, topic_list, tags, keys, props, strict=True)
        ):
            try:
                msg = Message(
                    t,
                    b,
                    tags=g,
                    keys=k if isinstance(k, str) else [x for x in (k or []) if x],
                    properties=dict(p) if p else None,
                )
            except ShmqError as exc:
                raise InvalidMessageError(f"shmq sink: row {i}: {exc}") from exc
            by_topic.setdefault(t, []).append(msg)
        step = self.opts.write_batch_size
        for topic, messages in by_topic.items():
            for a in range(0, len(messages), step):
                chunk = messages[a : a + step]
                self._call(topic, len(chunk), lambda c=chunk: self._send_list(c))

    def _call(self, topic: str, n: int, send) -> None:
        try:
            status = send()
        except ShmqError as exc:
            raise SendError(
                f"shmq sink: sending {n} messages to topic {topic} failed "
                f"({self.sent} sent before by this task): {exc}"
            ) from exc
        if status is not SendStatus.SEND_OK:
            raise SendError(
                f"shmq sink: sending {n} messages to topic {topic} ended with {status.name} "
                f"({self.sent} sent before by this task)"
            )
        self.sent += n


def _status(results) -> SendStatus:
    for r in results:
        if r.send_status is not SendStatus.SEND_OK:
            return r.send_status
    return SendStatus.SEND_OK
