"""A failed fdatasync (fsyncgate): the flush agent never retries it and never publishes a
flushed offset past it; the broker's store status refuses puts until a restart. The agent
runs here in the test's process on real shared memory and a real CommitLog; only the
``fdatasync`` system call is made to fail, as a dying disk would."""

from __future__ import annotations

import errno
import os

from shmq.broker.agents.broker_names import BrokerNames
from shmq.broker.agents.env import AgentEnv
from shmq.broker.agents.flush import Flush
from shmq.broker.config.broker_config import BrokerConfig
from shmq.ipc import counters as cn
from shmq.ipc import registry as rg
from shmq.ipc.segment import Segment, create_semaphore, new_prefix, unlink_prefix
from shmq.store import MessageStore


def test_a_failed_fdatasync_is_never_retried_nor_published(tmp_path, monkeypatch):
    root = str(tmp_path / "store")
    with MessageStore.open(root, mapped_file_size_commit_log=1 << 20) as store:
        store.put("T", 0, b"x" * 100)
        written = store.max_physical_offset
    config = BrokerConfig().replace(  # the flush alone: reput dispatches (no queue table here)
        store_path_root_dir=root, mapped_file_size_commit_log=1 << 20,
        flush_disk_type="SYNC_FLUSH", dispatch_inline=False,
    )  # fmt: skip
    names = BrokerNames(new_prefix())
    counters = Segment.create(names.counters, cn.SIZE)
    slots = (config.max_producers, config.max_consumers)
    registry = Segment.create(names.registry, rg.segment_size(*slots))
    sems = [create_semaphore(names.agent_sem(k)) for k in ("reput", "flush")]
    flush = None
    try:
        cn.init(counters.words, os.getpid(), 0)
        rg.init(registry.words, *slots)
        cn.publish(counters.words, cn.WRITE_OFFSET, written)
        flush = Flush(AgentEnv("flush", config, names, counters))

        def dying_disk(fd: int) -> None:
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(os, "fdatasync", dying_disk)
        assert flush.do_work() == 0
        monkeypatch.undo()  # the disk "works" again: a retry would now report success
        assert flush.do_work() == 0 and not flush.has_work()
        flush.drain()
        words = counters.words
        assert cn.load(words, cn.FLUSH_FAILED) == 1 and cn.load(words, cn.FLUSH_ERRORS) == 1
        assert cn.load(words, cn.FLUSHED_OFFSET) == 0
        assert "flush to disk failed" in cn.refuse_reason(words)
    finally:
        if flush is not None:
            flush.close()
        for sem in sems:
            sem.close()
        counters.destroy()
        registry.destroy()
        unlink_prefix(names.prefix)
