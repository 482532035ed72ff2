"""Tuning profiles: TOML data files in ``profiles/``, loaded and checked here.

A profile is data so that operators can read (and diff) what each one recommends without
reading code; the code only knows how to compare and apply each kind of setting.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shmq.errors import ConfigError

if TYPE_CHECKING:  # imported when a profile is parsed: listing profiles stays numpy-free
    from shmq.broker.config.tuning import TuningConfig

UNLIMITED = "unlimited"
# Package data next to this module (a plain path works in editable and wheel installs).
PROFILE_DIR = Path(__file__).with_name("profiles")


@dataclass(frozen=True)
class SysctlSpec:
    """One sysctl: the value ``apply`` writes and which current values are OK."""

    key: str
    value: int | None
    accept: str | tuple[int, ...]  # "min", "max" or the OK values
    percent_of_ram: float = 0.0
    max: int | None = None

    def target(self, mem_total_kb: int | None) -> int | None:
        """The value to recommend (``percent_of_ram`` needs the host's RAM)."""
        if not self.percent_of_ram:
            return self.value
        if mem_total_kb is None:
            return None
        value = int(mem_total_kb * self.percent_of_ram / 100)
        return min(value, self.max) if self.max is not None else value

    def accepts(self, current: int, target: int) -> bool:
        if self.accept == "min":
            return current >= target
        if self.accept == "max":
            return current <= target
        return current in self.accept


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    sysctls: tuple[SysctlSpec, ...]
    nofile: int
    memlock: int | None  # None: unlimited
    thp: str
    thp_accept: tuple[str, ...]
    scheduler: str
    scheduler_accept: tuple[str, ...]
    scheduler_accept_non_rotational: tuple[str, ...]
    shm_headroom: float
    runtime: TuningConfig
    halt_poll_ns: int | None = None  # a KVM guest's idle polling; None: not checked


def available() -> list[str]:
    """Names of the profiles shipped in ``shmq_tuning/profiles``."""
    return sorted(p.stem for p in PROFILE_DIR.glob("*.toml"))


def load(name: str) -> Profile:
    """The profile ``name``; a ``ConfigError`` naming the known ones if there is none."""
    if name not in available():
        raise ConfigError(f"unknown tuning profile {name!r}: one of {', '.join(available())}")
    text = (PROFILE_DIR / f"{name}.toml").read_text("utf-8")
    return parse(name, tomllib.loads(text))


def parse(name: str, data: dict[str, Any]) -> Profile:
    """Build a ``Profile`` from its TOML table (missing or malformed keys: ``ConfigError``)."""
    from shmq.broker.config.tuning import TuningConfig

    try:
        sysctls = tuple(_sysctl(k, v) for k, v in data["sysctl"].items())
        limits, thp, sched = data["limits"], data["thp"], data["scheduler"]
        memlock = limits["memlock"]
        return Profile(
            name=name,
            description=str(data.get("description", "")),
            sysctls=sysctls,
            nofile=int(limits["nofile"]),
            memlock=None if memlock == UNLIMITED else int(memlock),
            thp=str(thp["value"]),
            thp_accept=tuple(thp["accept"]),
            scheduler=str(sched["value"]),
            scheduler_accept=tuple(sched["accept"]),
            scheduler_accept_non_rotational=tuple(sched.get("accept_non_rotational", ())),
            shm_headroom=float(data["shm"]["headroom"]),
            runtime=TuningConfig.from_mapping(data["runtime"]),
            halt_poll_ns=_halt_poll_ns(data.get("cpuidle")),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"tuning profile {name!r} is malformed: {exc!r}") from None


def _halt_poll_ns(table: dict[str, Any] | None) -> int | None:
    """The optional ``[cpuidle]`` table's ``guest_halt_poll_ns`` (a minimum)."""
    if table is None:
        return None
    value = int(table["guest_halt_poll_ns"])
    if value < 0:
        raise ValueError(f"cpuidle.guest_halt_poll_ns must be >= 0, not {value}")
    return value


def _sysctl(key: str, spec: dict[str, Any]) -> SysctlSpec:
    accept = spec["accept"]
    if not isinstance(accept, str):
        accept = tuple(int(v) for v in accept)
    elif accept not in ("min", "max"):
        raise ValueError(f"{key}: accept must be 'min', 'max' or a list, not {accept!r}")
    if "percent_of_ram" in spec:
        return SysctlSpec(key, None, accept, float(spec["percent_of_ram"]), spec.get("max"))
    return SysctlSpec(key, int(spec["value"]), accept)
