"""Which shared-memory layouts this install speaks, as one id a client and a broker compare.

A client on the broker's host writes into a ring and reads tables whose layouts the
descriptor modules of this package define. A client and a broker of different installs
(an upgrade of one of them) may disagree on an offset without either noticing, so the
broker reports ``layout_id()`` in its store info and a client takes the shared-memory
path only when its own is the same (``shmq.client.transport.chooser``): with ``transport="auto"``
it uses TCP otherwise, with ``"shm"`` it refuses with both ids named.
"""

from __future__ import annotations

import functools
import hashlib
import os

IPC_DIR = os.path.dirname(os.path.abspath(__file__))


@functools.cache
def layout_id() -> str:
    """A hash of the sources of ``shmq.ipc`` (every descriptor module) and of the record
    format (``shmq.codec.record``), short enough to read in an error message."""
    digest = hashlib.sha256()
    paths = sorted(os.path.join(IPC_DIR, n) for n in os.listdir(IPC_DIR) if n.endswith(".py"))
    paths.append(os.path.join(os.path.dirname(IPC_DIR), "codec", "record.py"))
    for path in paths:
        with open(path, "rb") as f:
            digest.update(os.path.basename(path).encode() + b"\0" + f.read() + b"\0")
    return digest.hexdigest()[:16]
