"""One local[2] SparkSession for every Spark test (start-up costs seconds), a namesrv and
broker for the session, and small direct stores for the cleanup tests.

Spark's Python workers must import shmq: they run ``PYSPARK_PYTHON`` (this interpreter) with
this checkout on ``PYTHONPATH``. Format "shmq" is found without ``shmq.spark.register``, as
after ``pip install``: the package ``pyspark_shmq`` (shmq/spark/autoregister, laid out as the
wheel installs it) is on the workers' path, and PySpark registers its ``DefaultSource``.
"""

from __future__ import annotations

import os
import shutil
import sys

import pytest
from waiting import wait_for

pytest.importorskip("pyspark", minversion="4.2")
pytest.importorskip("pyarrow")

from e2e_helpers import ROOT, cluster, shm_entries
from shmq.client.admin.admin import Admin
from shmq.client.transport.queue_reader import QueueReader
from shmq.errors import NoRouteError


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    site = tmp_path_factory.mktemp("site")
    shutil.copytree(os.path.join(ROOT, "shmq", "spark", "autoregister"), site / "pyspark_shmq")
    paths = [str(site), ROOT, os.environ.get("PYTHONPATH", "")]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("shmq-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.local.dir", str(tmp_path_factory.mktemp("spark-local")))
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    """A namesrv and a broker (1 MiB CommitLog files, 1024-unit consume-queue files)."""
    before = shm_entries()
    with cluster(tmp_path_factory.mktemp("cluster"), defaultTopicQueueNums=4) as c:
        yield c
    assert shm_entries() - before == set()


@pytest.fixture(scope="session")
def make_topic(broker):
    """``make_topic(name, queues)`` creates a topic and waits for its route."""

    def make(topic: str, queues: int = 4) -> str:
        _create_topic(broker, topic, queues)
        return topic

    return make


def _create_topic(c, topic: str, queues: int) -> None:
    with Admin(c.namesrv) as admin:
        admin.update_topic(topic, read_queue_nums=queues, write_queue_nums=queues)
    with QueueReader("probe", c.namesrv) as reader:

        def routed() -> bool:
            reader.routes.invalidate(topic)
            return len(reader.queues(topic)) == queues

        wait_for(routed, ignore=NoRouteError, what=f"{queues} routed queues of {topic}")
