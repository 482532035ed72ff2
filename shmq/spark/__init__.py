"""PySpark data source for shmq topics: batch and Structured Streaming, read and write.

Usage (pyspark >= 4.2, Spark running on the broker's host)::

    df = (spark.read.format("shmq")
          .option("namesrv", "127.0.0.1:9876")      # or .option("store", "/path/to/store")
          .option("topic", "Orders")
          .load())
    df.write.format("shmq").option("namesrv", "127.0.0.1:9876").option("topic", "Out").save()

Spark's Python workers import this package, so ``PYSPARK_PYTHON`` must be an interpreter
where shmq is installed (tests and examples set it to ``sys.executable``). Where shmq is
installed by ``pip install``, format "shmq" needs no registration: the wheel's top-level
package ``pyspark_shmq`` is found by PySpark's lookup of ``pyspark_*`` modules. An editable
install (``pip install -e``) is invisible to that lookup: call ``shmq.spark.register(spark)``.
Importing this package does not import pyspark; ``register`` does.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(spark: Any) -> None:
    """Register format ``"shmq"`` with ``spark`` (a ``SparkSession``)."""
    from shmq.spark.source import ShmqDataSource

    spark.dataSource.register(ShmqDataSource)
