"""Kernel checks: sysctls, the nofile and memlock ulimits, transparent huge pages, and a
KVM guest's idle polling."""

from __future__ import annotations

from shmq_tuning.host import Host
from shmq_tuning.model import Fix, Setting, status
from shmq_tuning.profile import Profile, SysctlSpec

GIB = 1 << 30

WHY = {
    "vm.max_map_count": "every CommitLog, ConsumeQueue and index file is one mapping; past "
    "the limit mmap fails with ENOMEM",
    "vm.swappiness": "a swapped-out page of an agent or of a mapped file costs milliseconds "
    "when touched again",
    "vm.dirty_background_ratio": "writeback that starts early leaves msync little to write, "
    "so flushes stay short",
    "vm.dirty_ratio": "above it the kernel stalls the writer's page faults until writeback "
    "catches up",
    "vm.min_free_kbytes": "a free-page reserve lets kswapd reclaim in the background instead "
    "of the writer stalling in direct reclaim",
    "vm.overcommit_memory": "strict accounting (2) fails numpy/numba allocations long before "
    "memory is short",
    "fs.file-max": "the system-wide cap above every process's nofile limit",
}
# A ratio reads 0 when its byte-valued twin is set instead.
_BYTES_TWIN = {
    "vm.dirty_background_ratio": "vm.dirty_background_bytes",
    "vm.dirty_ratio": "vm.dirty_bytes",
}


def sysctl_settings(host: Host, profile: Profile) -> list[Setting]:
    mem_kb = host.mem_total_kb()
    return [_sysctl(host, spec, mem_kb) for spec in profile.sysctls]


def _sysctl(host: Host, spec: SysctlSpec, mem_kb: int | None) -> Setting:
    key, why = spec.key, WHY.get(spec.key, "")
    target = spec.target(mem_kb)
    shown = _recommended(spec, target)
    raw = host.sysctl(key)
    if raw is None or not raw.lstrip("-").isdigit() or target is None:
        missing = "/proc/meminfo" if target is None else host.sysctl_path(key)
        return Setting(key, raw or "n/a", shown, status(False), f"cannot read {missing}; {why}")
    current = int(raw)
    twin = _BYTES_TWIN.get(key)
    twin_value = host.sysctl(twin) if twin else None
    if current == 0 and twin_value not in (None, "0"):
        return Setting(key, f"0 ({twin} = {twin_value})", shown, status(True),
                       f"set in bytes through {twin}, which takes precedence")  # fmt: skip
    if spec.accepts(current, target):
        return Setting(key, raw, shown, status(True), why)
    value = str(target if spec.value is None or isinstance(spec.accept, str) else spec.value)
    fix = Fix(host.sysctl_path(key), value, raw, sysctl=f"{key} = {value}")
    return Setting(key, raw, shown, status(False), why, fix)


def _recommended(spec: SysctlSpec, target: int | None) -> str:
    if target is None:
        return f"{spec.percent_of_ram:g} % of RAM"
    note = f" ({spec.percent_of_ram:g} % of RAM)" if spec.percent_of_ram else ""
    if spec.accept == "min":
        return f">= {target}{note}"
    if spec.accept == "max":
        return f"<= {target}{note}"
    return " or ".join(str(v) for v in spec.accept)


def limit_settings(host: Host, profile: Profile, mlock_bytes: int) -> list[Setting]:
    """nofile, and memlock when mapped files are warmed (they are mlocked then);
    ``mlock_bytes`` is how much the warm-up locks (0: no warm-up)."""
    limits = host.limits()
    rows = [_nofile(limits.get("Max open files"), profile.nofile)]
    rows.append(_memlock(limits.get("Max locked memory"), profile.memlock, mlock_bytes))
    return rows


def _shown(soft: int | None, hard: int | None) -> str:
    def one(v: int | None) -> str:
        return "unlimited" if v is None else str(v)

    return f"soft {one(soft)}, hard {one(hard)}"


def _nofile(limit: tuple[int | None, int | None] | None, want: int) -> Setting:
    name, why = "ulimit nofile", "mapped files, client sockets and semaphores all take descriptors"
    if limit is None:
        return Setting(name, "n/a", str(want), status(False), "cannot read /proc/self/limits")
    soft, hard = limit
    ok = (soft is None or soft >= want) and (hard is None or hard >= want)
    if ok:
        return Setting(name, _shown(soft, hard), str(want), status(True), why)
    lines = "\n".join(
        f"{who} {kind} nofile {want}" for who in ("*", "root") for kind in ("soft", "hard")
    )
    fix = Fix("", str(want), _shown(soft, hard), limits_line=lines)
    return Setting(name, _shown(soft, hard), str(want), status(False), why, fix)


def _memlock(limit: tuple[int | None, int | None] | None, want: int | None, need: int) -> Setting:
    name = "ulimit memlock"
    shown_want = "unlimited" if want is None else str(want)
    if need:
        shown_want += f" (>= {need}: mlocked CommitLog files)"
    if limit is None:
        return Setting(name, "n/a", shown_want, status(False), "cannot read /proc/self/limits")
    soft, hard = limit
    if not need:
        why = "not needed: mapped files are not warmed (pretouch_mapped_files = false)"
        return Setting(name, _shown(soft, hard), shown_want, status(True), why)
    why = "warm-up mlocks each CommitLog file; over the limit mlock fails and pages can be evicted"
    if soft is None or soft >= need:
        return Setting(name, _shown(soft, hard), shown_want, status(True), why)
    value = "unlimited" if want is None else str(want)
    lines = "\n".join(
        f"{who} {kind} memlock {value}" for who in ("*", "root") for kind in ("soft", "hard")
    )
    fix = Fix("", value, _shown(soft, hard), limits_line=lines)
    return Setting(name, _shown(soft, hard), shown_want, status(False), why, fix)


THP_PATH = "/sys/kernel/mm/transparent_hugepage/enabled"


def thp_setting(host: Host, profile: Profile) -> Setting:
    name = "transparent_hugepage"
    why = "with 'always', khugepaged and huge-page compaction stall processes at random"
    want = " or ".join(profile.thp_accept)
    raw = host.read(THP_PATH)
    if raw is None:
        return Setting(name, "n/a", want, status(True), f"no {THP_PATH}: the kernel has no THP")
    current = selected(raw)
    if current in profile.thp_accept:
        return Setting(name, current, want, status(True), why)
    return Setting(name, current, want, status(False), why, Fix(THP_PATH, profile.thp, current))


def selected(text: str) -> str:
    """The ``[bracketed]`` choice of a sysfs selector (``always [madvise] never``)."""
    for token in text.split():
        if token.startswith("[") and token.endswith("]"):
            return token[1:-1]
    return text.strip()


HALT_POLL_PATH = "/sys/module/haltpoll/parameters/guest_halt_poll_ns"
CPUIDLE_DRIVER_PATH = "/sys/devices/system/cpu/cpuidle/current_driver"


def halt_poll_setting(host: Host, profile: Profile) -> Setting | None:
    """How long an idle vCPU of a KVM guest polls before it halts (the cpuidle-haltpoll
    driver's ``guest_halt_poll_ns``), when the profile asks for it. A parked agent or
    consumer is woken on an idle vCPU: one that halted costs an exit to the host and an
    interrupt to resume, which the woken process pays in CPU and every message in latency
    (on this project's 2-vCPU VM a bare wake-up cost 9-11 µs halted, 3-4 µs polling)."""
    want = profile.halt_poll_ns
    if want is None:
        return None
    name, shown = "cpuidle guest_halt_poll_ns", f">= {want}"
    why = (
        "an idle vCPU that polls this long before halting wakes a parked agent or consumer "
        "without an exit to the host; the polling costs host CPU while the guest idles"
    )
    driver, raw = host.read(CPUIDLE_DRIVER_PATH), host.read(HALT_POLL_PATH)
    if driver != "haltpoll" or raw is None or not raw.isdigit():
        na = "not a KVM guest idling through cpuidle-haltpoll: nothing to set"
        return Setting(name, "n/a", shown, status(True), na)
    if int(raw) >= want:
        return Setting(name, raw, shown, status(True), why)
    why += f"; kept across boots by haltpoll.guest_halt_poll_ns={want} on the kernel command line"
    return Setting(name, raw, shown, status(False), why, Fix(HALT_POLL_PATH, str(want), raw))
