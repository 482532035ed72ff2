"""Frozen configuration dataclasses, with RocketMQ's names and defaults.

Field names are the snake_case forms of RocketMQ's ``MessageStoreConfig`` keys, so
``mappedFileSizeCommitLog`` in a ``broker.conf`` is ``mapped_file_size_commit_log`` here.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shmq.errors import ConfigError

FLUSH_DISK_TYPES = ("ASYNC_FLUSH", "SYNC_FLUSH")
DEFAULT_STORE_ROOT = os.path.join(os.path.expanduser("~"), ".shmq", "store")


@dataclass(frozen=True)
class MessageStoreConfig:
    """Storage engine settings (RocketMQ 4.9 defaults; sizes in bytes, intervals in ms)."""

    store_path_root_dir: str = DEFAULT_STORE_ROOT
    mapped_file_size_commit_log: int = 1 << 30
    mapped_file_size_consume_queue: int = 300_000 * 20
    flush_disk_type: str = "ASYNC_FLUSH"
    flush_interval_commit_log: int = 500
    flush_commit_log_least_pages: int = 4
    flush_commit_log_thorough_interval: int = 10_000
    sync_flush_timeout: int = 5_000
    flush_interval_consume_queue: int = 1_000
    flush_consume_queue_least_pages: int = 2
    max_message_size: int = 4 * 1024 * 1024
    check_crc_on_recover: bool = True
    message_index_enable: bool = True
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 20_000_000
    max_msgs_num_batch: int = 64
    file_reserved_time: int = 72
    delete_when: str = "04"
    disk_max_used_space_ratio: int = 75
    disk_space_clean_forcibly_ratio: int = 85
    disk_space_warning_level_ratio: int = 90
    clean_file_forcibly_enable: bool = True
    delete_files_batch_max: int = 10
    clean_resource_interval: int = 10_000
    # shmq's own: the first cleanup round after start (RocketMQ waits 60 s)
    clean_resource_initial_delay: int = 60_000
    # accepted for broker.conf compatibility; not needed here: a deleted file is unmapped by
    # its owner at once and by a reader within a second of its next read (store.reader)
    destroy_maped_file_interval_forcibly: int = 120_000
    warm_mapped_file_enable: bool = False
    mlock_mapped_file_enable: bool = True
    preallocate_mapped_file_enable: bool = True
    # a message further than this % of physical RAM behind the CommitLog's end is "in disk"
    # (RocketMQ's checkInDiskByCommitOffset); used by the offset query of a new group
    access_message_in_memory_max_ratio: int = 40
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    store_host: str = "127.0.0.1:10911"
    store_file_mode: str = "0600"  # shmq's: octal mode of store files (dirs get +x per r)
    message_delay_level: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    timer_max_delay_sec: int = 3 * 86_400  # RocketMQ 5's timer messages
    timer_precision_ms: int = 1000

    def __post_init__(self) -> None:
        if self.flush_disk_type not in FLUSH_DISK_TYPES:
            raise ConfigError(
                f"flushDiskType {self.flush_disk_type!r} is not one of "
                f"{', '.join(FLUSH_DISK_TYPES)}"
            )
        if self.mapped_file_size_commit_log < 4096:
            raise ConfigError(
                f"mappedFileSizeCommitLog {self.mapped_file_size_commit_log} is below 4096"
            )
        if self.mapped_file_size_commit_log % 4096:
            raise ConfigError(
                f"mappedFileSizeCommitLog {self.mapped_file_size_commit_log} "
                "is not a multiple of the 4096-byte page"
            )
        if self.mapped_file_size_consume_queue < 20:
            raise ConfigError(
                f"mappedFileSizeConsumeQueue {self.mapped_file_size_consume_queue} is below 20"
            )
        if not 0 < self.max_message_size <= (1 << 31) - 1:
            raise ConfigError(f"maxMessageSize {self.max_message_size} is out of range")
        if self.max_hash_slot_num <= 0 or self.max_index_num <= 1:
            raise ConfigError("maxHashSlotNum must be > 0 and maxIndexNum > 1")
        for hour in self.delete_when.split(";"):
            if not hour.strip().isdigit() or not 0 <= int(hour) <= 23:
                raise ConfigError(
                    f"deleteWhen {self.delete_when!r} must be hours 0-23 split by ';'"
                )
        parse_host(self.store_host)
        mode = str(self.store_file_mode).strip()
        if not re.fullmatch(r"0?[0-7]{3}", mode) or int(mode, 8) & 0o600 != 0o600:
            raise ConfigError(
                f"storeFileMode {self.store_file_mode!r} must be an octal mode like 0600 or "
                "0640 that lets the owner read and write"
            )
        if int(mode, 8) & 0o111:
            raise ConfigError(f"storeFileMode {mode} gives execute permission to store files")
        self.delay_levels_ms  # noqa: B018 (validates messageDelayLevel)
        if not 1 <= self.timer_max_delay_sec <= 24 * 86_400:  # the timer log's int32 delay
            raise ConfigError(
                f"timerMaxDelaySec {self.timer_max_delay_sec} is not in 1..{24 * 86_400}"
            )
        if not 10 <= self.timer_precision_ms <= 60_000:
            raise ConfigError(f"timerPrecisionMs {self.timer_precision_ms} is not in 10..60000")

    @property
    def file_mode(self) -> int:
        """``store_file_mode`` as a number (directories add an execute bit per read bit)."""
        return int(str(self.store_file_mode).strip(), 8)

    @property
    def consume_queue_file_size(self) -> int:
        """The consume-queue file size, rounded up to whole 20-byte units as RocketMQ does."""
        return -(-self.mapped_file_size_consume_queue // 20) * 20

    @property
    def delay_levels_ms(self) -> tuple[int, ...]:
        """``message_delay_level`` parsed: level ``i + 1``'s delay in ms at index ``i``."""
        return parse_delay_levels(self.message_delay_level)

    @property
    def sync_flush(self) -> bool:
        return self.flush_disk_type == "SYNC_FLUSH"

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> MessageStoreConfig:
        """Build from RocketMQ camelCase or snake_case keys; string values are converted."""
        return cls().replace(**values)

    def replace(self, **overrides: Any) -> MessageStoreConfig:
        """Return a copy with ``overrides`` (snake_case or camelCase keys) applied."""
        fields = {f.name: f for f in dataclasses.fields(self)}
        changes: dict[str, Any] = {}
        for key, value in overrides.items():
            name = snake_case(key)
            if name not in fields:
                raise ConfigError(f"unknown store config key {key!r}")
            changes[name] = _coerce(name, value, fields[name].type)
        return dataclasses.replace(self, **changes)


_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
MAX_DELAY_LEVELS = 64


def parse_delay_levels(text: str) -> tuple[int, ...]:
    """``"1s 5s 10s"`` → the levels' delays in ms (level ``i + 1`` at index ``i``), as
    RocketMQ's ``parseDelayLevel``: tokens split on spaces, the last character the unit
    (s, m, h, d), the rest a whole number; ``ConfigError`` naming a bad token."""
    tokens = text.split()
    if not tokens:
        raise ConfigError("messageDelayLevel is empty: it needs at least one level like '1s'")
    if len(tokens) > MAX_DELAY_LEVELS:
        raise ConfigError(f"messageDelayLevel has {len(tokens)} levels, above {MAX_DELAY_LEVELS}")
    delays = []
    for i, token in enumerate(tokens):
        unit, number = _UNIT_MS.get(token[-1]), token[:-1]
        if unit is None or not number.isdigit() or int(number) <= 0:
            raise ConfigError(
                f"messageDelayLevel token {token!r} (level {i + 1}) is not a positive whole "
                "number followed by s, m, h or d"
            )
        delays.append(int(number) * unit)
    return tuple(delays)


# RocketMQ's own spellings that differ from the field names here.
_ALIASES = {"warm_maped_file_enable": "warm_mapped_file_enable"}


def snake_case(name: str) -> str:
    """``mappedFileSizeCommitLog`` → ``mapped_file_size_commit_log``, ``checkCRCOnRecover``
    → ``check_crc_on_recover``; snake_case stays as it is."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()
    return _ALIASES.get(snake, snake)


def parse_host(text: str) -> tuple[str, int]:
    """``"127.0.0.1:10911"`` → ``("127.0.0.1", 10911)``; a clear error otherwise."""
    host, sep, port = text.rpartition(":")
    parts = host.split(".")
    if (
        not sep
        or not port.isdigit()
        or not 0 <= int(port) <= 65535
        or len(parts) != 4
        or not all(p.isdigit() and 0 <= int(p) <= 255 for p in parts)
    ):
        raise ConfigError(f"host {text!r} is not an IPv4 'a.b.c.d:port' address")
    return host, int(port)


def _coerce(name: str, value: Any, type_name: Any) -> Any:
    kind = type_name if isinstance(type_name, str) else getattr(type_name, "__name__", "")
    try:
        if kind == "bool":
            if isinstance(value, str):
                if value.strip().lower() not in ("true", "false"):
                    raise ValueError(value)
                return value.strip().lower() == "true"
            return bool(value)
        if kind == "int":
            if isinstance(value, bool):
                raise ValueError(value)
            return int(str(value).strip()) if isinstance(value, str) else int(value)
        return str(value).strip() if isinstance(value, str) else str(value)
    except ValueError:
        raise ConfigError(f"store config {name} = {value!r} is not a valid {kind}") from None
