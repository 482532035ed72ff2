"""The storage engine: CommitLog, ConsumeQueue, IndexFile, checkpoint, recovery and cleanup,
in RocketMQ 4.9's file formats. Files only: no processes, no shared memory.

Names are loaded on first use: an agent that needs only the checkpoint or the mapped-file
helpers (flush, cleaner) does not import the whole engine, nor numba, at start."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "MessageStore": "shmq.store.message_store",
    "BatchPutResult": "shmq.store.results",
    "GetResult": "shmq.store.results",
    "GetStatus": "shmq.store.results",
    "PutResult": "shmq.store.results",
    "PutStatus": "shmq.store.results",
}

__all__ = ["BatchPutResult", "GetResult", "GetStatus", "MessageStore", "PutResult", "PutStatus"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'shmq.store' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


if TYPE_CHECKING:
    from shmq.store.message_store import MessageStore
    from shmq.store.results import BatchPutResult, GetResult, GetStatus, PutResult, PutStatus
