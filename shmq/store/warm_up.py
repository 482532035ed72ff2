"""A tiny store written and read once, so a process has its numba kernels compiled, or
loaded from numba's cache, before it serves anyone: the first call of a kernel with new
argument types costs from a few hundred milliseconds (a cache load) to seconds (a cold
compile), and whoever sends or reads first would wait for it."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator

from shmq.config import MessageStoreConfig
from shmq.store.message_store import MessageStore

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
        )
        with MessageStore(cfg) as store:
            store.put(TOPIC, 0, b"x", tags="t", keys=["k"])
            store.dispatch()
            yield tmp, store


def warm_up_reads() -> None:
    """The consumers' read path (``StoreReader``: consume-queue units, records matched to
    their units, tag filters, bulk bodies), on read-only mappings as consumers have them."""
    from shmq.store.reader import StoreReader
    from shmq.store.results import parse_tag_filter

    with scratch_store() as (root, store):
        reader = StoreReader(root, store.config.mapped_file_size_commit_log,
                             store.config.consume_queue_file_size)  # fmt: skip
        try:
            reader.read_queue(TOPIC, 0, 0, 1, 32)
            reader.read_queue(TOPIC, 0, 0, 1, 32, parse_tag_filter("t"))
            reader.read_queue_bulk(TOPIC, 0, 0, 1, 32)
            reader.read_queue_bulk(TOPIC, 0, 0, 1, 32, parse_tag_filter("t"), frozenset("t"))
        finally:
            reader.close()
