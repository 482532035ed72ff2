"""Reading the host's ``/proc`` and ``/sys`` under a root directory.

Every check reads through a ``Host``, so tests point it at a fake tree in a temporary
directory (``--root``) and the real host is never needed to test a check.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

_LIMIT_LINE = re.compile(r"^(Max [a-z ]+?)\s{2,}(\S+)\s+(\S+)")


@dataclass(frozen=True)
class Mount:
    device: str  # "major:minor"
    mount_point: str
    fstype: str
    source: str


class Host:
    """The files of one host, seen from ``root`` (``"/"`` for the real one)."""

    def __init__(self, root: str = "/") -> None:
        self.root = os.path.abspath(root)

    def path(self, absolute: str) -> str:
        """``absolute`` (a path on the host, ``/proc/...``) under this root."""
        return os.path.join(self.root, absolute.lstrip("/"))

    def read(self, absolute: str) -> str | None:
        """The stripped text of a file, or None if it cannot be read."""
        try:
            with open(self.path(absolute), encoding="utf-8", errors="replace") as f:
                return f.read().strip()
        except OSError:
            return None

    @staticmethod
    def sysctl_path(key: str) -> str:
        """``vm.swappiness`` → ``/proc/sys/vm/swappiness``."""
        return "/proc/sys/" + key.replace(".", "/")

    def sysctl(self, key: str) -> str | None:
        return self.read(self.sysctl_path(key))

    def mem_total_kb(self) -> int | None:
        text = self.read("/proc/meminfo") or ""
        m = re.search(r"^MemTotal:\s+(\d+)\s+kB", text, re.MULTILINE)
        return int(m.group(1)) if m else None

    def limits(self) -> dict[str, tuple[int | None, int | None]]:
        """``/proc/self/limits`` as ``{"Max open files": (soft, hard)}``; None: unlimited."""
        out: dict[str, tuple[int | None, int | None]] = {}
        for line in (self.read("/proc/self/limits") or "").splitlines():
            m = _LIMIT_LINE.match(line)
            if m:
                out[m.group(1)] = (_limit(m.group(2)), _limit(m.group(3)))
        return out

    def mounts(self) -> list[Mount]:
        """``/proc/self/mountinfo``: device, mount point, file-system type, source."""
        mounts = []
        for line in (self.read("/proc/self/mountinfo") or "").splitlines():
            head, sep, tail = line.partition(" - ")
            fields, rest = head.split(), tail.split()
            if sep and len(fields) >= 5 and len(rest) >= 2:
                mounts.append(Mount(fields[2], _unescape(fields[4]), rest[0], rest[1]))
        return mounts

    def mount_of(self, path: str, device: str) -> Mount | None:
        """The mount holding ``path`` on ``device`` (the longest matching mount point)."""
        best = None
        for m in self.mounts():
            inside = path == m.mount_point or path.startswith(m.mount_point.rstrip("/") + "/")
            if (
                m.device == device
                and inside
                and (best is None or len(m.mount_point) > len(best.mount_point))
            ):
                best = m
        return best


def _limit(text: str) -> int | None:
    return None if text == "unlimited" else int(text)


def _unescape(text: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)
