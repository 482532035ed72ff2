"""Spark sinks of the ``shmq`` source: ``df.write`` and ``df.writeStream``.

Each task opens one producer and sends its Arrow batches (``sender.RowSender``). By default
delivery is at least once, as with Spark's Kafka sink: a task retried after some of its
sends succeeded sends them again, and so does an epoch replayed after a restart. With
option ``exactlyOnce=true`` the tasks store half messages that the driver's commit
delivers once per epoch (``transactional_sink``; option ``jobId`` makes a batch job that
is run again deliver nothing twice).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from shmq.spark import transactional_sink as tx
from shmq.spark.options import WriteOptions
from shmq.spark.sender import RowSender, SinkColumns

__all__ = ["ShmqBatchWriter", "ShmqCommitMessage", "ShmqStreamWriter", "SinkColumns"]


@dataclass
class ShmqCommitMessage(WriterCommitMessage):
    """What one task sent (at-least-once)."""

    messages: int


def _write(opts: WriteOptions, cols: SinkColumns, iterator: Iterator[pa.RecordBatch]) -> int:
    sender = RowSender(opts, cols)
    try:
        for batch in iterator:
            sender.send(batch)
        return sender.sent
    finally:
        sender.close()


class ShmqBatchWriter(DataSourceArrowWriter):
    """``df.write``: exactly once with ``exactlyOnce=true`` (a retried task's rows are
    rolled back; with ``jobId``, so are those of the job run again), else at least once."""

    def __init__(self, opts: WriteOptions, cols: SinkColumns) -> None:
        self.opts = opts
        self.cols = cols
        # made on the driver, the same in every task: a job's transaction scope
        self.job_scope = f"{tx.JOB_SCOPE_PREFIX}{opts.job_id or uuid.uuid4().hex}"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        if self.opts.exactly_once:
            return tx.write_halves(self.opts, self.cols, iterator, self.job_scope)
        return ShmqCommitMessage(_write(self.opts, self.cols, iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Exactly once: deliver the job's half messages. Otherwise messages are stored as
        they are sent; there is nothing to publish."""
        if self.opts.exactly_once:
            tx.commit_epoch(self.opts, messages)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Exactly once: roll the half messages back. Otherwise sent messages cannot be
        taken back (at-least-once, like Kafka's sink)."""
        if self.opts.exactly_once:
            tx.abort_epoch(self.opts, messages)


class ShmqStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream``: each micro-batch an epoch, delivered once with
    ``exactlyOnce=true``, at least once otherwise."""

    def __init__(self, opts: WriteOptions, cols: SinkColumns) -> None:
        self.opts = opts
        self.cols = cols

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        if self.opts.exactly_once:
            return tx.write_halves(self.opts, self.cols, iterator, None)
        return ShmqCommitMessage(_write(self.opts, self.cols, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Exactly once: deliver epoch ``batchId``'s half messages (once, also when it is
        replayed). Otherwise messages are stored as they are sent."""
        if self.opts.exactly_once:
            tx.commit_epoch(self.opts, messages, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Exactly once: roll the epoch's half messages back. Otherwise sent messages
        cannot be taken back (at-least-once, like Kafka's sink)."""
        if self.opts.exactly_once:
            tx.abort_epoch(self.opts, messages)
