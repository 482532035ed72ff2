"""``/dev/shm`` against the broker's shared memory: every producer ring plus the tables.

POSIX shared memory lives in the ``/dev/shm`` tmpfs; when it is full a producer's
registration (its ring) fails, so its size must cover ``maxProducers`` rings at the
configured ``ringSize`` and ``ringSlots``, the counters and the topic, queue and client
tables.
"""

from __future__ import annotations

import mmap
import os

from shmq.broker.config.broker_config import BrokerConfig
from shmq.ipc import counters, queue_table, registry, ring, topic_table
from shmq_tuning.host import Host
from shmq_tuning.model import Setting, status
from shmq_tuning.profile import Profile

SHM = "/dev/shm"


def _pages(size: int) -> int:
    return -(-size // mmap.PAGESIZE) * mmap.PAGESIZE


def required_bytes(cfg: BrokerConfig) -> int:
    """Bytes of ``/dev/shm`` one broker with ``cfg`` uses with every producer slot taken."""
    tables = (
        counters.SIZE,
        topic_table.segment_size(cfg.max_topics),
        queue_table.segment_size(cfg.max_queue_slots),
        registry.segment_size(cfg.max_producers, cfg.max_consumers),
    )
    rings = cfg.max_producers * _pages(ring.segment_size(cfg.ring_size, cfg.ring_slots))
    return sum(_pages(t) for t in tables) + rings


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def shm_setting(host: Host, cfg: BrokerConfig, profile: Profile) -> Setting:
    name = "/dev/shm size"
    need = required_bytes(cfg)
    want = int(need * profile.shm_headroom)
    shown = f">= {_mib(want)}"
    why = (
        f"{cfg.max_producers} producer rings ({cfg.ring_size} B, {cfg.ring_slots} slots) and "
        f"the tables take {_mib(need)}"
    )
    try:
        st = os.statvfs(host.path(SHM))
    except OSError as exc:
        return Setting(name, "n/a", shown, status(False), f"cannot stat {SHM}: {exc.strerror}")
    size, free = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
    current = f"{_mib(size)} ({_mib(free)} free)"
    if size >= want:
        return Setting(name, current, shown, status(True), why)
    fix = f"mount -o remount,size={-(-want // (1 << 20))}M {SHM}"
    return Setting(name, current, shown, status(False), f"{why}; enlarge it: {fix}")
