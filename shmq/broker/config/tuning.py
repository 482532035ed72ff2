"""The broker's runtime tuning: the ``[tuning]`` config table and how each process applies it.

These are the Python runtime's counterparts of the JVM options RocketMQ's docs recommend:

- ``pretouch`` (``-XX:+AlwaysPreTouch``): populate the page tables of the broker's shared
  segments and of each producer ring when it is created, so the hot path never pays a first
  touch (≈ 1–4 µs per 4 KiB page here); ``pretouch_mapped_files`` also turns on
  ``warmMapedFileEnable`` so CommitLog files are faulted in (and mlocked) when mapped.
- ``gc_freeze`` / ``gc_threshold`` (G1 settings): after start-up every broker process collects
  once and freezes what is left, so later collections never scan the ~100k start-up objects
  (a full collection drops from ≈ 100 ms to µs); the thresholds set how often young
  collections interrupt an agent.
- ``cpu_affinity``: ``""`` (no pinning), ``"auto"`` (the writer gets a core of its own, the
  other processes share the rest) or a table ``{writer = [1], reput = [0], ...}``.
- ``numba_cache_dir``, ``numba_threading_layer``, ``pythonmalloc``: environment for processes
  that have not started yet (numba reads its variables at import, CPython reads
  ``PYTHONMALLOC`` at start), so the supervisor sets them before it imports numba and before
  it spawns the agents.
- ``raise_fd_limit``: raise the soft ``RLIMIT_NOFILE`` to the hard limit at start (a ulimit
  a process may change for itself and its children).
- ``malloc_mmap_threshold`` / ``malloc_trim_threshold`` (bytes; 0 leaves glibc's own):
  glibc's ``mallopt``, for a heap that stays sized, as the JVM's with ``-Xms``. By default
  a freed block above 128 KiB goes back to the kernel, so a large array made per request
  (a TCP batch's frame, its decoded bodies, its records) is mapped again and faults every
  page in each time; kept in the heap, it is reused. Measured on a TCP bulk send: the
  broker's connection thread 0.38-0.40 -> 0.29 µs a message. Setting only the mmap
  threshold makes it worse: glibc then trims the heap above 128 KiB.

The defaults are the ``default`` profile's runtime values (``tuning/profiles/default.toml``),
chosen to be safe on any machine. This module belongs to the broker (which needs no
``shmq_tuning`` to run); ``shmq_tuning`` imports it to report these settings.
"""

from __future__ import annotations

import ctypes
import dataclasses
import gc
import logging
import mmap
import os
import resource
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from shmq.broker.config.broker_config import BrokerConfig
from shmq.errors import ConfigError

log = logging.getLogger(__name__)

ROLES = ("supervisor", "writer", "reput", "flush", "cleaner")
PAGE_SIZE = mmap.PAGESIZE
# Linux 5.14+: fault pages in writable without changing their contents (safe on live memory).
MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)
THREADING_LAYERS = ("", "default", "safe", "threadsafe", "forksafe", "tbb", "omp", "workqueue")
PYTHONMALLOCS = ("", "default", "malloc", "pymalloc", "malloc_debug", "pymalloc_debug", "debug")

Affinity = str | Mapping[str, tuple[int, ...]]


@dataclass(frozen=True)
class TuningConfig:
    """The ``[tuning]`` table of a broker config (see the module docstring for each key)."""

    pretouch: bool = True
    pretouch_mapped_files: bool = False
    gc_freeze: bool = True
    gc_threshold: tuple[int, int, int] = (700, 10, 10)
    cpu_affinity: Affinity = ""
    numba_cache_dir: str = ""
    numba_threading_layer: str = ""
    pythonmalloc: str = ""
    raise_fd_limit: bool = True
    malloc_mmap_threshold: int = 16 << 20
    malloc_trim_threshold: int = 64 << 20

    def __post_init__(self) -> None:
        t = self.gc_threshold
        if len(t) != 3 or not all(isinstance(v, int) and v >= 0 for v in t):
            raise ConfigError(f"tuning gc_threshold {t!r} must be three integers >= 0")
        if isinstance(self.cpu_affinity, str):
            if self.cpu_affinity not in ("", "auto"):
                raise ConfigError(
                    f"tuning cpu_affinity {self.cpu_affinity!r} must be '', 'auto' or a table "
                    f"of roles ({', '.join(ROLES)}) to CPU lists"
                )
        else:
            for role, cpus in self.cpu_affinity.items():
                if role not in ROLES:
                    raise ConfigError(
                        f"tuning cpu_affinity has unknown role {role!r}: one of {', '.join(ROLES)}"
                    )
                if not cpus or not all(isinstance(c, int) and c >= 0 for c in cpus):
                    raise ConfigError(
                        f"tuning cpu_affinity.{role} = {list(cpus)!r} must be CPU numbers >= 0"
                    )
        if self.numba_threading_layer not in THREADING_LAYERS:
            raise ConfigError(
                f"tuning numba_threading_layer {self.numba_threading_layer!r} is not one of "
                f"{', '.join(repr(x) for x in THREADING_LAYERS)}"
            )
        for name in ("malloc_mmap_threshold", "malloc_trim_threshold"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 31:
                raise ConfigError(f"tuning {name} {value!r} must be bytes in [0, 2^31)")
        if self.pythonmalloc not in PYTHONMALLOCS:
            raise ConfigError(
                f"tuning pythonmalloc {self.pythonmalloc!r} is not one of "
                f"{', '.join(repr(x) for x in PYTHONMALLOCS)}"
            )

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> TuningConfig:
        """Build from a ``[tuning]`` table; unknown keys and wrong types are ``ConfigError``s."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        kw: dict[str, Any] = {}
        for key, value in values.items():
            name = key.replace("-", "_")
            if name not in fields:
                raise ConfigError(
                    f"unknown [tuning] key {key!r}: one of {', '.join(sorted(fields))}"
                )
            kw[name] = _convert(name, value, getattr(cls, name))
        return cls(**kw)

    def to_mapping(self) -> dict[str, Any]:
        """The table ``from_mapping`` reads back (TOML-shaped: lists, not tuples)."""
        out = dataclasses.asdict(self)
        out["gc_threshold"] = list(self.gc_threshold)
        if not isinstance(self.cpu_affinity, str):
            out["cpu_affinity"] = {r: list(c) for r, c in self.cpu_affinity.items()}
        return out

    def affinity_for(self, role: str, allowed: Iterable[int] | None = None) -> tuple[int, ...]:
        """The CPUs ``role`` should run on (empty: leave it alone)."""
        return resolve_affinity(self.cpu_affinity, allowed).get(role, ())


def _convert(name: str, value: Any, default: Any) -> Any:
    if isinstance(default, bool):
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        if isinstance(value, bool):
            return value
    elif name == "gc_threshold":
        if isinstance(value, str):
            value = value.replace(",", " ").split()
        try:
            return tuple(int(v) for v in value)
        except (TypeError, ValueError):
            pass
    elif name == "cpu_affinity":
        if isinstance(value, str):
            return value.strip()
        if isinstance(value, Mapping):
            try:
                return {str(r): tuple(int(c) for c in cpus) for r, cpus in value.items()}
            except (TypeError, ValueError):
                pass
    elif isinstance(default, int):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().isdigit():
            return int(value)
    elif isinstance(value, str):
        return value.strip()
    raise ConfigError(f"tuning {name} = {value!r} is not valid (default: {default!r})")


def resolve_affinity(
    spec: Affinity, allowed: Iterable[int] | None = None
) -> dict[str, tuple[int, ...]]:
    """Per-role CPU lists: ``"auto"`` gives the writer (the one agent that spins) the last
    allowed CPU and everyone else the others, so no second spinner shares its core; with a
    single CPU there is nothing to separate. A table is taken as given."""
    if not isinstance(spec, str):
        return {role: tuple(cpus) for role, cpus in spec.items()}
    cpus = sorted(allowed if allowed is not None else os.sched_getaffinity(0))
    if spec != "auto" or len(cpus) < 2:
        return {}
    rest = tuple(cpus[:-1])
    return {"writer": (cpus[-1],), "reput": rest, "flush": rest, "supervisor": rest}


def prepare_tuning(config: BrokerConfig) -> tuple[BrokerConfig, TuningConfig]:
    """Validate ``config.tuning`` and fold it into the config the agents get: ``"auto"``
    affinity becomes explicit CPU lists (resolved once, here, because a restarted agent
    inherits the supervisor's own, narrower, affinity), and ``pretouch_mapped_files`` turns
    on ``warmMapedFileEnable``."""
    tuning = TuningConfig.from_mapping(config.tuning)
    if tuning.cpu_affinity == "auto":
        tuning = dataclasses.replace(tuning, cpu_affinity=resolve_affinity("auto"))
    changes: dict[str, Any] = {"tuning": tuning.to_mapping()}
    if tuning.pretouch_mapped_files:
        changes["warm_mapped_file_enable"] = True
    return config.replace(**changes), tuning


def environment(tuning: TuningConfig) -> dict[str, str]:
    """Environment variables for processes started from now on (empty values: inherit)."""
    env = {
        "NUMBA_CACHE_DIR": tuning.numba_cache_dir,
        "NUMBA_THREADING_LAYER": tuning.numba_threading_layer,
        "PYTHONMALLOC": tuning.pythonmalloc,
    }
    return {k: v for k, v in env.items() if v}


def set_environment(tuning: TuningConfig) -> list[str]:
    """Put ``environment(tuning)`` into ``os.environ`` (inherited by spawned agents); what
    was done, one line each. Call it before numba is imported, or the cache directory and
    threading layer apply to the agents only."""
    done = []
    for key, value in environment(tuning).items():
        os.environ[key] = value
        late = key.startswith("NUMBA_") and "numba" in sys.modules
        note = " (numba already imported here: applies to the agents)" if late else ""
        if key == "PYTHONMALLOC":
            note = " (for the agents; this process started with its own allocator)"
        done.append(f"{key}={value}{note}")
    return done


def pretouch(mm: mmap.mmap) -> str:
    """Fault every page of ``mm`` in without changing it: ``MADV_POPULATE_WRITE`` where the
    kernel has it, else a read of one byte per page (populates for reading only)."""
    try:
        mm.madvise(MADV_POPULATE_WRITE)
        return "populated"
    except OSError:
        view = np.frombuffer(mm, dtype=np.uint8)
        int(view[::PAGE_SIZE].sum())
        del view
        return "read-touched"


def apply_runtime(tuning: TuningConfig, role: str, buffers: Iterable[mmap.mmap] = ()) -> list[str]:
    """Apply ``tuning`` to this process, which runs ``role`` (an agent kind or
    ``"supervisor"``), once its start-up is done; pre-touch ``buffers``. Returns one line
    per thing done or skipped, for the log; problems are reported, never raised, because
    tuning must not stop a broker from running."""
    done: list[str] = []
    if tuning.pretouch:
        buffers = list(buffers)
        how = {pretouch(mm) for mm in buffers}
        total = sum(len(mm) for mm in buffers)
        if buffers:
            done.append(f"pretouch: {len(buffers)} mappings, {total} bytes ({', '.join(how)})")
    if tuning.raise_fd_limit:
        done.append(_raise_fd_limit())
    cpus = tuning.affinity_for(role)
    if cpus:
        done.append(_set_affinity(cpus))
    done.append(_set_malloc(tuning.malloc_mmap_threshold, tuning.malloc_trim_threshold))
    gc.set_threshold(*tuning.gc_threshold)
    done.append(f"gc thresholds {tuning.gc_threshold}")
    if tuning.gc_freeze:
        gc.collect()
        gc.freeze()
        done.append(f"gc frozen: {gc.get_freeze_count()} objects out of later collections")
    return done


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters


def _set_malloc(mmap_threshold: int, trim_threshold: int) -> str:
    """glibc's thresholds (0: left as they are); what was done, or why not."""
    if not mmap_threshold and not trim_threshold:
        return "malloc thresholds: glibc's"
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError) as exc:
        return f"malloc thresholds not set: no mallopt ({exc})"
    done = []
    for param, value, name in ((M_MMAP_THRESHOLD, mmap_threshold, "mmap"),
                               (M_TRIM_THRESHOLD, trim_threshold, "trim")):  # fmt: skip
        if value:
            ok = mallopt(param, value) == 1
            done.append(f"{name} {value}" + ("" if ok else " refused"))
    return "malloc thresholds: " + ", ".join(done)


def _raise_fd_limit() -> str:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard:
        return f"nofile limit {soft} (already the hard limit)"
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as exc:
        return f"nofile limit {soft} kept: cannot raise to {hard}: {exc}"
    return f"nofile limit raised {soft} -> {hard}"


def _set_affinity(cpus: tuple[int, ...]) -> str:
    allowed = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, cpus)
    except OSError as exc:
        log.warning("cannot pin to CPUs %s (allowed %s): %s", list(cpus), sorted(allowed), exc)
        return f"cpu affinity {list(cpus)} not set: {exc.strerror or exc}"
    return f"cpu affinity {sorted(os.sched_getaffinity(0))}"
