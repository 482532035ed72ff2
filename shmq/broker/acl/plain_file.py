"""``plain_acl.yml`` on disk: where it is, the content last loaded, its reload when the file
changes, and the ACL admin codes' rewrites of it.

RocketMQ watches its ACL files and reloads them; shmq looks at the file's mtime, size and
inode at most once a ``poll_s`` when the ACL is consulted, so an edit takes effect within a
second and an idle broker costs nothing. A file that cannot be read or parsed keeps the
content loaded before in force and is reported once per change (never its secrets). The
broker refuses to start without a good file: serving with no accounts would refuse
everyone silently, serving with none checked would be worse.

A rewrite (``update``) bumps ``dataVersion`` and replaces the file atomically, mode 0600
(it holds secret keys). Comments of the file are not kept: RocketMQ rewrites it through
its YAML library too.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from shmq import files
from shmq.broker.acl.address import AclConfigError
from shmq.broker.acl.plain_config import AclConfig, parse_acl_config
from shmq.broker.config.broker_config import BrokerConfig
from shmq.errors import ConfigError

log = logging.getLogger(__name__)

FILE_NAME = "plain_acl.yml"
POLL_S = 1.0
FILE_MODE = 0o600
HEADER = "# RocketMQ's plain_acl.yml, rewritten by the broker's ACL admin codes\n"

Stamp = tuple[int, int, int]


def acl_file_path(config: BrokerConfig) -> str:
    """``aclFile`` (relative: to the broker.conf's folder), else ``plain_acl.yml`` beside the
    broker.conf given with ``-c``; ``ConfigError`` when there is neither."""
    conf_dir = os.path.dirname(config.broker_config_path) if config.broker_config_path else ""
    if config.acl_file:
        return os.path.abspath(os.path.join(conf_dir, os.path.expanduser(config.acl_file)))
    if not config.broker_config_path:
        raise ConfigError(
            "aclEnable=true needs plain_acl.yml: set aclFile, or start the broker from a "
            "broker.conf (-c) with plain_acl.yml beside it"
        )
    return os.path.join(conf_dir, FILE_NAME)


def _stamp(path: str) -> Stamp | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


class PlainAclFile:
    """The ACL file at ``path``; ``ConfigError`` when it cannot be loaded at start."""

    def __init__(self, path: str, poll_s: float = POLL_S) -> None:
        self.path = path
        self.poll_s = poll_s
        self._lock = threading.Lock()
        self._stamp = _stamp(path)
        try:
            self._config = self._read()
        except (OSError, UnicodeDecodeError, AclConfigError) as exc:
            raise ConfigError(f"aclEnable=true but {path} cannot be loaded: {_why(exc)}") from None
        self._checked = time.monotonic()

    def current(self) -> AclConfig:
        """The content in force, re-read first if the file changed (checked once a poll)."""
        if time.monotonic() - self._checked >= self.poll_s:
            with self._lock:
                self._refresh()
        return self._config

    def update(self, change: Callable[[AclConfig], AclConfig]) -> AclConfig:
        """Write ``change(current content)`` with the next ``dataVersion``; ``AclConfigError``
        (nothing written) when the result is not a valid file."""
        with self._lock:
            self._checked = 0.0
            self._refresh()  # an edit made meanwhile is the base, not overwritten
            config = change(self._config)
            config = replace(config, data_version=self._config.data_version.next())
            text = HEADER + config.to_yaml()
            parse_acl_config(text)  # what is written must load
            self._write(text)
            self._config, self._stamp = config, _stamp(self.path)
            log.info("ACL file %s rewritten (dataVersion %d)", self.path,
                     config.data_version.counter)  # fmt: skip
            return config

    def _refresh(self) -> None:
        now = time.monotonic()
        if now - self._checked < self.poll_s:
            return
        self._checked = now
        stamp = _stamp(self.path)
        if stamp == self._stamp:
            return
        self._stamp = stamp  # a bad file is reported once, not at every poll
        try:
            config = self._read()
        except (OSError, UnicodeDecodeError, AclConfigError) as exc:
            log.warning("ACL file %s not loaded, the one loaded before stays in force: %s",
                        self.path, _why(exc))  # fmt: skip
            return
        self._config = config
        log.info("ACL file %s reloaded: %d accounts, %d global white addresses, dataVersion %d",
                 self.path, len(config.accounts), len(config.global_white_addresses),
                 config.data_version.counter)  # fmt: skip

    def _read(self) -> AclConfig:
        with open(self.path, encoding="utf-8") as f:
            return parse_acl_config(f.read())

    def _write(self, text: str) -> None:
        """Replace the file atomically: a 0600 temporary beside it, fsynced, renamed."""
        directory = os.path.dirname(self.path) or "."
        tmp = f"{self.path}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                os.fchmod(f.fileno(), FILE_MODE)
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        files.fsync_dir(directory)


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8"
    return str(exc)
