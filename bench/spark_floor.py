"""The floor of a Python data source's batch read: a source that decodes nothing.

``spark_bench`` writes the Arrow record batches of the shmq read, one Arrow IPC file per
input partition, and format ``shmq_floor`` yields them back: each task memory-maps its
file and yields its batches as they are (zero-copy), so what Spark measures is only the
Python -> JVM Arrow hand-off of exactly the batches the shmq source hands over (same schema,
rows, batch sizes and partitioning). A shmq read can approach this rate, not pass it.

Options: ``path`` (the directory of ``part-<n>.arrow`` files), ``includeProperties`` and
``includeHeaders`` (the shmq schema the files were written with).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from shmq.spark.options import parse_bool
from shmq.spark.source import read_schema


def write_partitions(path: str, partitions: Sequence[Iterator[pa.RecordBatch]],
                     schema: pa.Schema) -> int:  # fmt: skip
    """Write each partition's batches to ``path/part-<n>.arrow``; the rows written."""
    os.makedirs(path, exist_ok=True)
    rows = 0
    for n, batches in enumerate(partitions):
        file = os.path.join(path, f"part-{n}.arrow")
        with pa.OSFile(file, "wb") as sink, pa.ipc.new_file(sink, schema) as out:
            for batch in batches:
                out.write_batch(batch)
                rows += batch.num_rows
    return rows


@dataclass(frozen=True)
class FloorPartition(InputPartition):
    file: str


class FloorReader(DataSourceReader):
    def __init__(self, path: str) -> None:
        self.path = path

    def partitions(self) -> Sequence[InputPartition]:
        names = sorted(f for f in os.listdir(self.path) if f.endswith(".arrow"))
        return [FloorPartition(os.path.join(self.path, f)) for f in names]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, FloorPartition)
        with pa.memory_map(partition.file) as source:
            reader = pa.ipc.open_file(source)
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i)


class FloorDataSource(DataSource):
    """``spark.read.format("shmq_floor").option("path", dir)``."""

    @classmethod
    def name(cls) -> str:
        return "shmq_floor"

    def schema(self) -> StructType:
        return read_schema(
            parse_bool(self.options.get("includeProperties"), "includeProperties", False),
            parse_bool(self.options.get("includeHeaders"), "includeHeaders", False),
        )

    def reader(self, schema: StructType) -> DataSourceReader:
        return FloorReader(self.options["path"])
