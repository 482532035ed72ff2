"""The storage engine: CommitLog, ConsumeQueue, IndexFile, checkpoint, recovery and cleanup,
in RocketMQ 4.9's file formats. Files only: no processes, no shared memory."""

from shmq.store.message_store import MessageStore
from shmq.store.results import BatchPutResult, GetResult, GetStatus, PutResult, PutStatus

__all__ = ["BatchPutResult", "GetResult", "GetStatus", "MessageStore", "PutResult", "PutStatus"]
