"""The ``checkpoint`` file: store timestamps up to which data is known to be flushed.

4 KiB, mapped; int64 big-endian physicMsgTimestamp at 0, logicsMsgTimestamp at 8 and
indexMsgTimestamp at 16. It is written after the data it covers is flushed, and recovery
trusts the data over it.
"""

from __future__ import annotations

import mmap
import os
import struct

from shmq import files
from shmq.store.mapped_file import allocate

CHECKPOINT_SIZE = 4096
_FIELDS = struct.Struct(">qqq")


class Checkpoint:
    def __init__(self, path: str) -> None:
        self.path = path
        fd = files.create(path, os.O_RDWR)
        try:
            if os.fstat(fd).st_size != CHECKPOINT_SIZE:
                allocate(fd, CHECKPOINT_SIZE, path)  # real blocks: never a SIGBUS when full
            self._mm = mmap.mmap(fd, CHECKPOINT_SIZE)
        finally:
            os.close(fd)
        self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp = (
            _FIELDS.unpack_from(self._mm, 0)
        )

    def min_timestamp(self) -> int:
        """RocketMQ's ``getMinTimestamp``: the older of CommitLog and consume queues, less 3 s."""
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - 3000)

    def min_timestamp_index(self) -> int:
        return min(self.min_timestamp(), self.index_msg_timestamp)

    def flush(self) -> None:
        _FIELDS.pack_into(
            self._mm,
            0,
            self.physic_msg_timestamp,
            self.logics_msg_timestamp,
            self.index_msg_timestamp,
        )
        self._mm.flush()

    def close(self) -> None:
        if self._mm is not None:
            self.flush()
            self._mm.close()
            self._mm = None
