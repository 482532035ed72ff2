"""RocketMQ's ``ConfigManager`` persistence: fastjson-style text, ``.tmp`` / ``.bak`` files.

A RocketMQ broker's ``config/*.json`` files are fastjson 1.x ``PrettyFormat`` output: tab
indentation, no space after ``:``, nulls omitted, and integer map keys written bare
(``{0:12}``), which is not strict JSON. shmq writes the same shape so a RocketMQ tool (or a
person used to one) can read its files, and reads files a RocketMQ broker wrote.

Writes follow ``MixAll.string2File``: new text to ``<file>.tmp``, the old content to
``<file>.bak``, then the ``.tmp`` replaces ``<file>``. Here each step is fsynced and the
replace is atomic, so a crash leaves either the old or the new file whole; reads fall back
to ``<file>.bak`` when ``<file>`` is missing, empty or does not parse.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from shmq import files
from shmq.errors import ConfigError
from shmq.remoting import fastjson

log = logging.getLogger(__name__)

E = TypeVar("E")  # an entry of a VersionedTable: has to_json()


def dumps_fastjson(obj: Any) -> str:
    """``obj`` as fastjson ``PrettyFormat`` text (``fastjson.dumps(..., pretty=True)``):
    tabs, ``"key":value``, keys sorted (integers numerically, before strings), ``int`` keys
    bare, ``None`` values left out."""
    return fastjson.dumps(obj, pretty=True)


def loads_fastjson(text: str, *, int_keys: bool = False) -> Any:
    """Parse fastjson text or plain JSON (``shmq.remoting.fastjson.loads``).

    Keys written bare (``{0:12}``) come back as ``int``; quoted keys stay ``str`` unless
    ``int_keys`` is true, which turns every key made only of digits into an ``int`` (for
    maps RocketMQ keys by number, such as queue ids, when another writer quoted them).
    """
    return fastjson.loads(text, bare_int_keys=True, int_keys=int_keys)


def persist(path: str, text: str) -> None:
    """Write ``text`` to ``path``: ``path.tmp`` first, the old content to ``path.bak``, then
    an atomic replace; everything fsynced, and no ``.tmp`` left behind on failure."""
    directory = os.path.dirname(path) or "."
    files.makedirs(directory)
    tmp = path + ".tmp"
    try:
        _write_synced(tmp, text.encode("utf-8"))
        if os.path.exists(path):
            with open(path, "rb") as f:
                _write_synced(path + ".bak", f.read())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    files.fsync_dir(directory)


def _write_synced(path: str, data: bytes) -> None:
    """Replace ``path``'s content with ``data`` (the store's file mode), fsynced."""
    fd = files.create(path, os.O_WRONLY | os.O_TRUNC)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def load(path: str, parse: Callable[[str], Any] = loads_fastjson) -> Any | None:
    """``parse`` of ``path``'s text, or of ``path.bak`` when ``path`` is missing, empty or
    ``parse`` raises ``ValueError``; ``None`` when neither file has content.

    Raises ``ConfigError`` when a file has content but neither parses: starting empty
    would overwrite the only copy of the broker's topics or offsets (RocketMQ refuses to
    start then too).
    """
    failures: list[str] = []
    for candidate in (path, path + ".bak"):
        try:
            with open(candidate, encoding="utf-8") as f:
                text = f.read()
            if not text.strip():
                continue
            value = parse(text)
        except FileNotFoundError:
            continue
        except ValueError as exc:
            log.warning("%s does not parse: %s", candidate, exc)
            failures.append(f"{candidate}: {exc}")
            continue
        if candidate != path:
            log.warning("%s is missing, empty or broken: loaded %s instead", path, candidate)
        return value
    if failures:
        raise ConfigError(
            f"cannot load {path} or its .bak ({'; '.join(failures)}); "
            "repair or remove the files to start empty"
        )
    return None


class PersistedTable:
    """Base of RocketMQ's ConfigManagers here: a lock-protected table that remembers whether
    it changed since it was last written. Subclasses set ``path`` and give ``_snapshot()``
    (the JSON object to write, called under ``_lock``)."""

    path: str

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._persist_lock = threading.Lock()
        self._dirty = False

    def _snapshot(self) -> Any:
        raise NotImplementedError

    @property
    def dirty(self) -> bool:
        """Whether the table changed since it was last persisted."""
        return self._dirty

    def encode(self) -> str:
        """The file's text (RocketMQ's ``ConfigManager.encode``; also what a master
        answers a slave's GET_ALL_CONSUMER_OFFSET with)."""
        with self._lock:
            return dumps_fastjson(self._snapshot())

    def persist(self) -> None:
        """Write the file (fastjson style; the previous content kept as ``.bak``)."""
        with self._persist_lock:
            with self._lock:
                text = dumps_fastjson(self._snapshot())
                self._dirty = False
            try:
                persist(self.path, text)
            except BaseException:
                self._dirty = True
                raise

    def persist_if_dirty(self) -> None:
        if self._dirty:
            self.persist()


class VersionedTable(PersistedTable, Generic[E]):
    """A ``PersistedTable`` of named entries with RocketMQ's ``DataVersion``, written as
    ``{"dataVersion": {"counter", "timestamp"}, <table_key>: {name: entry}}`` (topics.json,
    subscriptionGroup.json). Subclasses set ``path`` and call ``_load``; ``name_of`` gives
    an entry's name, ``kind`` what an entry is in messages ("topic")."""

    def __init__(self, table_key: str, kind: str, name_of: Callable[[E], str]) -> None:
        super().__init__()
        self.table_key, self.kind, self.name_of = table_key, kind, name_of
        self._entries: dict[str, E] = {}
        self._counter = 0
        self._timestamp = now_ms()

    def _load(self, parse_entry: Callable[[Any], E]) -> None:
        """Read the file (or its ``.bak``); ``ConfigError`` when it is malformed: unknown
        top-level fields (5.x ``forbiddenTable``) are ignored."""
        loaded = load(self.path, lambda text: self._parse(loads_fastjson(text), parse_entry))
        if loaded is not None:
            self._entries, self._counter, self._timestamp = loaded

    def _parse(self, data: Any, parse_entry: Callable[[Any], E]) -> tuple[dict[str, E], int, int]:
        """The entries and dataVersion (counter, timestamp) of the file's JSON object."""
        file_name = os.path.basename(self.path)
        if not isinstance(data, dict):
            raise ConfigError(f"{file_name} does not hold a JSON object")
        table = data.get(self.table_key, {})
        version = data.get("dataVersion", {})
        if not isinstance(table, dict) or not isinstance(version, dict):
            raise ConfigError(f"{self.table_key} and dataVersion must be JSON objects")
        entries = {}
        for name, raw in table.items():
            entry = parse_entry(raw)
            if self.name_of(entry) != name:
                raise ConfigError(
                    f"{self.table_key} key {name!r} holds {self.kind} {self.name_of(entry)!r}"
                )
            entries[name] = entry
        counter, timestamp = version.get("counter", 0), version.get("timestamp", now_ms())
        if not _is_int(counter) or not _is_int(timestamp):
            raise ConfigError(f"dataVersion {version!r} does not hold integers")
        return entries, counter, timestamp

    def replace_all(self, data: Any, parse_entry: Callable[[Any], E]) -> bool:
        """Take every entry and the dataVersion of ``data`` (another broker's
        ``to_wrapper_json``: a slave copying its master's) unless the dataVersion is the
        one this table has; True when it changed. ``ConfigError`` (nothing changed) when
        ``data`` is malformed."""
        entries, counter, timestamp = self._parse(data, parse_entry)
        with self._lock:
            if (counter, timestamp) == (self._counter, self._timestamp):
                return False
            self._entries, self._counter, self._timestamp = entries, counter, timestamp
            self._dirty = True
            return True

    def get(self, name: str) -> E | None:
        with self._lock:
            return self._entries.get(name)

    def all(self) -> dict[str, E]:
        with self._lock:
            return dict(self._entries)

    def update(self, entry: E) -> None:
        """Create the entry, or replace the one of the same name."""
        with self._lock:
            self._entries[self.name_of(entry)] = entry
            self._bump()

    def delete(self, name: str) -> bool:
        """Remove the entry; ``False`` when there was none."""
        with self._lock:
            if self._entries.pop(name, None) is None:
                return False
            self._bump()
            return True

    def _add_missing(self, entries: list[E]) -> None:
        """Add built-in entries (system topics, groups) the file does not have."""
        for entry in entries:
            if self.name_of(entry) not in self._entries:
                self._entries[self.name_of(entry)] = entry
                self._dirty = True

    def next_version(self) -> None:
        """Count a change the entries do not show (RocketMQ's ``DataVersion.nextVersion``):
        the namesrvs replace a broker's queue data only when its version changed."""
        with self._lock:
            self._bump()

    def _bump(self) -> None:
        """Count a change (under ``_lock``)."""
        self._counter += 1
        self._timestamp = now_ms()
        self._dirty = True

    @property
    def data_version(self) -> dict[str, int]:
        """RocketMQ's ``DataVersion``: the counter grows on every change."""
        with self._lock:
            return {"counter": self._counter, "timestamp": self._timestamp}

    def to_wrapper_json(self) -> dict[str, Any]:
        """The file's JSON (also what the broker sends: REGISTER_BROKER's topic wrapper,
        GET_ALL_SUBSCRIPTIONGROUP_CONFIG's body)."""
        with self._lock:
            return self._snapshot()

    def _snapshot(self) -> Any:
        return {
            "dataVersion": {"counter": self._counter, "timestamp": self._timestamp},
            self.table_key: {n: e.to_json() for n, e in sorted(self._entries.items())},
        }


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def now_ms() -> int:
    return int(time.time() * 1000)
