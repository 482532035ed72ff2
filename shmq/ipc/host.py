"""Which host a process is on, as far as shared memory goes.

A client may use a broker's shared-memory data path only when both run on one kernel, see
one ``/dev/shm`` and one store directory: the broker reports ``host_id`` in its store info
and a client in ``transport="auto"`` compares it with its own. The kernel's boot id alone
is not enough (two network or mount namespaces of one machine share it, and a private
``/dev/shm`` of the same name holds other segments), so the device and inode of
``/dev/shm`` are part of the id; a store directory is compared by device and inode too
(``path_id``), since another host may have a directory of the same name.
"""

from __future__ import annotations

import os

from shmq.ipc.segment import SHM_DIR

BOOT_ID = "/proc/sys/kernel/random/boot_id"


def path_id(path: str) -> str:
    """``device:inode`` of ``path``, or "" when it does not exist here."""
    try:
        st = os.stat(path)
    except OSError:
        return ""
    return f"{st.st_dev}:{st.st_ino}"


def host_id() -> str:
    """This process's shared-memory host: the kernel's boot id and ``/dev/shm``'s identity."""
    try:
        with open(BOOT_ID) as f:
            boot = f.read().strip()
    except OSError:
        boot = os.uname().nodename
    return f"{boot}/{path_id(SHM_DIR)}"
