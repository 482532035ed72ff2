"""Shared fixtures: small stores (tiny files, so rolling and cleanup happen within a test)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator

import pytest
from bad_peers import Peer

from shmq.store import MessageStore

# Small enough that a few hundred messages roll across files.
SMALL_STORE = {
    "mapped_file_size_commit_log": 64 * 1024,
    "mapped_file_size_consume_queue": 20 * 64,
    "max_hash_slot_num": 256,
    "max_index_num": 512,
    "preallocate_mapped_file_enable": False,
}

sys.path.insert(0, os.path.dirname(__file__))  # so tests can import spec_decoder


@pytest.fixture
def store_dir(tmp_path) -> str:
    return str(tmp_path / "store")


@pytest.fixture
def open_store(store_dir) -> Iterator[Callable[..., MessageStore]]:
    """Open stores on ``store_dir`` with small files; every one is closed at teardown."""
    opened: list[MessageStore] = []

    def factory(path: str | None = None, **overrides) -> MessageStore:
        store = MessageStore.open(path or store_dir, **{**SMALL_STORE, **overrides})
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


@pytest.fixture
def peer() -> Iterator[Callable[..., Peer]]:
    """Make hostile TCP peers (``bad_peers``), closed at teardown."""
    made = []

    def make(behaviour) -> Peer:
        made.append(Peer(behaviour))
        return made[-1]

    yield make
    for p in made:
        p.close()
