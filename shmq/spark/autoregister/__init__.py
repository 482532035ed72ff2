"""Installed as the top-level package ``pyspark_shmq``, so Spark registers format ``"shmq"``
by itself: PySpark (4.0+) imports every top-level ``pyspark_*`` module on the Python path and
registers its ``DefaultSource`` when a session first looks up a Python data source. No
``shmq.spark.register(spark)`` call is needed where this package is installed."""

from shmq.spark.source import ShmqDataSource as DefaultSource

__all__ = ["DefaultSource"]
