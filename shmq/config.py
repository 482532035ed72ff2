"""Frozen configuration dataclasses, with RocketMQ's names and defaults.

Field names are the snake_case forms of RocketMQ's ``MessageStoreConfig`` keys, so
``mappedFileSizeCommitLog`` in a ``broker.conf`` is ``mapped_file_size_commit_log`` here.
"""

from __future__ import annotations

import dataclasses
import grp
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shmq.errors import ConfigError

FLUSH_DISK_TYPES = ("ASYNC_FLUSH", "SYNC_FLUSH")
DEFAULT_STORE_ROOT = os.path.join(os.path.expanduser("~"), ".shmq", "store")


def setting(default: Any, doc: str, *, shown: str | None = None, **field_args: Any) -> Any:
    """A config field with its meaning, ``doc``: the configuration reference in README.md is
    rendered from these (``shmq.broker.config.reference``), so a key's documentation lives
    next to its default and cannot drift. ``shown`` replaces a default that depends on the
    host (a path under the home directory, the CPU count) in that reference."""
    return field(default=default, metadata={"doc": doc, "shown": shown}, **field_args)


@dataclass(frozen=True)
class MessageStoreConfig:
    """Storage engine settings (RocketMQ 4.9 defaults; sizes in bytes, intervals in ms)."""

    store_path_root_dir: str = setting(
        DEFAULT_STORE_ROOT,
        "The store's directory: `commitlog/`, `consumequeue/`, `index/`, `config/`, "
        "`checkpoint` and `abort` are kept under it (RocketMQ's default is `~/store`).",
        shown="`~/.shmq/store`",
    )
    # RocketMQ 4.9 has no keys for the consume-queue, index, checkpoint and abort paths (its
    # StorePathConfigHelper derives them from the root); the CommitLog's has one
    store_path_commit_log: str = setting(
        "",
        "Where the CommitLog is kept. shmq keeps it only in `storePathRootDir/commitlog`, "
        "where its clients and Spark map it: that path is taken (it then follows "
        "`storePathRootDir`, e.g. `shmq start --store`), any other is refused.",
        shown="`storePathRootDir/commitlog`",
    )
    mapped_file_size_commit_log: int = setting(
        1 << 30, "Size of each CommitLog file, a multiple of 4096 (1 GiB)."
    )
    mapped_file_size_consume_queue: int = setting(
        300_000 * 20, "Size of each consume-queue file: 300,000 units of 20 bytes."
    )
    flush_disk_type: str = setting(
        "ASYNC_FLUSH",
        "`ASYNC_FLUSH` (flushed in the background) or `SYNC_FLUSH` (a send is answered "
        "once its message is on disk; one `fdatasync` answers every waiting send).",
    )
    flush_interval_commit_log: int = setting(
        500, "ASYNC_FLUSH: how often the flush agent looks at the CommitLog."
    )
    flush_commit_log_least_pages: int = setting(
        4, "ASYNC_FLUSH: dirty 4 KiB pages a flush waits for."
    )
    flush_commit_log_thorough_interval: int = setting(
        10_000, "ASYNC_FLUSH: every dirty page is flushed at least this often."
    )
    sync_flush_timeout: int = setting(
        5_000,
        "How long a SYNC_FLUSH send waits for its flush, and a SYNC_MASTER's send for its "
        "slave, before `FLUSH_DISK_TIMEOUT` / `FLUSH_SLAVE_TIMEOUT`.",
    )
    flush_interval_consume_queue: int = setting(1_000, "How often reput flushes consume queues.")
    flush_consume_queue_least_pages: int = setting(
        2, "Dirty pages a consume queue needs for reput's flush."
    )
    max_message_size: int = setting(
        4 * 1024 * 1024, "The largest message accepted (bytes); `ringSize` must hold it."
    )
    check_crc_on_recover: bool = setting(
        True, "Check every record's body CRC when the CommitLog is recovered at start."
    )
    message_index_enable: bool = setting(
        True, "Index messages by key and unique id (the IndexFile) for queries."
    )
    max_hash_slot_num: int = setting(5_000_000, "Hash slots of each index file.")
    max_index_num: int = setting(20_000_000, "Entries of each index file.")
    max_msgs_num_batch: int = setting(64, "The most messages one query by key answers.")
    file_reserved_time: int = setting(
        72, "Hours a CommitLog file is kept before cleanup may delete it."
    )
    delete_when: str = setting(
        "04", "Hours of the day (0-23, `;`-separated) at which expired files are deleted."
    )
    disk_max_used_space_ratio: int = setting(
        75, "Disk use (%) above which expired files are deleted at any hour."
    )
    disk_space_clean_forcibly_ratio: int = setting(
        85,
        "Disk use (%) above which the oldest files are deleted whatever their age, with "
        "`cleanFileForciblyEnable` (a system property in RocketMQ).",
    )
    disk_space_warning_level_ratio: int = setting(
        90,
        "Disk use (%) above which puts are refused while reads go on (a system property in "
        "RocketMQ).",
    )
    clean_file_forcibly_enable: bool = setting(
        True, "Let cleanup delete unexpired files when the disk is nearly full."
    )
    delete_files_batch_max: int = setting(
        10, "The most CommitLog files one cleanup round deletes (fixed in RocketMQ 4.9)."
    )
    clean_resource_interval: int = setting(10_000, "How often the cleaner agent runs.")
    clean_resource_initial_delay: int = setting(
        60_000, "shmq's own: the first cleanup round after start (RocketMQ waits 60 s)."
    )
    warm_mapped_file_enable: bool = setting(
        False, "Touch every page of a new CommitLog file before it is written to."
    )
    mlock_mapped_file_enable: bool = setting(
        True, "shmq's own: lock a warmed file's pages in RAM (RocketMQ's warm-up always does)."
    )
    preallocate_mapped_file_enable: bool = setting(
        True, "shmq's own: allocate the next CommitLog file ahead, in the background."
    )
    # RocketMQ's checkInDiskByCommitOffset
    access_message_in_memory_max_ratio: int = setting(
        40,
        "A message further than this % of RAM behind the CommitLog's end is on disk: pulls of "
        "it take the in-disk limits, and with `slaveReadEnable` the consumer is sent to a "
        "slave; also used when a new group asks where to start.",
    )
    max_transfer_count_on_message_in_memory: int = setting(
        32, "The most messages a pull answer takes from memory."
    )
    max_transfer_bytes_on_message_in_memory: int = setting(
        256 * 1024, "The most bytes a pull answer takes from memory."
    )
    max_transfer_count_on_message_in_disk: int = setting(
        8, "The most messages a pull answer takes when they are on disk."
    )
    max_transfer_bytes_on_message_in_disk: int = setting(
        64 * 1024, "The most bytes a pull answer takes when they are on disk."
    )
    store_host: str = setting(
        "127.0.0.1:10911",
        "The address stored in each message (its STOREHOST); follows `brokerIP1` and "
        "`listenPort` unless set.",
        shown="`brokerIP1:listenPort`",
    )
    store_file_mode: str = setting(
        "0600",
        "shmq's own: octal mode of store files (directories add x to each r); `0640` lets a "
        "group read them.",
    )
    local_client_group: str = setting(
        "",
        "shmq's own: a group (name or id) whose members' clients use this broker locally "
        "(shared memory, the store's files) though they run as another user: the store, its "
        "segments and semaphores belong to the group, files group-readable (0640 at least), "
        "segments group-writable (0660). The broker's user must be in it. Empty: other "
        "users' clients go over TCP (and ACL).",
    )
    message_delay_level: str = setting(
        "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
        "Delays of levels 1, 2, … of delayed messages (units s, m, h, d).",
    )
    timer_max_delay_sec: int = setting(
        3 * 86_400, "RocketMQ 5's: the longest delay of a timer message, in seconds."
    )
    timer_precision_ms: int = setting(1000, "RocketMQ 5's: the timer wheel's tick.")

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
        commit_log_dir = os.path.join(self.store_path_root_dir, "commitlog")
        wanted = self.store_path_commit_log
        if wanted and not _same_path(wanted, commit_log_dir):
            parent, name = os.path.split(os.path.normpath(wanted))
            fix = f"set storePathRootDir={parent} instead" if name == "commitlog" else "remove it"
            raise ConfigError(
                f"storePathCommitLog {wanted!r} is not {commit_log_dir!r}: shmq keeps the "
                "CommitLog in storePathRootDir/commitlog, where its clients and Spark map it; "
                + fix
            )
        mode = str(self.store_file_mode).strip()
        if not re.fullmatch(r"0?[0-7]{3}", mode) or int(mode, 8) & 0o600 != 0o600:
            raise ConfigError(
                f"storeFileMode {self.store_file_mode!r} must be an octal mode like 0600 or "
                "0640 that lets the owner read and write"
            )
        if int(mode, 8) & 0o111:
            raise ConfigError(f"storeFileMode {mode} gives execute permission to store files")
        gid = self.local_client_gid
        if gid >= 0 and os.geteuid() != 0 and gid not in {os.getegid(), *os.getgroups()}:
            raise ConfigError(
                f"localClientGroup {self.local_client_group!r}: this user is not in it, so "
                "it cannot give the store and shared memory to it"
            )
        self.delay_levels_ms  # noqa: B018 (validates messageDelayLevel)
        if not 1 <= self.timer_max_delay_sec <= 24 * 86_400:  # the timer log's int32 delay
            raise ConfigError(
                f"timerMaxDelaySec {self.timer_max_delay_sec} is not in 1..{24 * 86_400}"
            )
        if not 10 <= self.timer_precision_ms <= 60_000:
            raise ConfigError(f"timerPrecisionMs {self.timer_precision_ms} is not in 10..60000")

    @property
    def local_client_gid(self) -> int:
        """``local_client_group`` as a group id; -1 when none is set."""
        name = str(self.local_client_group).strip()
        if not name:
            return -1
        try:
            return int(name) if name.isdigit() else grp.getgrnam(name).gr_gid
        except KeyError:
            raise ConfigError(f"localClientGroup {name!r}: no such group") from None

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
        root = changes.get("store_path_root_dir", self.store_path_root_dir)
        commit_log = changes.get("store_path_commit_log", "")
        if commit_log and _same_path(commit_log, os.path.join(root, "commitlog")):
            changes["store_path_commit_log"] = ""  # the default, so it follows the root
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


def _same_path(a: str, b: str) -> bool:
    return os.path.abspath(a) == os.path.abspath(b)


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
