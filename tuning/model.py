"""What a check reports (``Setting``) and what ``apply`` would change to fix it (``Fix``)."""

from __future__ import annotations

from dataclasses import dataclass

OK = "OK"
WARN = "WARN"


@dataclass(frozen=True)
class Fix:
    """A write that brings a setting to its recommended value, and how to take it back.

    ``path`` is absolute on the real host (``/proc/sys/vm/swappiness``); ``apply`` prefixes
    it with ``--root``. ``sysctl`` is the persistable ``key = value`` line, if the setting
    is a sysctl. ``path`` is empty for settings ``apply`` cannot change for a running
    system (ulimits), which only ``--persist`` writes (``limits_line``)."""

    path: str
    value: str
    old: str
    sysctl: str = ""
    limits_line: str = ""

    @property
    def undo(self) -> str:
        """A shell command that restores the old value."""
        if self.sysctl:
            key = self.sysctl.partition(" = ")[0]
            return f"sysctl -w {key}={self.old}"
        if self.path:
            return f"echo {self.old} > {self.path}"
        return "remove the line from /etc/security/limits.d/99-shmq.conf"


@dataclass(frozen=True)
class Setting:
    """One row of ``shmq tune check``: where the host stands, what the profile wants, why."""

    setting: str
    current: str
    recommended: str
    status: str
    why: str
    fix: Fix | None = None

    def to_json(self) -> dict[str, str]:
        """The ``--json`` shape: ``{"setting", "current", "recommended", "status", "why"}``."""
        return {
            "setting": self.setting,
            "current": self.current,
            "recommended": self.recommended,
            "status": self.status,
            "why": self.why,
        }


def status(ok: bool) -> str:
    return OK if ok else WARN
