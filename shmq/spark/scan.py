"""Read one queue's offsets ``[start, end)`` from the store's files as Arrow batches.

This is what an executor runs for an input partition: consume-queue units give the
CommitLog positions, ``rec.parse_at`` decodes a run of records per CommitLog file, and
``decode.record_batch`` turns them into columns. Every decoded record is checked against its
unit (size, queue id, queue offset), so a stale or torn unit can never produce a wrong row.
Units or records that cleanup deleted are data loss: fail, or skip them with a warning.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shmq.codec import java_hash
from shmq.codec import record as rec
from shmq.errors import CorruptStoreError
from shmq.filter.sql92 import SqlFilter, compile_sql
from shmq.spark.decode import arrow_schema, record_batch, sql_matched
from shmq.spark.spec import BATCH_BYTES, ScanSpec, StoreLayout, report_lost
from shmq.store.reader import StoreReader, topic_bytes

# Units decoded per step: big enough to amortise Spark's per-batch cost (``BATCH_BYTES``
# caps a batch of large messages).
BATCH_ROWS = 65_536


def read_range(
    spec: ScanSpec, topic: str, queue_id: int, start: int, end: int
) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the messages at offsets ``[start, end)`` of one queue."""
    schema = arrow_schema(spec.include_properties, spec.include_headers)
    sql = None if spec.sql is None else compile_sql(spec.sql)
    codes = None
    wanted = None
    if spec.tags is not None:
        codes = np.array(sorted({java_hash(t) for t in spec.tags}), dtype=np.int64)
        wanted = pa.array(sorted(spec.tags), pa.string())
    layout = spec.source
    assert isinstance(layout, StoreLayout)
    reader = layout.reader()
    try:
        offset = start
        while offset < end:
            units, _ = reader.units(topic, queue_id, offset, min(end, offset + BATCH_ROWS))
            if units.size == 0:
                per_file = layout.cq_file_size // 20
                skip_to = min(end, (offset // per_file + 1) * per_file)
                report_lost(topic, queue_id, offset, skip_to, "consume-queue file",
                      spec.fail_on_data_loss)  # fmt: skip
                offset = skip_to
                continue
            # Copy out of the mapping: cleanup may unmap nothing, but a view must not
            # outlive the reader that owns the file.
            phys = units["offset"].astype(np.int64)
            sizes = units["size"].astype(np.int64)
            qoffs = np.arange(offset, offset + units.size, dtype=np.int64)
            if codes is not None:
                keep = np.isin(units["tags_code"].astype(np.int64), codes)
                phys, sizes, qoffs = phys[keep], sizes[keep], qoffs[keep]
            yield from _decode(reader, spec, topic, queue_id, phys, sizes, qoffs, schema, wanted,
                               sql)  # fmt: skip
            offset += units.size
    finally:
        reader.close()


def _decode(
    reader: StoreReader,
    spec: ScanSpec,
    topic: str,
    queue_id: int,
    phys: np.ndarray,
    sizes: np.ndarray,
    qoffs: np.ndarray,
    schema: pa.Schema,
    wanted: pa.Array | None,
    sql: SqlFilter | None,
) -> Iterator[pa.RecordBatch]:
    """Batches of the records at CommitLog offsets ``phys`` (ascending), per file, those
    ``sql`` matches when it is given."""
    file_size = reader.commitlog.file_size
    i = 0
    n = phys.shape[0]
    while i < n:
        file_start = int(phys[i]) - int(phys[i]) % file_size
        run_end = i + int(np.searchsorted(phys[i:], file_start + file_size))
        mf = reader.commitlog.file_at(file_start)
        if mf is None:
            report_lost(topic, queue_id, int(qoffs[i]), int(qoffs[run_end - 1]) + 1,
                  "CommitLog file", spec.fail_on_data_loss)  # fmt: skip
            i = run_end
            continue
        # Cap a batch's bytes as well as its rows.
        cum = np.cumsum(sizes[i:run_end])
        cut = i + max(1, int(np.searchsorted(cum, BATCH_BYTES, side="right")))
        run_end = min(run_end, cut)
        local = phys[i:run_end] - file_start
        rows = np.empty(run_end - i, dtype=rec.RECORD_ROW)
        got = rec.parse_at(mf.buf, local, mf.size, mf.file_from_offset, False, rows)
        ok = np.empty(got, dtype=np.bool_)
        rec.units_match(mf.buf, rows[:got], sizes[i:], qoffs[i:], topic_bytes(topic), queue_id,
                        ok)  # fmt: skip
        bad = np.flatnonzero(~ok)
        if got < run_end - i or bad.size:
            k = i + (int(bad[0]) if bad.size else got)
            raise CorruptStoreError(
                f"{topic} queue {queue_id} offset {int(qoffs[k])}: the consume-queue unit "
                f"points at CommitLog offset {int(phys[k])} (size {int(sizes[k])}), where no "
                "matching record is"
            )
        batch = record_batch(mf.buf, sql_matched(mf.buf, rows, sql), topic, schema)
        if wanted is not None:  # the units matched tag hashes; keep exact tags only
            batch = batch.filter(pc.fill_null(pc.is_in(batch.column(6), wanted), False))
        if batch.num_rows:
            yield batch
        i = run_end
