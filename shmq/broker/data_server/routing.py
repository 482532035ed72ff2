"""Which requests the data server serves itself; every other one it relays to the control
server (``remoting.relay``), which serves it exactly as it would a direct client's.

Served here: a send (SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE) to a topic the
shared topic table holds as writable that is no retry or dead-letter topic (an unknown
topic must be auto-created, a retry send may go to the DLQ: the control server does both);
a pull whose topic the table holds and whose group is known here (or is created as it is
used, ``autoCreateSubscriptionGroup``), when the
request carries its subscription (sysFlag bit 0x4) or a heartbeat this server relayed
named the group's subscription of the topic (RocketMQ 4.9's push consumer sends it only
there). Heartbeats are read as they pass (the latest per group wins), as the control
server's client-manage processor reads them. The decision runs on the server's loop as
each request is read, in order, so it reads only what is in memory here.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from shmq.broker.data_server.tables import ControlTables
from shmq.broker.processors.pull import FLAG_SUBSCRIPTION
from shmq.broker.topic.config import PERM_WRITE
from shmq.ipc import topic_table as tt
from shmq.names import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from shmq.remoting.codes import RequestCode
from shmq.remoting.protocol import RemotingCommand

# a send code → the ext field naming its topic
SEND_TOPIC_FIELD = {
    RequestCode.SEND_MESSAGE: "topic",
    RequestCode.SEND_MESSAGE_V2: "b",
    RequestCode.SEND_BATCH_MESSAGE: "b",
}


class Router:
    """``serves(request, connection)``: the relay's decision (see the module docstring);
    ``group_info``: the subscriptions heartbeats named (the pull processor's lookup)."""

    def __init__(
        self, tables: ControlTables, topic_buf: np.ndarray, topic_words: np.ndarray
    ) -> None:
        self.tables = tables
        self.topic_buf, self.topic_words = topic_buf, topic_words
        self._perms: dict[str, int] = {}
        self._perms_version = -1
        self._subscriptions: dict[str, dict[str, dict[str, Any]]] = {}  # group → topic → sub
        self._lock = threading.Lock()

    def serves(self, request: RemotingCommand, _conn: object) -> bool:
        code = request.code
        if code in SEND_TOPIC_FIELD:
            topic = request.ext_fields.get(SEND_TOPIC_FIELD[code], "")
            if topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
                return False
            perm = self._perm(topic)
            return perm is not None and bool(perm & PERM_WRITE)
        if code == RequestCode.PULL_MESSAGE:
            fields = request.ext_fields
            group, topic = fields.get("consumerGroup", ""), fields.get("topic", "")
            if self._perm(topic) is None:
                return False
            if not (self.tables.knows_group(group) or self.tables.creates_groups):
                return False  # the control server refuses it
            try:
                flags = int(fields.get("sysFlag", "0"))
            except ValueError:
                return False  # the control server answers what is wrong with it
            return bool(flags & FLAG_SUBSCRIPTION) or topic in self._subscriptions.get(group, {})
        if code == RequestCode.HEART_BEAT:
            self._heartbeat(request)
        return False

    def _perm(self, topic: str) -> int | None:
        """The topic's permission in the shared topic table (None: not there)."""
        version = tt.load_version(self.topic_words)
        if version != self._perms_version:
            version, topics = tt.read_topics(self.topic_buf, self.topic_words)
            self._perms = {name.decode(): perm for name, (_, _, perm) in topics.items()}
            self._perms_version = version
        return self._perms.get(topic)

    def _heartbeat(self, request: RemotingCommand) -> None:
        try:
            data = request.json_body() or {}
            entries = data.get("consumerDataSet") or []
            found = {
                str(entry["groupName"]): {
                    str(sub["topic"]): sub for sub in entry.get("subscriptionDataSet") or []
                }
                for entry in entries
            }
        except (ValueError, TypeError, KeyError, AttributeError):
            return  # the control server answers what is wrong with it
        with self._lock:
            self._subscriptions.update(found)

    def group_info(self, group: str) -> dict[str, Any] | None:
        """The group's subscriptions as the pull processor reads them (``ConsumerManager``'s
        form: ``subscriptionTable``), or None when no heartbeat named the group."""
        with self._lock:
            subs = self._subscriptions.get(group)
        return None if subs is None else {"subscriptionTable": dict(subs)}
