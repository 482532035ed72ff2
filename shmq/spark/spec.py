"""What an executor reads a partition with: where from, a store's files (``StoreLayout``) or
a broker to pull from (``BrokerSource``), and the query's ``ScanSpec``.

Both read paths take these (``scan`` from the files, ``remote`` over PULL_MESSAGE), cap
their Arrow batches alike and report lost offsets alike, so they give the same rows and the
same errors; they are picklable, since Spark ships them to executors.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from shmq.errors import DataLossError
from shmq.remoting.security.credentials import Credentials
from shmq.remoting.security.tls import TlsOptions
from shmq.store.reader import StoreReader

log = logging.getLogger(__name__)

# Bytes of messages in one Arrow batch at most: well below Arrow's 2 GiB binary limit.
BATCH_BYTES = 256 << 20
DEFAULT_GROUP = "shmq-spark-reader"


@dataclass(frozen=True)
class StoreLayout:
    """Where a store is and its file sizes: all an executor needs to read it."""

    root: str
    commitlog_file_size: int
    cq_file_size: int

    def reader(self) -> StoreReader:
        return StoreReader(self.root, self.commitlog_file_size, self.cq_file_size)

    def cq_dir(self, topic: str, queue_id: int) -> str:
        return os.path.join(self.root, "consumequeue", topic, str(queue_id))


@dataclass(frozen=True)
class BrokerSource:
    """Where executors pull from: the broker's address, the group they pull as, and the
    query's credentials and TLS (the secret key stays out of the repr)."""

    address: str
    group: str = DEFAULT_GROUP
    credentials: Credentials | None = None
    tls: TlsOptions | None = None


@dataclass(frozen=True)
class ScanSpec:
    """Everything about a read that is the same for all of a query's partitions."""

    source: StoreLayout | BrokerSource  # the store's files, or the broker to pull from
    tags: frozenset[str] | None
    include_properties: bool
    fail_on_data_loss: bool
    sql: str | None = None  # a SQL92 filter over each message's properties and TAGS
    include_headers: bool = False  # Kafka's headers column (user properties)


def report_lost(topic: str, queue_id: int, start: int, end: int, what: str, fail: bool) -> None:
    """Offsets ``[start, end)`` are gone (``what`` was deleted by cleanup): a
    ``DataLossError``, or with ``failOnDataLoss=false`` a warning and they are skipped."""
    message = (
        f"{topic} queue {queue_id}: offsets [{start}, {end}) are gone from the store ({what} "
        "deleted by cleanup while the query ran)"
    )
    if fail:
        raise DataLossError(message + "; set option failOnDataLoss=false to skip them")
    log.warning("%s; skipped (failOnDataLoss=false)", message)
