"""A fake ``/proc``, ``/sys``, ``/dev/shm`` and ``/etc`` tree for the tuning tests.

The store directory is real (its ``st_dev`` is what the I/O scheduler check follows), so the
tree maps that device number to a fake disk in ``sys/dev/block``.
"""

from __future__ import annotations

import os
from pathlib import Path

TUNED = {
    "vm/max_map_count": "655360",
    "vm/swappiness": "10",
    "vm/dirty_background_ratio": "10",
    "vm/dirty_ratio": "40",
    "vm/dirty_background_bytes": "0",
    "vm/dirty_bytes": "0",
    "vm/min_free_kbytes": "1000000",
    "vm/overcommit_memory": "1",
    "fs/file-max": "9223372036854775807",
}
UNTUNED = {
    **TUNED,
    "vm/max_map_count": "65530",
    "vm/swappiness": "60",
    "vm/dirty_ratio": "20",
    "vm/min_free_kbytes": "67584",
}
LIMITS = """Limit                     Soft Limit           Hard Limit           Units
Max open files            {nofile}             {nofile}             files
Max locked memory         {memlock}            {memlock}            bytes
"""


def device_of(path: Path) -> str:
    st = os.stat(path)
    return f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"


def build(
    root: Path,
    store: Path,
    *,
    sysctls: dict[str, str] = TUNED,
    nofile: str = "655350",
    memlock: str = "unlimited",
    thp: str = "always [madvise] never",
    scheduler: str = "none [mq-deadline] kyber bfq",
    rotational: str = "1",
    layout: str = "partition",
    cpuidle: tuple[str, str | None] | None = None,
) -> Path:
    """Write the tree under ``root``; ``layout``: the store's device is a ``partition`` of
    disk sdz, the ``whole`` disk, or ``dm``-0 on top of sdz (``slaves/``); ``cpuidle``: the
    cpuidle driver and haltpoll's ``guest_halt_poll_ns`` (None: no such parameter)."""
    for key, value in sysctls.items():
        _write(root / "proc/sys" / key, value)
    _write(root / "proc/meminfo", "MemTotal:       16000000 kB\nMemFree:  1000 kB")
    _write(root / "proc/self/limits", LIMITS.format(nofile=nofile, memlock=memlock))
    _write(root / "sys/kernel/mm/transparent_hugepage/enabled", thp)
    if cpuidle is not None:
        driver, halt_poll_ns = cpuidle
        _write(root / "sys/devices/system/cpu/cpuidle/current_driver", driver)
        if halt_poll_ns is not None:
            _write(root / "sys/module/haltpoll/parameters/guest_halt_poll_ns", halt_poll_ns)
    disk = root / "sys/devices/pci0000:00/block/sdz"
    _write(disk / "queue/scheduler", scheduler)
    _write(disk / "queue/rotational", rotational)
    _write(disk / "sdz1/partition", "1")
    dm = root / "sys/devices/virtual/block/dm-0"
    (dm / "slaves").mkdir(parents=True)
    (dm / "slaves/sdz").symlink_to(os.path.relpath(disk, dm / "slaves"))
    _write(dm / "queue/scheduler", "none")
    target = {"partition": disk / "sdz1", "whole": disk, "dm": dm}[layout]
    links = root / "sys/dev/block"
    links.mkdir(parents=True)
    (links / device_of(store)).symlink_to(os.path.relpath(target, links))
    (root / "sys/block").mkdir()
    (root / "sys/block/sdz").symlink_to(os.path.relpath(disk, root / "sys/block"))
    (root / "dev/shm").mkdir(parents=True)
    (root / "etc").mkdir()
    return root


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
