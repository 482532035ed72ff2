"""Process liveness, without numpy: the CLI uses it in commands that must start fast."""

from __future__ import annotations

import os
import time

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
CPUCLOCK_SCHED = 2  # Linux's clock id of a process's CPU time: ((~pid) << 3) | CPUCLOCK_SCHED


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid runs (it may belong to another user). A zombie, dead
    but not yet reaped (its parent gone, and PID 1 of a container that reaps late), does
    not: a crashed broker's name must be free for the next start."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return _stat(pid) is not None


def start_time(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot, /proc/PID/stat field 22), or
    None if there is no such process. A pid and its start time together name one process:
    after a crash or a reboot the same pid may belong to another program."""
    fields = _stat(pid)
    return int(fields[19]) if fields is not None else None


def cpu_seconds(pid: int) -> float | None:
    """User and system CPU seconds of process ``pid``, all its threads (ended ones too), or
    None when it does not run. Read from its CPU-time clock, to the nanosecond: stat fields
    14 and 15 count clock ticks (10 ms), and an agent that parks most of the time, as an
    idle writer does, uses a few ms a second and could show 0 there for minutes. Stat's
    ticks where the clock cannot be read."""
    fields = _stat(pid) if pid > 0 else None
    if fields is None:
        return None
    try:
        return time.clock_gettime(((~pid) << 3) | CPUCLOCK_SCHED)
    except OSError:  # gone meanwhile, or a kernel without process CPU clocks
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def descends(pid: int, ancestor: int) -> bool:
    """Whether ``ancestor`` is in ``pid``'s chain of parents."""
    while pid > 1:
        fields = _stat(pid)
        if fields is None:
            return False
        pid = int(fields[1])
        if pid == ancestor:
            return True
    return False


def _stat(pid: int) -> list[bytes] | None:
    """/proc/PID/stat's fields after the command name (state first), or None when there is
    no such process or it is a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat[stat.rindex(b")") + 2 :].split()  # the command name may hold spaces
    return None if fields[0] in (b"Z", b"X") else fields


def same_process(pid: int, started: int | None) -> bool:
    """Whether ``pid`` is still the process that had start time ``started`` (without a
    recorded start time: whether it is alive)."""
    if started is None:
        return pid_alive(pid)
    return start_time(pid) == started
