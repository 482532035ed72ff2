"""Shared fixtures: small stores (tiny files, so rolling and cleanup happen within a test),
and a namesrv and broker in this process (``shmq.EmbeddedBroker``; its agents are processes)
for tests that do not need the broker in a process of its own."""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
from collections.abc import Callable, Iterator

import pytest
from bad_peers import Peer

from e2e_helpers import embedded
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


@pytest.fixture
def make_broker(tmp_path) -> Iterator[Callable[..., tuple]]:
    """``make_broker(**conf)`` starts an in-process namesrv and broker (``embedded``) on a
    store of its own under ``tmp_path``: ``(broker, namesrv)``, the supervisor and the
    namesrv's address. ``host=`` picks the address both use. All are stopped at teardown,
    and none may leave shared memory behind."""
    numbers = itertools.count()
    with contextlib.ExitStack() as stack:

        def factory(**conf) -> tuple:
            root = str(tmp_path / f"store{next(numbers)}")
            mq = stack.enter_context(embedded(root, **conf))
            return mq.broker, mq.namesrv

        yield factory


@pytest.fixture(scope="module")
def shared_broker(request, tmp_path_factory) -> Iterator[tuple]:
    """One ``make_broker`` broker for a whole test module (each test uses topics and groups
    of its own): a broker start costs seconds. A module's ``SHARED_BROKER`` dict, if any,
    holds its config keywords."""
    conf = getattr(request.module, "SHARED_BROKER", {})
    with embedded(str(tmp_path_factory.mktemp("shared") / "store"), **conf) as mq:
        yield mq.broker, mq.namesrv
