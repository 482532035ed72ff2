"""All checks of one profile: kernel, limits, I/O scheduler, ``/dev/shm``, runtime."""

from __future__ import annotations

from shmq.broker.config.broker_config import BrokerConfig
from shmq.broker.config.tuning import TuningConfig
from shmq_tuning import blockdev, kernel, runtime, shm
from shmq_tuning.host import Host
from shmq_tuning.model import Setting
from shmq_tuning.profile import Profile


def run_checks(
    profile: Profile,
    root: str = "/",
    store_dir: str | None = None,
    config: BrokerConfig | None = None,
) -> list[Setting]:
    """Compare the host under ``root`` with ``profile`` for a broker running ``config``
    (default: the default broker config) on ``store_dir`` (default: the config's store)."""
    cfg = config or BrokerConfig()
    host = Host(root)
    store = store_dir or cfg.store.store_path_root_dir
    warmed = (
        cfg.store.warm_mapped_file_enable
        or TuningConfig.from_mapping(cfg.tuning).pretouch_mapped_files
        or profile.runtime.pretouch_mapped_files
    )
    # Warm-up locks the CommitLog file in use and the next one, allocated ahead.
    mlock_bytes = 2 * cfg.store.mapped_file_size_commit_log if warmed else 0
    halt_poll = kernel.halt_poll_setting(host, profile)
    return [
        *kernel.sysctl_settings(host, profile),
        *kernel.limit_settings(host, profile, mlock_bytes),
        kernel.thp_setting(host, profile),
        *([halt_poll] if halt_poll is not None else []),
        *blockdev.scheduler_settings(host, store, profile),
        shm.shm_setting(host, cfg, profile),
        *runtime.runtime_settings(cfg, profile),
    ]
