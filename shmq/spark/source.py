"""The ``shmq`` data source: what Spark instantiates for ``format("shmq")``.

Spark creates the source in short-lived Python planner processes with the query's options,
asks it for the schema and then for readers or writers. Options are parsed here, once, so a
bad option fails the query before any job starts.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from shmq.errors import ConfigError
from shmq.spark.options import parse_bool, parse_read_options, parse_write_options
from shmq.spark.reader import ShmqBatchReader, ShmqStreamReader
from shmq.spark.writer import ShmqBatchWriter, ShmqStreamWriter, SinkColumns

_BASE: list[tuple[str, DataType]] = [
    ("topic", StringType()),
    ("queueId", IntegerType()),
    ("queueOffset", LongType()),
    ("commitLogOffset", LongType()),
    ("msgId", StringType()),
    ("keys", ArrayType(StringType())),
    ("tags", StringType()),
    ("body", BinaryType()),
    ("bornTimestamp", TimestampType()),
    ("storeTimestamp", TimestampType()),
    ("reconsumeTimes", IntegerType()),
]


def read_schema(include_properties: bool = False, include_headers: bool = False) -> StructType:
    """The rows a read yields (built in code: ``StructType.fromDDL`` needs a JVM, which
    Spark's Python workers do not have). ``headers`` has the type of Kafka's column."""
    fields = list(_BASE)
    if include_properties:
        fields.append(("properties", MapType(StringType(), StringType())))
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(("headers", ArrayType(header)))
    return StructType([StructField(name, t) for name, t in fields])


def _sink_columns(schema: StructType, topic_option: bool) -> SinkColumns:
    """Check the written DataFrame's columns: ``body`` (binary or string), ``topic``
    (string, unless option topic), optional ``tags`` (string), ``keys`` (string or
    array<string>), ``properties`` (map<string,string>); other columns are ignored."""
    types = {f.name: f.dataType for f in schema.fields}
    allowed: dict[str, tuple[type, ...]] = {
        "body": (BinaryType, StringType),
        "topic": (StringType,),
        "tags": (StringType,),
        "keys": (StringType, ArrayType),
        "properties": (MapType,),
    }
    if "body" not in types:
        raise ConfigError(
            "writing to shmq needs a column body (binary or string); columns: " + ", ".join(types)
        )
    if "topic" not in types and not topic_option:
        raise ConfigError("writing to shmq needs a column topic (string) or option topic")
    for name, kinds in allowed.items():
        t = types.get(name)
        if t is None:
            continue
        ok = isinstance(t, kinds)
        if isinstance(t, ArrayType):
            ok = isinstance(t.elementType, StringType)
        if isinstance(t, MapType):
            ok = isinstance(t.keyType, StringType) and isinstance(t.valueType, StringType)
        if not ok:
            raise ConfigError(
                f"column {name} of a DataFrame written to shmq has type {t.simpleString()}; "
                f"expected {' or '.join(k.__name__.replace('Type', '').lower() for k in kinds)}"
                + (" of strings" if name in ("keys", "properties") else "")
            )
    return SinkColumns("topic" in types, "tags" in types, "keys" in types, "properties" in types)


class ShmqDataSource(DataSource):
    """``spark.read.format("shmq")`` / ``readStream`` / ``write`` / ``writeStream``."""

    @classmethod
    def name(cls) -> str:
        return "shmq"

    def schema(self) -> StructType:
        return read_schema(
            parse_bool(self.options.get("includeProperties"), "includeProperties", False),
            parse_bool(self.options.get("includeHeaders"), "includeHeaders", False),
        )

    def _check_schema(self, schema: StructType) -> None:
        expected = self.schema()
        if schema != expected:
            raise ConfigError(
                "format shmq has a fixed schema; do not pass one to .schema() (expected "
                f"{expected.simpleString()}, got {schema.simpleString()})"
            )

    def reader(self, schema: StructType) -> DataSourceReader:
        self._check_schema(schema)
        return ShmqBatchReader(parse_read_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        self._check_schema(schema)
        return ShmqStreamReader(parse_read_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        opts = parse_write_options(self.options)
        if overwrite:
            raise ConfigError("shmq topics are append-only: use mode('append'), not overwrite")
        return ShmqBatchWriter(opts, _sink_columns(schema, opts.topic is not None))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        opts = parse_write_options(self.options)
        if overwrite:
            raise ConfigError("shmq topics are append-only: use outputMode('append')")
        return ShmqStreamWriter(opts, _sink_columns(schema, opts.topic is not None))
