"""The POP journal: the durable form of the broker's POP state (``checkpoints``).

One JSON record per line in ``<store>/pop/journal``, appended before the request that
caused it is answered, so a message a client acked stays acked and a message it popped
stays invisible, then comes back, across a SIGKILL of any process. With SYNC_FLUSH every
append is followed by ``fdatasync``, as the CommitLog's records are; otherwise the page
cache holds it (what survives a process crash, as the CommitLog's async flush).

Replay applies the records in order and stops at the first line that does not parse (a
write cut by a crash is the last one: nothing after it was acknowledged), cutting the file
back there. A journal grown past ``COMPACT_BYTES`` is rewritten from the state's
``snapshot`` (written to a new file, synced, renamed over the old), as it is at every
start, so it holds what is open rather than everything that ever was.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from typing import Any

from shmq import files
from shmq.broker.pop.checkpoints import PopCheckpoints

log = logging.getLogger(__name__)

COMPACT_BYTES = 32 << 20
FILE_NAME = "journal"


class PopJournal:
    """The journal file of the store at ``root``; ``sync``: fdatasync every append."""

    def __init__(self, root: str, sync: bool) -> None:
        self.dir = os.path.join(root, "pop")
        self.path = os.path.join(self.dir, FILE_NAME)
        self.sync = sync
        files.makedirs(self.dir)
        self._fd = -1
        self._size = 0

    def replay(self, state: PopCheckpoints) -> int:
        """Apply every whole record to ``state``, then rewrite the journal from it; the
        records applied."""
        applied = 0
        good = 0
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            data = b""
        for line in data.splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break
            try:
                state.apply(json.loads(line))
            except (ValueError, KeyError, TypeError) as exc:
                log.error(
                    "POP journal %s: record at byte %d unreadable (%s): the rest is dropped",
                    self.path,
                    good,
                    exc,
                )
                break
            good += len(line)
            applied += 1
        if good < len(data):
            log.warning(
                "POP journal %s: %d bytes after the last whole record dropped",
                self.path,
                len(data) - good,
            )
        self.rewrite(state.snapshot())
        return applied

    def append(self, records: Iterable[dict[str, Any]]) -> None:
        """Write ``records`` in one write (a crash keeps a prefix of them, whole lines
        first)."""
        data = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records).encode()
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        if self.sync:
            os.fdatasync(self._fd)
        self._size += len(data)

    def wants_compaction(self) -> bool:
        return self._size > COMPACT_BYTES

    def rewrite(self, records: Iterable[dict[str, Any]]) -> None:
        """Replace the journal with ``records`` (the state's snapshot), atomically."""
        tmp = self.path + ".new"
        fd = files.create(tmp, os.O_WRONLY | os.O_TRUNC)
        try:
            data = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records)
            os.write(fd, data.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        files.fsync_dir(self.dir)
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = files.create(self.path, os.O_WRONLY | os.O_APPEND)
        self._size = os.fstat(self._fd).st_size

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
