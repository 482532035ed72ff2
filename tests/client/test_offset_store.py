"""The offset stores: the local (broadcasting) one survives a restart and falls back to its
backup; the broker (clustering) one commits a queue given away before it is let go."""

from __future__ import annotations

import os
import threading

import pytest

from shmq.client.consumer.offset_store import LocalFileOffsetStore, RemoteBrokerOffsetStore
from shmq.client.types import MessageQueue
from shmq.errors import ConfigError

MQ0, MQ1 = MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 1)


def test_persist_and_reload(tmp_path):
    store = LocalFileOffsetStore(str(tmp_path), "inst", "g")
    assert store.read(MQ0) == -1
    store.update(MQ0, 5)
    store.update(MQ0, 3, increase_only=True)
    store.update(MQ1, 7)
    store.persist()
    again = LocalFileOffsetStore(str(tmp_path), "inst", "g")
    assert again.read(MQ0) == 5 and again.read(MQ1, from_store=True) == 7
    assert store.path == os.path.join(str(tmp_path), "inst", "g", "offsets.json")


def test_corrupt_file_falls_back_to_backup_then_errors(tmp_path):
    store = LocalFileOffsetStore(str(tmp_path), "inst", "g")
    store.update(MQ0, 1)
    store.persist()
    store.update(MQ0, 2)
    store.persist()  # the first version is now the .bak
    with open(store.path, "w") as f:
        f.write("{not json")
    assert LocalFileOffsetStore(str(tmp_path), "inst", "g").read(MQ0) == 1
    with open(store.path + ".bak", "w") as f:
        f.write("[]")
    with pytest.raises(ConfigError, match="unreadable"):
        LocalFileOffsetStore(str(tmp_path), "inst", "g")


class _SlowBroker:
    """The reader side of a ``RemoteBrokerOffsetStore``: commits land in ``committed`` and
    the first one waits for ``go`` (a commit still on the wire)."""

    def __init__(self) -> None:
        self.committed: dict[MessageQueue, int] = {}
        self.started = threading.Event()
        self.go = threading.Event()

    def commit(self, mq: MessageQueue, offset: int) -> None:
        if not self.started.is_set():
            self.started.set()
            assert self.go.wait(10)
        self.committed[mq] = offset


def test_a_persist_returns_only_once_an_earlier_commit_of_its_queue_landed():
    """The orderly hand-over race CI caught: the timer's persist took a queue's offset and
    was still committing it when a rebalance persisted the queue (nothing left to commit)
    and unlocked it; the next owner read no offset and consumed the queue again from 0."""
    broker = _SlowBroker()
    store = RemoteBrokerOffsetStore(broker)  # type: ignore[arg-type]
    mq = MessageQueue("T", "b", 6)
    store.update(mq, 672)
    timer = threading.Thread(target=store.persist)
    timer.start()
    assert broker.started.wait(10)
    released = threading.Event()
    rebalance = threading.Thread(target=lambda: (store.persist([mq]), released.set()))
    rebalance.start()
    assert not released.wait(0.3)  # the queue is not let go while its offset is in flight
    broker.go.set()
    assert released.wait(10)
    assert broker.committed == {mq: 672}
    timer.join(10)
    rebalance.join(10)
