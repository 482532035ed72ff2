"""``shmq tune apply``: write the fixes the checks found, or print them (``dry_run``).

Only settings a check reports as WARN change, so a host already above a minimum is never
lowered. Every change is printed with the command that undoes it. ``persist`` writes the
sysctls to ``/etc/sysctl.d/99-shmq.conf`` and the ulimits to
``/etc/security/limits.d/99-shmq.conf`` (both under the root); sysfs settings (transparent
huge pages, the I/O scheduler) have no such file and are printed with how to persist them.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from dataclasses import dataclass, field

from shmq.errors import ShmqError
from shmq_tuning.host import Host
from shmq_tuning.model import OK, Setting

SYSCTL_FILE = "/etc/sysctl.d/99-shmq.conf"
LIMITS_FILE = "/etc/security/limits.d/99-shmq.conf"


@dataclass
class ApplyResult:
    """What ``apply`` printed (``lines``), the rows for ``--json`` and what failed."""

    lines: list[str] = field(default_factory=list)
    rows: list[Setting] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def require_root() -> None:
    """Real changes need root; say so in one line, with the way to look without it."""
    if os.geteuid() != 0:
        raise ShmqError(
            "shmq tune apply changes kernel settings and needs root (uid 0, this is uid "
            f"{os.geteuid()}): run it with sudo, or add --dry-run to see what it would change"
        )


def apply_fixes(
    settings: list[Setting], root: str = "/", *, dry_run: bool, persist: bool, profile: str
) -> ApplyResult:
    """Change (or with ``dry_run`` describe) every setting that has a fix."""
    host = Host(root)
    out = ApplyResult()
    fixes = [s for s in settings if s.fix is not None]
    for s in fixes:
        assert s.fix is not None
        fix = s.fix
        if not fix.path:
            if not persist:
                out.lines.append(
                    f"{s.setting}: not changed ({s.current}): a ulimit belongs to each process;"
                    f" --persist writes {LIMITS_FILE} (new sessions), or raise it where the "
                    "broker starts (the broker raises its soft nofile limit to the hard one)"
                )
            out.rows.append(s)
            continue
        if dry_run:
            out.lines.append(
                f"{s.setting}: would write {fix.value} to {fix.path} (now {fix.old}); "
                f"undo: {fix.undo}"
            )
            out.rows.append(dataclasses.replace(s, why=f"would set {fix.value}; undo: {fix.undo}"))
            continue
        try:
            with open(host.path(fix.path), "w") as f:
                f.write(fix.value + "\n")
        except OSError as exc:
            msg = f"{s.setting}: cannot write {fix.path}: {exc.strerror or exc}"
            out.lines.append(msg)
            out.errors.append(msg)
            out.rows.append(s)
            continue
        out.lines.append(f"{s.setting}: {fix.old} -> {fix.value} ({fix.path}); undo: {fix.undo}")
        why = f"changed from {fix.old}; undo: {fix.undo}"
        out.rows.append(dataclasses.replace(s, current=fix.value, status=OK, why=why))
    if not fixes:
        out.lines.append(f"nothing to change: the host matches profile {profile!r}")
    for s in settings:  # WARNs that apply cannot fix: the broker config, /dev/shm, ...
        if s.status != OK and s.fix is None:
            out.lines.append(f"{s.setting}: not changed by apply ({s.current}): {s.why}")
    if persist:
        _persist(host, fixes, out, dry_run=dry_run, profile=profile)
    return out


def _persist(
    host: Host, fixes: list[Setting], out: ApplyResult, *, dry_run: bool, profile: str
) -> None:
    sysctls = [s.fix.sysctl for s in fixes if s.fix and s.fix.sysctl]
    limits = [s.fix.limits_line for s in fixes if s.fix and s.fix.limits_line]
    sysfs = [s for s in fixes if s.fix and s.fix.path and not s.fix.sysctl]
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    for path, lines, undo in (
        (SYSCTL_FILE, sysctls, f"rm {SYSCTL_FILE} && sysctl --system"),
        (LIMITS_FILE, limits, f"rm {LIMITS_FILE} (takes effect at the next login)"),
    ):
        if not lines:
            continue
        text = (
            f"# written by `shmq tune apply --persist --profile {profile}` at {stamp}\n"
            f"# undo: {undo}\n" + "\n".join(lines) + "\n"
        )
        if dry_run:
            out.lines.append(f"would write {path}:\n{text.rstrip()}")
            continue
        try:
            _write_keeping_backup(host.path(path), text)
        except OSError as exc:
            msg = f"cannot write {path}: {exc.strerror or exc}"
            out.lines.append(msg)
            out.errors.append(msg)
            continue
        out.lines.append(f"wrote {path} ({len(lines)} settings); undo: {undo}")
    for s in sysfs:
        assert s.fix is not None
        out.lines.append(
            f"{s.setting}: not persisted ({s.fix.path} is sysfs, reset at boot): set it from a "
            "boot script, a udev rule or the kernel command line"
        )


def _write_keeping_backup(path: str, text: str) -> None:
    """Write ``path``; a previous file that is not ours is kept as ``path.bak``."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(path):
        with open(path) as f:
            if "shmq tune apply" not in f.readline():
                shutil.copy2(path, path + ".bak")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
