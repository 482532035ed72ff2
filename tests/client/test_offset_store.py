"""The local (broadcasting) offset store: survives a restart, falls back to its backup."""

from __future__ import annotations

import os

import pytest

from shmq.client.offset_store import LocalFileOffsetStore
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
