"""A tiny store written and read once, so a process has its numba kernels compiled, or
loaded from numba's cache, before it serves anyone: the first call of a kernel with new
argument types costs from a few hundred milliseconds (a cache load) to seconds (a cold
compile), and whoever sends or reads first would wait for it."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator

from shmq import files
from shmq.config import MessageStoreConfig
from shmq.store.fetch import LOCAL, QueueBounds
from shmq.store.message_store import MessageStore
from shmq.store.reader import StoreReader
from shmq.store.results import parse_tag_filter

TOPIC = "WarmUp"


@contextlib.contextmanager
def scratch_store() -> Iterator[tuple[str, MessageStore]]:
    """A store in a temporary directory holding one dispatched message of ``TOPIC`` (tags,
    keys and properties), open; yields its root and the store."""
    with tempfile.TemporaryDirectory(prefix="shmq-warm-up-") as tmp:
        cfg = MessageStoreConfig(
            store_path_root_dir=tmp,
            mapped_file_size_commit_log=64 * 1024,
            mapped_file_size_consume_queue=20 * 64,
            max_hash_slot_num=16,
            max_index_num=32,
            preallocate_mapped_file_enable=False,
            # the process's file mode and group as they are: an embedded broker's
            store_file_mode=f"0{files.file_mode():o}",
            local_client_group=str(files.group()) if files.group() >= 0 else "",
        )
        with MessageStore(cfg) as store:
            store.put(TOPIC, 0, b"x", tags="t", keys=["k"])
            store.dispatch()
            yield tmp, store


def warm_up_reads() -> None:
    """The consumers' read path (``StoreReader``: the fetch rule over consume-queue units,
    with and without a tag filter, the units and their records in one call, records
    matched to their units, bulk bodies, records as stored), on read-only mappings as
    consumers have them."""
    with scratch_store() as (root, store):
        reader = StoreReader(root, store.config.mapped_file_size_commit_log,
                             store.config.consume_queue_file_size)  # fmt: skip
        bounds = QueueBounds(
            0, 1, 0, store.max_physical_offset, store.config.mapped_file_size_commit_log
        )
        try:
            for codes in (None, parse_tag_filter("t")):
                reader.fetch_messages(TOPIC, 0, 0, 32, codes, bounds)  # one kernel call
                fetch = reader.fetch(TOPIC, 0, 0, 32, codes, bounds, LOCAL)
                reader.messages(TOPIC, 0, fetch)
                reader.message_batch(TOPIC, 0, fetch, frozenset("t"))
                reader.copy_records(TOPIC, 0, fetch)
        finally:
            reader.close()
