"""The writer and reput map only the CommitLog files they work in: a file they have moved past
is unmapped (issue 53, item 6: in a soak both agents' file-backed RSS grew with the store,
10 GB, because every page they ever touched stayed mapped). Counted from /proc/<pid>/maps
of the agent processes, after the store grew to several 1 MiB CommitLog files."""

from __future__ import annotations

import os

import pytest
from waiting import wait_for

from e2e_helpers import embedded
from shmq.client.producer.producer import Producer
from shmq.ipc import counters as cn

TOPIC = "Mapped"
FILES = 8  # CommitLog files written
BODY = 8 * 1024


def commitlog_files_mapped(pid: int, commitlog: str) -> set[str]:
    """The CommitLog files process ``pid`` maps now."""
    with open(f"/proc/{pid}/maps") as maps:
        fields = [line.split(maxsplit=5) for line in maps]
    return {f[5].strip() for f in fields if len(f) == 6 and os.path.dirname(f[5]) == commitlog}


@pytest.mark.parametrize("dispatch_inline", [True, False], ids=["writer-dispatches", "reput"])
def test_writer_and_reput_unmap_the_commitlog_files_behind_them(tmp_path, dispatch_inline):
    root = str(tmp_path / "store")
    with embedded(root, topics={TOPIC: 2}, dispatch_inline=dispatch_inline) as mq:
        broker = mq.broker
        file_size = broker.config.store.mapped_file_size_commit_log
        body = bytes(BODY)
        with Producer("mapped", mq.namesrv) as producer:
            for _ in range(FILES * file_size // (64 * BODY) + 1):
                producer.send_bulk(TOPIC, [body] * 64)
        words = broker.counters.words
        end = cn.load(words, cn.WRITE_OFFSET)
        assert end >= FILES * file_size
        wait_for(lambda: cn.load(words, cn.DISPATCHED_OFFSET) == end, what="reput to catch up")
        commitlog = os.path.join(root, "commitlog")
        on_disk = len(os.listdir(commitlog))
        agents = mq.stats()["agents"]
        # the file each appends to or dispatches from, and one more (a roll in progress,
        # a file the writer allocated ahead), out of the FILES or more on disk
        mapped = {
            kind: commitlog_files_mapped(agents[kind]["pid"], commitlog)
            for kind in ("writer", "reput")
            if kind in broker.group.kinds
        }
        assert on_disk > FILES
        counts = {kind: len(files) for kind, files in mapped.items()}
        assert max(counts.values()) <= 2, f"CommitLog files mapped {counts} of {on_disk}"
