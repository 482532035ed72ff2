"""Process liveness, without numpy: the CLI uses it in commands that must start fast."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (it may belong to another user)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def start_time(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot, /proc/PID/stat field 22), or
    None if there is no such process. A pid and its start time together name one process:
    after a crash or a reboot the same pid may belong to another program."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat[stat.rindex(b")") + 2 :].split()  # the command name may hold spaces
    return int(fields[19])


def same_process(pid: int, started: int | None) -> bool:
    """Whether ``pid`` is still the process that had start time ``started`` (without a
    recorded start time: whether it is alive)."""
    if started is None:
        return pid_alive(pid)
    return start_time(pid) == started
