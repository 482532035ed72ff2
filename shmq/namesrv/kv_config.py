"""The NameServer's KV config (RocketMQ's ``KVConfigManager``): namespace → key → value.

Admin tools keep cluster-wide settings here (mqadmin ``updateKvConfig``); the one setting
RocketMQ itself reads is namespace ``ORDER_TOPIC_CONFIG``: topic → ``"brokerA:4;brokerB:4"``,
handed to clients as a route's ``orderTopicConf`` (mqadmin ``updateOrderConf``), so a
producer keeps the same queue list for an ordered topic whatever the brokers register.

The table is kept in ``kvConfig.json`` (RocketMQ's ``kvConfigPath``, default
``~/namesrv/kvConfig.json``; shmq's is ``~/shmq/namesrv/kvConfig.json``) as RocketMQ's
``KVConfigSerializeWrapper``, ``{"configTable":{namespace:{key:value}}}``, compact as its
``toJson()`` writes it. Every change is written before it is answered, through
``json_file.persist`` (``.tmp`` fsynced, the old content to ``.bak``, atomic rename): a
change answered SUCCESS survives a crash. RocketMQ logs a failed write and answers SUCCESS
anyway; here the change is not made and the request fails, so the table never holds what
the file lacks. Without a path the table lives in memory only (tests, an embedded
NameServer without a store), as the controller's state does.

As in RocketMQ, deleting a namespace's last key leaves the namespace, empty:
GET_KVLIST_BY_NAMESPACE then answers an empty table, not QUERY_NOT_FOUND.

Unlike RocketMQ's, the table is bounded (``MAX_ENTRIES`` keys, ``MAX_CHARS`` characters of
namespaces, keys and values): any client that reaches the namesrv may put, and each put
rewrites the whole file, so an unbounded table would let one client grow the namesrv's
memory and disk, and every later put's cost, without end. A put past a bound fails naming
it; replacing a value within the bounds, deleting, and a file over them (written by hand)
still work.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from shmq import json_file
from shmq.errors import ConfigError
from shmq.remoting import fastjson

log = logging.getLogger(__name__)

FILE_NAME = "kvConfig.json"
DEFAULT_KV_CONFIG_PATH = os.path.join(os.path.expanduser("~"), "shmq", "namesrv", FILE_NAME)

Table = dict[str, dict[str, str]]

MAX_ENTRIES = 10_000  # keys over all namespaces
MAX_CHARS = 4 << 20  # characters of namespaces, keys and values over all entries


def _parse(text: str) -> Table:
    """The ``configTable`` of a ``kvConfig.json`` text; ``ConfigError`` (a ``ValueError``,
    so ``json_file.load`` tries the ``.bak``) naming what is not a string map."""
    data = json_file.loads_fastjson(text)
    if not isinstance(data, dict) or not isinstance(data.get("configTable", {}), dict):
        raise ConfigError('it does not hold {"configTable": {namespace: {key: value}}}')
    table: Table = {}
    for namespace, entries in data.get("configTable", {}).items():
        if not isinstance(entries, dict):
            raise ConfigError(f"namespace {namespace!r} holds {entries!r}, not a map")
        for key, value in entries.items():
            if not isinstance(value, str):
                raise ConfigError(f"namespace {namespace!r} key {key!r}: {value!r} is no string")
        table[str(namespace)] = {str(k): v for k, v in entries.items()}
    return table


class KVConfigManager:
    """Thread-safe namespace → key → value table, persisted to ``path`` (None: memory only).

    Loads ``path`` (or its ``.bak``) on construction: ``ConfigError`` naming the file when
    it has content but does not parse, since starting empty would overwrite the only copy.
    """

    def __init__(self, path: str | None = None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._table: Table = {}
        if path is not None:
            loaded = json_file.load(path, _parse)
            if loaded is not None:
                self._table = loaded
                log.info("loaded %d KV config namespace(s) from %s", len(loaded), path)

    def put(self, namespace: str, key: str, value: str) -> None:
        """Create or replace ``key`` in ``namespace`` (created when new); ``OSError`` when
        the file cannot be written, the table then unchanged."""
        with self._lock:
            old = self._table.get(namespace, {})
            entries = {**old, key: value}
            table = {**self._table, namespace: entries}
            if key not in old or len(value) > len(old[key]):
                _check_bounds(table)
            self._commit(table)
        log.info("KV config put: namespace %s key %s value %s", namespace, key, value)

    def delete(self, namespace: str, key: str) -> None:
        """Remove ``key`` from ``namespace`` (nothing to remove is no error, as in RocketMQ;
        the file is written either way)."""
        with self._lock:
            table = dict(self._table)
            if namespace in table:
                table[namespace] = {k: v for k, v in table[namespace].items() if k != key}
            self._commit(table)
        log.info("KV config delete: namespace %s key %s", namespace, key)

    def get(self, namespace: str, key: str) -> str | None:
        with self._lock:
            return self._table.get(namespace, {}).get(key)

    def namespace(self, namespace: str) -> dict[str, str] | None:
        """The namespace's keys and values (RocketMQ's ``KVTable``), None when it never had
        any."""
        with self._lock:
            entries = self._table.get(namespace)
            return None if entries is None else dict(entries)

    def _commit(self, table: Table) -> None:
        """Write ``table``, then make it the one served (under ``_lock``: writes in order)."""
        if self.path is not None:
            json_file.persist(self.path, fastjson.dumps(_wrapper(table)))
        self._table = table


def _check_bounds(table: Table) -> None:
    """``ConfigError`` when ``table`` holds more than ``MAX_ENTRIES`` keys or
    ``MAX_CHARS`` characters."""
    entries = sum(len(kv) for kv in table.values())
    chars = sum(len(ns) + len(k) + len(v) for ns, kv in table.items() for k, v in kv.items())
    if entries > MAX_ENTRIES or chars > MAX_CHARS:
        raise ConfigError(
            f"KV config full: a put would make it {entries} keys and {chars} characters of "
            f"namespaces, keys and values (at most {MAX_ENTRIES} and {MAX_CHARS}); delete "
            "keys first"
        )


def _wrapper(table: Table) -> dict[str, Any]:
    """RocketMQ's ``KVConfigSerializeWrapper``, sorted so equal tables give equal files."""
    return {"configTable": {ns: dict(sorted(kv.items())) for ns, kv in sorted(table.items())}}
