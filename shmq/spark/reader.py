"""Spark readers of the ``shmq`` source: batch and Structured Streaming.

Planning (``partitions``, offsets) runs in Spark's Python planner processes on the driver
and uses a ``Catalog`` of the store; reading runs on executors, which get only picklable
``ShmqPartition``\\ s and a ``ScanSpec`` and map the store's files themselves. Readers keep
no open file on ``self`` when Spark pickles them (``__getstate__`` drops the catalog).

Streaming offsets are JSON ``{"Topic": {"queueId": nextOffset}}``; Spark checkpoints them,
and a restarted query plans the same ranges from them, so each message is read exactly once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

import shmq.spark.planning as planning
import shmq.spark.remote as remote
import shmq.spark.scan as scan
from shmq.client.transport.chooser import broker_is_local
from shmq.errors import ConfigError, DataLossError
from shmq.names import is_system_topic
from shmq.spark.catalog import Catalog, broker_store_info
from shmq.spark.options import (
    EARLIEST,
    LATEST,
    ReadOptions,
    offsets_from_json,
    offsets_to_json,
)
from shmq.spark.planning import Queue, QueueRange
from shmq.spark.remote import RemoteCatalog
from shmq.spark.spec import BrokerSource, ScanSpec, StoreLayout

log = logging.getLogger(__name__)

LISTED_TOPICS = 20  # existing topics an error about a missing one lists at most


@dataclass(frozen=True)
class ShmqPartition(InputPartition):
    """One Spark input partition: offsets ``[start, end)`` of one queue, and where to read
    them: the store's files, or the broker to pull them from (the executor's reader was
    pickled before planning, so it cannot know)."""

    topic: str
    queue_id: int
    start: int
    end: int
    source: StoreLayout | BrokerSource


def _partitions(
    ranges: list[QueueRange], source: StoreLayout | BrokerSource
) -> list[InputPartition]:
    return [ShmqPartition(r.topic, r.queue_id, r.start, r.end, source) for r in ranges]


def _missing_topics(missing: list[str], known: set[str], where: str, opts: ReadOptions) -> str:
    """The error for topics that do not exist: which, where, the topics that do (and how
    to list them all), and the option that reads topics that may not exist yet."""
    names = ", ".join(repr(t) for t in missing)
    subject = f"topic {names} does" if len(missing) == 1 else f"topics {names} do"
    listed = sorted(t for t in known if not is_system_topic(t))
    if not listed:
        there = "it has no topics"
    else:
        more = len(listed) - LISTED_TOPICS
        there = "its topics: " + ", ".join(listed[:LISTED_TOPICS])
        there += f", … ({more} more)" if more > 0 else ""
    if opts.namesrv is not None:
        there += f"; `shmq admin topic-list --namesrv {opts.namesrv}` lists them"
    return (
        f"{subject} not exist in {where} ({there}). Create it first, or "
        "subscribe with option topicPattern, which reads topics that may not exist yet"
    )


def open_catalog(opts: ReadOptions) -> Catalog | RemoteCatalog:
    """The catalog of the query's store: its files (option ``store``, or a broker whose
    store is on this host), or the broker's answers over TCP (``remote``) when its store
    is elsewhere or option ``transport`` is ``tcp``."""
    if opts.store is not None:
        return Catalog(opts, None)
    assert opts.namesrv is not None
    info = broker_store_info(opts)
    if opts.transport == "tcp" or (opts.transport == "auto" and not broker_is_local(info)):
        return RemoteCatalog(opts, info["brokerAddr"])
    return Catalog(opts, info)


class _CatalogUser:
    """Readers open the catalog lazily on the driver and never pickle it."""

    opts: ReadOptions
    _catalog: Catalog | RemoteCatalog | None

    @property
    def catalog(self) -> Catalog | RemoteCatalog:
        if self._catalog is None:
            self._catalog = open_catalog(self.opts)
        return self._catalog

    def _bounds(self) -> dict[Queue, tuple[int, int]]:
        """(min, max) offset of every subscribed queue now."""
        cat = self.catalog
        cat.refresh()
        out = {}
        for topic, qid in cat.queues():
            high = cat.max_offset(topic, qid)
            out[(topic, qid)] = (cat.min_offset(topic, qid, high), high)
        return out

    def _check_topics(self, bounds: dict[Queue, tuple[int, int]]) -> None:
        """Fail when a topic named by option ``topic``/``topics`` does not exist: a typo
        would otherwise read as 0 rows without a word. A topic that exists without
        messages reads as 0 rows, and so does a ``topicPattern`` that matches nothing."""
        if self.opts.topics is None:
            return
        have = {topic for topic, _ in bounds}
        unseen = [t for t in self.opts.topics if t not in have]
        if not unseen:
            return
        known = self.catalog.topics()
        missing = [t for t in unseen if t not in known]
        if missing:
            raise ConfigError(_missing_topics(missing, known, self.catalog.where, self.opts))

    def _pinned(self, bounds: dict[Queue, tuple[int, int]], *, starting: bool) -> dict[Queue, int]:
        """Offsets the starting (or ending) timestamp options give: per queue, the first
        offset stored at or after the timestamp (storeTimestamp, RocketMQ's searchOffset).
        When no message is that new, an ending one reads to the max offset, and a starting
        one fails unless ``startingOffsetsByTimestampStrategy`` is ``latest`` (Kafka's rules)."""
        opts = self.opts
        if starting:
            wanted = planning.queue_timestamps(
                bounds, opts.starting_timestamp, opts.starting_by_timestamp
            )
        else:
            wanted = planning.queue_timestamps(
                bounds, opts.ending_timestamp, opts.ending_by_timestamp
            )
        out: dict[Queue, int] = {}
        for queue, timestamp in wanted.items():
            low, high = bounds[queue]
            found = self.catalog.offset_by_time(queue[0], queue[1], timestamp, low, high)
            if found >= high and starting and opts.starting_timestamp_strategy == "error":
                option = (
                    "startingTimestamp"
                    if opts.starting_timestamp is not None
                    else "startingOffsetsByTimestamp"
                )
                raise ConfigError(
                    f"option {option}: {queue[0]} queue {queue[1]} has no message stored at or "
                    f"after {timestamp} (its offsets [{low}, {high})); set option "
                    "startingOffsetsByTimestampStrategy=latest to start such queues at their "
                    "max offset"
                )
            out[queue] = found
        return out

    def _explicit_starts(self, pinned: dict[Queue, int]) -> list[Queue]:
        """Queues whose start ``startingOffsets`` names as a number (not -2/-1) and no
        timestamp option overrides: a start below the queue's min offset is data loss."""
        if not isinstance(self.opts.starting, dict):
            return []
        named = planning.flatten(self.opts.starting).items()
        return [q for q, o in named if o >= 0 and q not in pinned]

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_catalog"] = None
        return state

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Runs on an executor: decode the partition's range from the store's files, or
        pull it from the broker."""
        if not isinstance(partition, ShmqPartition):
            return  # Spark's placeholder partition when there is nothing to read
        opts = self.opts
        spec = ScanSpec(partition.source, opts.tags, opts.include_properties,
                        opts.fail_on_data_loss, opts.sql, opts.include_headers)  # fmt: skip
        read = remote.read_range if isinstance(partition.source, BrokerSource) else scan.read_range
        yield from read(spec, partition.topic, partition.queue_id, partition.start, partition.end)


class ShmqBatchReader(_CatalogUser, DataSourceReader):
    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self._catalog = None

    def partitions(self) -> Sequence[InputPartition]:
        opts = self.opts
        try:
            bounds = self._bounds()
            self._check_topics(bounds)
            pinned = self._pinned(bounds, starting=True)
            starts = planning.resolve(opts.starting, bounds, default=EARLIEST, pinned=pinned)
            ends = planning.resolve(
                opts.ending, bounds, default=LATEST, pinned=self._pinned(bounds, starting=False)
            )
            explicit = self._explicit_starts(pinned)
            ranges = planning.batch_ranges(starts, ends, bounds, opts.fail_on_data_loss, explicit)
            source = self.catalog.source
        finally:
            if self._catalog is not None:
                self._catalog.close()
                self._catalog = None
        return _partitions(
            planning.split(ranges, opts.max_rows_per_partition, opts.min_partitions), source
        )


class ShmqStreamReader(_CatalogUser, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader. ``maxOffsetsPerTrigger`` becomes Spark's ``ReadMaxRows``, shared
    over queues in proportion to their lag; ``Trigger.AvailableNow`` stops at the maxima seen
    when the query started. ``minOffsetsPerTrigger`` holds micro-batches back in the source
    itself (see ``_holds``): Spark has no ReadLimit combining a minimum with a maximum.
    Queues that appear later are read from offset 0 (a queue whose first offsets were
    already cleaned then counts as data loss, as in Kafka's source)."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self._catalog = None
        self._target: dict[Queue, int] | None = None
        self._latest: dict[str, dict[str, int]] | None = None
        self._last_batch: float | None = None  # time.monotonic() of the last micro-batch

    def initialOffset(self) -> dict:
        bounds = self._bounds()
        self._check_topics(bounds)
        pinned = self._pinned(bounds, starting=True)
        start = planning.resolve(self.opts.starting, bounds, default=EARLIEST, pinned=pinned)
        for queue in self._explicit_starts(pinned):
            if queue in bounds:
                planning.check_start(
                    queue, start[queue], bounds[queue][0], self.opts.fail_on_data_loss
                )
        return offsets_to_json(planning.nest(start))

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_offsets_per_trigger
        return ReadMaxRows(n) if n is not None else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {q: high for q, (_, high) in self._bounds().items()}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = planning.flatten(offsets_from_json(start, "start offset"))
        latest = {q: high for q, (_, high) in self._bounds().items()}
        for queue, offset in begin.items():
            have = latest.get(queue)
            if have is None:  # no longer listed: its topic was deleted (or its queues cut)
                message = f"{queue[0]} queue {queue[1]} is gone (the query read it to {offset})"
                if self.opts.fail_on_data_loss:
                    raise DataLossError(message + "; set failOnDataLoss=false to go on without it")
                log.warning("%s; going on without it", message)
                latest[queue] = offset  # kept in the offsets, so it is read if it comes back
            elif have < offset:
                message = (
                    f"{queue[0]} queue {queue[1]}: its max offset {have} is below the "
                    f"query's offset {offset} (the queue was deleted or reset)"
                )
                if self.opts.fail_on_data_loss:
                    raise DataLossError(message + "; set failOnDataLoss=false to wait instead")
                log.warning("%s; waiting until it passes %d", message, offset)
                latest[queue] = offset
        self._latest = offsets_to_json(planning.nest(latest))
        if self._target is not None:
            latest = {q: min(o, self._target.get(q, begin.get(q, 0))) for q, o in latest.items()}
            latest = {q: max(o, begin.get(q, 0)) for q, o in latest.items()}
        elif self._holds(begin, latest):
            return start  # end == start: Spark runs no micro-batch and asks again
        if isinstance(limit, ReadMaxRows):
            latest = planning.cap(begin, latest, limit.max_rows)
        return offsets_to_json(planning.nest(latest))

    def _holds(self, begin: dict[Queue, int], latest: dict[Queue, int]) -> bool:
        """``minOffsetsPerTrigger``: hold the next micro-batch until that many rows are
        there or ``maxTriggerDelay`` has passed since the last one (or since the query
        (re)started). Never under ``Trigger.AvailableNow``, which ends at the first trigger
        with nothing new: holding would end it before its target."""
        new_rows = sum(planning.lags(begin, latest).values())
        now = time.monotonic()
        if self._last_batch is None:
            self._last_batch = now
        waited_ms = (now - self._last_batch) * 1000
        opts = self.opts
        if planning.holds(new_rows, opts.min_offsets_per_trigger, waited_ms,
                          opts.max_trigger_delay_ms):  # fmt: skip
            return True
        if new_rows:
            self._last_batch = now
        return False

    def reportLatestOffset(self) -> dict | None:
        return self._latest

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin = planning.flatten(offsets_from_json(start, "start offset"))
        stop = planning.flatten(offsets_from_json(end, "end offset"))
        cat = self.catalog
        cat.refresh()
        ranges = []
        for queue in sorted(stop):
            first, last = begin.get(queue, 0), stop[queue]
            if last <= first:
                continue
            low = cat.min_offset(queue[0], queue[1], last)
            first = planning.check_start(queue, first, low, self.opts.fail_on_data_loss)
            if last > first:
                ranges.append(QueueRange(queue[0], queue[1], first, last))
        return _partitions(
            planning.split(ranges, self.opts.max_rows_per_partition, self.opts.min_partitions),
            cat.source,
        )

    def commit(self, end: dict) -> None:
        """Nothing to release: the store keeps messages until its own retention expires."""

    def stop(self) -> None:
        if self._catalog is not None:
            self._catalog.close()
            self._catalog = None
