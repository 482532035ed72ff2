"""The I/O scheduler of the disk that holds the store directory.

The store's device comes from ``st_dev`` of the directory (or of its nearest existing
parent), then ``/sys/dev/block/MAJ:MIN``: a partition is looked up on its parent disk, a
device-mapper or md device on the disks under it (``slaves/``). File systems without a
device of their own (tmpfs, overlay; ``st_dev`` major 0) are reported as "n/a" unless their
mount source is a block device (btrfs).
"""

from __future__ import annotations

import os

from shmq_tuning.host import Host
from shmq_tuning.kernel import selected
from shmq_tuning.model import Fix, Setting, status
from shmq_tuning.profile import Profile

NAME = "io scheduler"
WHY = "deadline bounds how long a read or an msync waits behind other I/O (RocketMQ docs)"


def existing_dir(path: str) -> str:
    """``path`` or its nearest existing parent (a store that is yet to be created)."""
    path = os.path.abspath(path)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def scheduler_settings(host: Host, store_dir: str, profile: Profile) -> list[Setting]:
    where = existing_dir(store_dir)
    st = os.stat(where)
    device = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    want = " or ".join(profile.scheduler_accept)
    if os.major(st.st_dev) == 0:
        mount = host.mount_of(where, device)
        if mount is None or not mount.source.startswith("/dev/"):
            fs = f"{mount.fstype} " if mount else ""
            return [_na(want, f"the store {store_dir} is on a {fs}file system without a block "
                        f"device (device {device}): no I/O scheduler applies")]  # fmt: skip
        sys_dir = f"/sys/class/block/{os.path.basename(mount.source)}"
    else:
        sys_dir = f"/sys/dev/block/{device}"
    if not os.path.exists(host.path(sys_dir)):
        return [_na(want, f"no {sys_dir} for the store's device {device}")]
    disks = _disks(os.path.realpath(host.path(sys_dir)))
    if not disks:
        return [_na(want, f"{sys_dir} has no disk with an I/O queue")]
    return [_disk(host, d, profile, want) for d in disks]


def _na(want: str, why: str) -> Setting:
    return Setting(NAME, "n/a", want, status(True), why)


def _disks(real: str, depth: int = 0) -> list[str]:
    """The whole disks under a block device's sysfs directory."""
    if os.path.exists(os.path.join(real, "partition")):
        real = os.path.dirname(real)
    slaves = os.path.join(real, "slaves")
    if depth < 4 and os.path.isdir(slaves) and os.listdir(slaves):
        out: list[str] = []
        for name in sorted(os.listdir(slaves)):
            for disk in _disks(os.path.realpath(os.path.join(slaves, name)), depth + 1):
                if disk not in out:
                    out.append(disk)
        return out
    return [real] if os.path.exists(os.path.join(real, "queue", "scheduler")) else []


def _disk(host: Host, real: str, profile: Profile, want: str) -> Setting:
    name = os.path.basename(real)
    setting = f"{NAME} ({name})"
    path = f"/sys/block/{name}/queue/scheduler"
    if not os.path.exists(host.path(path)):  # address it through its device directory
        path = "/" + os.path.relpath(os.path.join(real, "queue", "scheduler"), host.root)
    raw = host.read(path) or ""
    current = selected(raw)
    offered = [t.strip("[]") for t in raw.split()]
    non_rotational = host.read(os.path.join(os.path.dirname(path), "rotational")) == "0"
    accept = profile.scheduler_accept
    if non_rotational:
        accept += profile.scheduler_accept_non_rotational
        want = " or ".join(accept) + " (not rotational)"
    if current in accept:
        return Setting(setting, current, want, status(True), WHY)
    target = next((s for s in (profile.scheduler, *accept) if s in offered), None)
    if target is None:
        why = f"{WHY}; this kernel offers only {', '.join(offered) or 'nothing'} for {name}"
        return Setting(setting, current, want, status(False), why)
    return Setting(setting, current, want, status(False), WHY, Fix(path, target, current))
