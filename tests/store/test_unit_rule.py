"""One rule for a consume-queue unit and its record (``units_match``), used by the store,
the consumers' reader, the Spark scan and a TCP pull's copy (``copy_records``): a unit that
points at a record of another topic, queue or queue offset (same size and place otherwise)
is never served, and a unit with a damaged size serves nothing."""

from __future__ import annotations

import os

import numpy as np
import pytest

from shmq.codec.consume_queue import CQ_UNIT_DTYPE
from shmq.store import GetStatus, MessageStore
from shmq.store.fetch import Fetch
from shmq.store.reader import StoreReader

CQ_FILE = 20 * 64


def taken(phys, sizes, queue_offsets) -> Fetch:
    """A read's answer that took these units (as the fetch rule would hand them over)."""
    cols = (np.asarray(c, dtype=np.int64) for c in (phys, sizes, queue_offsets))
    return Fetch(GetStatus.FOUND, 0, 0, 0, *cols)


@pytest.mark.parametrize("steal", ["topic", "queue offset"])
def test_a_unit_pointing_at_another_topics_record_is_not_served(tmp_path, steal):
    root = str(tmp_path / "store")
    opts = {"mapped_file_size_commit_log": 1 << 20, "mapped_file_size_consume_queue": CQ_FILE}
    with MessageStore.open(root, **opts) as store:
        a0 = store.put("A", 0, b"a" * 50)
        store.put("A", 0, b"b" * 50)
        if steal == "topic":  # B's second record: same size, queue id and queue offset
            store.put("B", 0, b"c" * 50)
            other = store.put("B", 0, b"c" * 50)
        else:  # A's third record: same topic, size and queue id, queue offset 2
            other = store.put("A", 0, b"d" * 50)
        store.dispatch()
        assert store.get("A", 0, 0).messages[0].physical_offset == a0.physical_offset
    # point A's unit 1 at the other record: same size, same queue id
    [name] = os.listdir(os.path.join(root, "consumequeue", "A", "0"))
    path = os.path.join(root, "consumequeue", "A", "0", name)
    with open(path, "r+b") as f:
        units = np.frombuffer(bytearray(f.read()), dtype=CQ_UNIT_DTYPE)
        units[1]["offset"] = other.physical_offset
        f.seek(0)
        f.write(units.tobytes())
    with MessageStore.open(root, **opts) as store:
        got = store.get("A", 0, 0, max_count=2).messages
        assert [m.body for m in got] == [b"a" * 50]
    reader = StoreReader(root, 1 << 20, CQ_FILE)
    try:
        msgs, _ = reader.read_queue("A", 0, 0, 2, 2)
        assert [m.body for m in msgs] == [b"a" * 50]
        batch, _ = reader.read_queue_bulk("A", 0, 0, 2, 2)
        assert len(batch) == 1
        fetch = taken(units["offset"][:2], units["size"][:2], np.arange(2))
        body, copied = reader.copy_records("A", 0, fetch)
        assert copied == 1 and body.size == int(units["size"][0])
    finally:
        reader.close()


@pytest.mark.parametrize("size", [-(2**31), -1, 0, 2**31 - 1])
def test_a_unit_with_a_damaged_size_serves_nothing(tmp_path, size):
    """A TCP pull sizes its copy by the units: a negative or huge size neither fails the
    pull nor costs a buffer of that size, and the units after it are still served."""
    root = str(tmp_path / "store")
    with MessageStore.open(root, mapped_file_size_commit_log=1 << 20) as store:
        puts = [store.put("A", 0, b"%d" % i * 40) for i in range(3)]
        store.dispatch()
    reader = StoreReader(root, 1 << 20, 300_000 * 20)
    try:
        phys = np.array([p.physical_offset for p in puts], dtype=np.int64)
        units, _ = reader.units("A", 0, 0, 3)
        sizes = units["size"].astype(np.int64)
        sizes[1] = size
        body, copied = reader.copy_records("A", 0, taken(phys, sizes, np.arange(3)))
        assert copied == 2
        assert body.size == int(sizes[0] + sizes[2])
    finally:
        reader.close()
