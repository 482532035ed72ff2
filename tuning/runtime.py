"""Reports of the Python runtime settings the broker applies from its ``[tuning]`` table.

The current value is what the broker config says (``[tuning]``, or the defaults), together
with the environment where numba and CPython read theirs; the recommendation is the
profile's ``[runtime]`` table. ``apply`` does not touch these: they live in the broker config.
"""

from __future__ import annotations

import os
from typing import Any

from shmq.broker.config.broker_config import BrokerConfig
from shmq.broker.config.tuning import TuningConfig, resolve_affinity
from shmq_tuning.model import Setting, status
from shmq_tuning.profile import Profile

WHY = {
    "pretouch": "faults in shared segments and each new producer ring up front (like "
    "-XX:+AlwaysPreTouch): the first sends pay no 1-4 µs page faults",
    "pretouch_mapped_files": "faults in and mlocks each CommitLog file when it is mapped "
    "(warmMapedFileEnable): 0.2-1 s per GiB at start instead of on the hot path",
    "gc_freeze": "a full collection over the start-up objects takes ~100 ms; frozen after "
    "start-up, it takes microseconds",
    "gc_threshold": "how often young collections interrupt an agent (G1's young-size "
    "settings, in CPython's terms)",
    "cpu_affinity": "the writer spins before it parks; a second process on its core halves "
    "its throughput and adds wake-up latency",
    "numba_cache_dir": "agents load compiled kernels from the cache; where it is not "
    "writable every start compiles again (3-4 s)",
    "numba_threading_layer": "shmq's kernels are serial; 'workqueue' starts no OpenMP/TBB "
    "threads that spin on the cores the agents need",
    "pythonmalloc": "pymalloc is CPython's fast small-object allocator; the debug "
    "allocators are several times slower",
    "raise_fd_limit": "the broker raises its soft nofile limit to the hard one at start",
    "malloc_mmap_threshold": "glibc maps a freed block above this anew each time (every "
    "page faulted in again); kept in the heap, a request's arrays are reused",
    "malloc_trim_threshold": "glibc returns free heap above this to the kernel; 128 KiB "
    "(its default once the mmap threshold is set) undoes the mmap threshold",
}


def runtime_settings(cfg: BrokerConfig, profile: Profile) -> list[Setting]:
    """One row per runtime setting; an invalid ``[tuning]`` table raises ``ConfigError``."""
    have = TuningConfig.from_mapping(cfg.tuning)
    want = profile.runtime
    rows = []
    for key in ("pretouch", "gc_freeze", "gc_threshold", "raise_fd_limit",
                "malloc_mmap_threshold", "malloc_trim_threshold"):  # fmt: skip
        rows.append(_compare(key, getattr(have, key), getattr(want, key)))
    warm = have.pretouch_mapped_files or cfg.store.warm_mapped_file_enable
    rows.append(_compare("pretouch_mapped_files", warm, want.pretouch_mapped_files))
    rows.append(_affinity(have, want))
    rows.append(_cache_dir(have, want))
    layer = have.numba_threading_layer or os.environ.get("NUMBA_THREADING_LAYER", "")
    rows.append(_compare("numba_threading_layer", layer or "default",
                         want.numba_threading_layer or "default"))  # fmt: skip
    rows.append(_pythonmalloc(have, want))
    return rows


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


def _toml(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else _text(value)


def _compare(key: str, have: Any, want: Any) -> Setting:
    ok = have == want
    why = WHY[key] if ok else f"{WHY[key]}; set [tuning] {key} = {_toml(want)}"
    return Setting(f"runtime.{key}", _text(have), _text(want), status(ok), why)


def _describe(plan: dict[str, tuple[int, ...]], spec: Any) -> str:
    if not plan:
        return "none" if spec in ("", {}) else f"{spec} (nothing to separate on one CPU)"
    text = "; ".join(f"{role}: {','.join(map(str, cpus))}" for role, cpus in plan.items())
    return f"auto ({text})" if spec == "auto" else text


def _affinity(have: TuningConfig, want: TuningConfig) -> Setting:
    allowed = os.sched_getaffinity(0)
    plan = resolve_affinity(have.cpu_affinity, allowed)
    current = _describe(plan, have.cpu_affinity)
    recommended = _describe(resolve_affinity(want.cpu_affinity, allowed), want.cpu_affinity)
    outside = sorted({c for cpus in plan.values() for c in cpus} - allowed)
    if outside:
        why = f"CPUs {outside} are not allowed here (allowed: {sorted(allowed)})"
        return Setting("runtime.cpu_affinity", current, recommended, status(False), why)
    wanted = resolve_affinity(want.cpu_affinity, allowed)
    ok = bool(plan) or not wanted
    why = (
        WHY["cpu_affinity"] if ok else f'{WHY["cpu_affinity"]}; set [tuning] cpu_affinity = "auto"'
    )
    return Setting("runtime.cpu_affinity", current, recommended, status(ok), why)


def _cache_dir(have: TuningConfig, want: TuningConfig) -> Setting:
    configured = have.numba_cache_dir or os.environ.get("NUMBA_CACHE_DIR", "")
    default = "numba default"
    current, recommended = configured or default, want.numba_cache_dir or default
    if configured and not _writable(configured):
        why = f"{configured} cannot be created or written: {WHY['numba_cache_dir']}"
        return Setting("runtime.numba_cache_dir", current, recommended, status(False), why)
    return Setting("runtime.numba_cache_dir", current, recommended, status(True),
                   WHY["numba_cache_dir"])  # fmt: skip


def _writable(path: str) -> bool:
    path = os.path.abspath(os.path.expanduser(path))
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            return False
        path = parent
    return os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK)


def _allocator(value: str) -> str:
    name = value.split()[0]
    return "pymalloc" if name == "default" else name


def _pythonmalloc(have: TuningConfig, want: TuningConfig) -> Setting:
    current = have.pythonmalloc or os.environ.get("PYTHONMALLOC", "") or "pymalloc (default)"
    recommended = want.pythonmalloc or "pymalloc (default)"
    ok = _allocator(current) == _allocator(recommended)
    why = WHY["pythonmalloc"]
    if not ok:
        why += f'; set [tuning] pythonmalloc = "{want.pythonmalloc}" and unset PYTHONMALLOC'
    return Setting("runtime.pythonmalloc", current, recommended, status(ok), why)
