"""The driver's view of a store: which (topic, queue)s exist and their min and max offsets.

Spark plans on the driver and reads on executors of the same host, so planning needs the
store's location and, per queue, the offsets that bound what can be read:

* with ``namesrv``, the broker is found through the name server and asked once for its
  store (``GET_STORE_INFO``: path, file sizes, shared segment names); max offsets then come
  from the broker's shared queue table, which reput publishes after the consume-queue units
  are written: no socket hop per trigger, and never a unit that is half written;
* with ``store`` alone (a broker's ``storePathRootDir``, live or not), max offsets are the
  valid units of each queue's last consume-queue file; the last unit is checked against
  the CommitLog record it points to, so a unit that reput is writing right now is not
  counted yet.

Min offsets always come from the files: the first consume-queue unit whose record is
still in the CommitLog (cleanup deletes CommitLog files first and consume-queue files only
when they are wholly below the CommitLog's new start).
"""

from __future__ import annotations

import contextlib
import os

import numpy as np

from shmq import json_file
from shmq.client.admin.remote import Remote
from shmq.codec.consume_queue import (
    BLANK_UNIT_SIZE,
    CQ_UNIT_DTYPE,
    CQ_UNIT_SIZE,
    count_valid_units,
)
from shmq.errors import ConfigError, ShmqError, StoreError
from shmq.ipc import queue_table as qt
from shmq.ipc import topic_table as tt
from shmq.ipc.segment import Segment
from shmq.remoting.protocol import RequestCode
from shmq.spark.options import ReadOptions
from shmq.spark.spec import StoreLayout
from shmq.store.mapped_file import MappedFile

DEFAULT_COMMITLOG_FILE_SIZE = 1 << 30
DEFAULT_CQ_FILE_SIZE = 300_000 * CQ_UNIT_SIZE


def _store_files(directory: str) -> list[str]:
    """The 20-digit store file names of ``directory``, oldest first."""
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(n for n in names if len(n) == 20 and n.isdigit())


def _first_file_size(directory: str, depth: int) -> int | None:
    """The size of some store file ``depth`` directories below ``directory``."""
    if depth == 0:
        for name in _store_files(directory):
            with contextlib.suppress(OSError):
                return os.path.getsize(os.path.join(directory, name))
        return None
    try:
        children = sorted(os.listdir(directory))
    except OSError:
        return None
    for child in children:
        size = _first_file_size(os.path.join(directory, child), depth - 1)
        if size:
            return size
    return None


def layout_from_dir(root: str) -> StoreLayout:
    """A store's layout read from its files: file sizes are those of the files present."""
    root = os.path.abspath(root)
    if not os.path.isdir(os.path.join(root, "commitlog")):
        raise ConfigError(
            f"option store: {root} is not a shmq store (no commitlog directory); give the "
            "broker's storePathRootDir"
        )
    return StoreLayout(
        root,
        _first_file_size(os.path.join(root, "commitlog"), 0) or DEFAULT_COMMITLOG_FILE_SIZE,
        _first_file_size(os.path.join(root, "consumequeue"), 2) or DEFAULT_CQ_FILE_SIZE,
    )


class _QueueTable:
    """The broker's shared queue table (directory + max offsets), attached read-only."""

    def __init__(self, name: str) -> None:
        self.segment = Segment.attach(name, readonly=True)
        self.directory = qt.QueueDirectory(self.segment.buf, self.segment.words)
        self.maxima = qt.max_offsets(self.segment.buf)

    def queues(self) -> list[tuple[str, int]]:
        self.directory.refresh()
        return [(t.decode(), q) for (t, q) in self.directory.slots]

    def max_offset(self, topic: str, queue_id: int) -> int | None:
        slot = self.directory.slot(topic.encode(), queue_id)
        return int(self.maxima[slot]) if slot >= 0 else None

    def close(self) -> None:
        self.maxima = None
        self.segment.close()


def broker_store_info(opts: ReadOptions) -> dict:
    """Ask the name server for the master brokers and the chosen one (option ``broker``)
    for its store."""
    namesrv, broker = opts.namesrv, opts.broker
    assert namesrv is not None
    remote = Remote(namesrv, credentials=opts.credentials, tls=opts.tls)
    with contextlib.closing(remote):
        masters = dict(remote.masters())
        if broker is not None:
            if broker not in masters:
                known = ", ".join(sorted(masters)) or "none"
                raise ConfigError(
                    f"option broker: no master broker {broker!r} is registered with namesrv "
                    f"{namesrv} (masters: {known})"
                )
            masters = {broker: masters[broker]}
        if not masters:
            raise ConfigError(f"option namesrv: no master broker is registered with {namesrv}")
        if len(masters) > 1:
            raise ConfigError(
                f"option namesrv: {namesrv} knows several master brokers "
                f"({', '.join(sorted(masters))}); choose one with option broker (one query "
                "reads one broker's store)"
            )
        (target,) = masters.items()
        return remote.call(target, RequestCode.GET_STORE_INFO)[1]


def _topic_table_names(name: str) -> set[str]:
    """The topics of a broker's shared topic table (its live topic configs)."""
    try:
        segment = Segment.attach(name, readonly=True)
    except ShmqError:  # the broker is gone: its topics.json still tells
        return set()
    try:
        _, table = tt.read_topics(segment.buf, segment.words)
    except ShmqError:
        table = {}
    finally:
        segment.close()
    return {topic.decode(errors="replace") for topic in table}


def _topics_json_names(config_dir: str) -> set[str]:
    """The topics of a broker's ``topics.json`` in ``config_dir``; none when it is missing
    or unreadable (a store written without a broker has none)."""
    try:
        data = json_file.load(os.path.join(config_dir, "topics.json"))
    except (OSError, ConfigError):
        return set()
    table = data.get("topicConfigTable") if isinstance(data, dict) else None
    return set(table) if isinstance(table, dict) else set()


class Catalog:
    """Queues and offsets of the store a query reads (driver only: holds mappings).
    ``info``: the broker's store info (GET_STORE_INFO), None for option ``store``."""

    def __init__(self, opts: ReadOptions, info: dict | None) -> None:
        self.opts = opts
        self.table: _QueueTable | None = None
        self.topic_table: str | None = None if info is None else info["topics"]
        if info is None:
            assert opts.store is not None
            self.layout = layout_from_dir(opts.store)
            self.where = f"the store {self.layout.root}"
        else:
            self.where = f"broker {info.get('brokerName')}"
            self.layout = StoreLayout(
                info["storePathRootDir"],
                int(info["mappedFileSizeCommitLog"]),
                int(info["consumeQueueFileSize"]),
            )
            try:
                self.table = _QueueTable(info["queues"])
            except ShmqError as exc:
                raise ConfigError(
                    f"option namesrv: broker {info.get('brokerName')} is not on this host or "
                    f"its shared memory is gone ({exc}); Spark must run on the broker's host"
                ) from None
        self.reader = self.layout.reader()

    @property
    def source(self) -> StoreLayout:
        """What executors read: the store's files."""
        return self.layout

    # -- queues ------------------------------------------------------------------------------

    def queues(self) -> list[tuple[str, int]]:
        """The subscribed (topic, queue id)s that exist now, sorted."""
        found: set[tuple[str, int]] = set()
        cq_root = os.path.join(self.layout.root, "consumequeue")
        topics = self.opts.topics
        if topics is None:
            try:
                topics = tuple(t for t in os.listdir(cq_root) if self.opts.matches(t))
            except FileNotFoundError:
                topics = ()
        for topic in topics:
            try:
                names = os.listdir(os.path.join(cq_root, topic))
            except (FileNotFoundError, NotADirectoryError):
                continue
            found.update((topic, int(q)) for q in names if q.isdigit())
        if self.table is not None:
            found.update(q for q in self.table.queues() if self.opts.matches(q[0]))
        return sorted(found)

    def topics(self) -> set[str]:
        """Every topic the store knows, messages or not: the broker's topic table (with
        ``namesrv``), the store's ``config/topics.json`` (a broker's store, live or not)
        and the topics that have consume queues."""
        cq_root = os.path.join(self.layout.root, "consumequeue")
        try:
            known = set(os.listdir(cq_root))
        except FileNotFoundError:
            known = set()
        if self.table is not None:
            known.update(t for t, _ in self.table.queues())
        if self.topic_table is not None:
            known.update(_topic_table_names(self.topic_table))
        known.update(_topics_json_names(os.path.join(self.layout.root, "config")))
        return known

    # -- offsets -----------------------------------------------------------------------------

    def max_offset(self, topic: str, queue_id: int) -> int:
        """The next offset to be written: everything below it can be read."""
        if self.table is not None:
            published = self.table.max_offset(topic, queue_id)
            if published is not None:
                return published
        return self._file_max_offset(topic, queue_id)

    def _file_max_offset(self, topic: str, queue_id: int) -> int:
        names = _store_files(self.layout.cq_dir(topic, queue_id))
        if not names:
            return 0
        size = self.layout.cq_file_size
        try:
            mf = MappedFile(os.path.join(self.layout.cq_dir(topic, queue_id), names[-1]), size,
                            readonly=True)  # fmt: skip
        except (OSError, StoreError):
            return int(names[-1]) // CQ_UNIT_SIZE  # being created: nothing in it yet
        try:
            first = mf.file_from_offset // CQ_UNIT_SIZE
            end = first + int(count_valid_units(mf.buf, 0, size // CQ_UNIT_SIZE))
            # Reput may be writing the last unit(s) right now: count a unit only once the
            # record it points to checks out (reput writes units of a batch in order).
            for _ in range(4):
                if end <= first or self._unit_complete(mf.buf, end - 1 - first, topic,
                                                       queue_id, end - 1):  # fmt: skip
                    break
                end -= 1
            return end
        finally:
            with contextlib.suppress(BufferError):
                mf.close()

    def _unit_complete(
        self, buf: np.ndarray, index: int, topic: str, queue_id: int, offset: int
    ) -> bool:
        """Whether the unit at ``index`` of ``buf`` (queue offset ``offset``) is blank, points
        at a record cleaned away, or owns its record (the store's one rule): a unit reput
        is still writing does not yet."""
        unit = np.frombuffer(buf, CQ_UNIT_DTYPE, count=1, offset=index * CQ_UNIT_SIZE)[0]
        phys, size = int(unit["offset"]), int(unit["size"])
        if size == BLANK_UNIT_SIZE or self.reader.commitlog.file_at(phys) is None:
            return True  # padding, or cleaned: nothing to check it against, nothing to read
        one = (np.array([value], dtype=np.int64) for value in (phys, size, offset))
        return any(ok.size for _, _, ok in self.reader.records(topic, queue_id, *one))

    def commitlog_min(self) -> int:
        names = _store_files(os.path.join(self.layout.root, "commitlog"))
        return int(names[0]) if names else 0

    def min_offset(self, topic: str, queue_id: int, max_offset: int | None = None) -> int:
        """The first offset whose message is still stored (``max_offset`` when none is)."""
        high = self.max_offset(topic, queue_id) if max_offset is None else max_offset
        return self.reader.min_offset(topic, queue_id, high, self.commitlog_min())

    def offset_by_time(
        self, topic: str, queue_id: int, timestamp_ms: int, low: int, high: int
    ) -> int:
        """The first offset in ``[low, high)`` stored at or after ``timestamp_ms``."""
        return self.reader.offset_by_time(topic, queue_id, timestamp_ms, low, high)

    def refresh(self) -> None:
        """Forget mappings of files that cleanup may have deleted since the last plan."""
        self.reader.close()
        self.reader = self.layout.reader()

    def close(self) -> None:
        self.reader.close()
        if self.table is not None:
            self.table.close()
            self.table = None
