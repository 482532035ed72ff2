"""The broker's registry of online consumers (RocketMQ's ``ConsumerManager``).

Consumers announce themselves with heartbeats (every 30 s by default) carrying their group,
message model, where to start and subscriptions. A consumer is forgotten when it
unregisters, when its connection closes, or when no heartbeat came for
``channelExpiredTimeout`` (120 s). Whenever a group's membership changes, every remaining
member is told at once (oneway ``NOTIFY_CONSUMER_IDS_CHANGED`` on its own connection) so it
rebalances now rather than at its next 20 s tick.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from shmq.errors import RemotingError
from shmq.remoting.protocol import FLAG_ONEWAY, RemotingCommand, RequestCode
from shmq.remoting.server import Connection

log = logging.getLogger(__name__)


def now_ms() -> int:
    return int(time.time() * 1000)


# RocketMQ's ``MessageModel`` by ordinal: clients that write the enum as a number
# (rocketmq-client-cpp sends ``1``) mean the same models as those that write its name.
MESSAGE_MODELS = ("BROADCASTING", "CLUSTERING")


def message_model_name(value: Any, default: str = "CLUSTERING") -> str:
    """A heartbeat's ``messageModel`` as its enum name, whether sent as the name or as
    the ordinal (BROADCASTING 0, CLUSTERING 1); ``default`` when absent."""
    if value is None:
        return default
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(MESSAGE_MODELS):
        return MESSAGE_MODELS[value]
    return str(value)


@dataclass
class ClientChannel:
    """One member of a consumer or producer group: its client id, connection, last
    heartbeat, and the language and version its requests' headers name."""

    client_id: str
    conn: Connection
    last_update_ms: int
    language: str = "PYTHON"
    version: int = 0

    def to_json(self) -> dict[str, Any]:
        """RocketMQ's ``Connection``."""
        return {
            "clientAddr": self.conn.peer,
            "clientId": self.client_id,
            "language": self.language,
            "version": self.version,
        }


@dataclass
class ConsumerGroupInfo:
    """A group's members and what they declared in their last heartbeat."""

    group: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    subscriptions: dict[str, dict[str, Any]] = field(default_factory=dict)
    channels: dict[str, ClientChannel] = field(default_factory=dict)
    last_update_ms: int = 0

    def to_json(self) -> dict[str, Any]:
        """RocketMQ's ``ConsumerConnection``."""
        return {
            "connectionSet": [c.to_json() for c in self.channels.values()],
            "consumeFromWhere": self.consume_from_where,
            "consumeType": self.consume_type,
            "messageModel": self.message_model,
            "subscriptionTable": dict(self.subscriptions),
        }


class ConsumerManager:
    """Thread-safe: the control server's connection threads and the housekeeping thread
    call it."""

    def __init__(self, expire_ms: int = 120_000, notify_ids_changed: bool = True) -> None:
        self.expire_ms = expire_ms
        self.notify_ids_changed = notify_ids_changed
        self._groups: dict[str, ConsumerGroupInfo] = {}
        self._lock = threading.Lock()

    # -- membership ---------------------------------------------------------------------------

    def register(
        self,
        client_id: str,
        conn: Connection,
        data: dict[str, Any],
        language: str = "PYTHON",
        version: int = 0,
    ) -> bool:
        """A heartbeat's ``consumerDataSet`` entry (``language`` and ``version`` from its
        header); True when the member is new (the group was told)."""
        group = str(data["groupName"])
        now = now_ms()
        with self._lock:
            info = self._groups.get(group)
            if info is None:
                info = self._groups[group] = ConsumerGroupInfo(group)
            info.consume_type = str(data.get("consumeType", info.consume_type))
            info.message_model = message_model_name(data.get("messageModel"), info.message_model)
            info.consume_from_where = str(data.get("consumeFromWhere", info.consume_from_where))
            subs = data.get("subscriptionDataSet")
            if subs is not None:
                info.subscriptions = {str(s["topic"]): dict(s) for s in subs}
            info.last_update_ms = now
            channel = info.channels.get(client_id)
            is_new = channel is None or channel.conn.id != conn.id
            if is_new:
                info.channels[client_id] = ClientChannel(client_id, conn, now, language, version)
            else:
                channel.last_update_ms = now
        if is_new:
            log.info("consumer %s joined group %s (%s)", client_id, group, conn.peer)
            self._notify(group)
        return is_new

    def unregister(self, group: str, client_id: str) -> None:
        with self._lock:
            info = self._groups.get(group)
            removed = info is not None and info.channels.pop(client_id, None) is not None
        if removed:
            log.info("consumer %s left group %s", client_id, group)
            self._notify(group)

    def connection_closed(self, conn: Connection) -> None:
        """Forget every member that used ``conn``."""
        self._remove(lambda ch: ch.conn.id == conn.id, "its connection closed")

    def scan_expired(self, now: int | None = None) -> None:
        """Forget members without a heartbeat for ``expire_ms`` (housekeeping)."""
        now = now_ms() if now is None else now
        self._remove(lambda ch: now - ch.last_update_ms > self.expire_ms, "heartbeat expired")

    def _remove(self, doomed, why: str) -> None:
        changed = []
        with self._lock:
            for group, info in self._groups.items():
                gone = [cid for cid, ch in info.channels.items() if doomed(ch)]
                for cid in gone:
                    ch = info.channels.pop(cid)
                    log.info("consumer %s removed from group %s: %s", cid, group, why)
                    if why == "heartbeat expired":
                        ch.conn.close()
                if gone:
                    changed.append(group)
        for group in changed:
            self._notify(group)

    # -- lookups ----------------------------------------------------------------------------

    def client_ids(self, group: str) -> list[str]:
        with self._lock:
            info = self._groups.get(group)
            return sorted(info.channels) if info else []

    def connection_of(self, group: str, client_id: str) -> Connection | None:
        """The connection member ``client_id`` of ``group`` heartbeats on, if online."""
        with self._lock:
            info = self._groups.get(group)
            channel = info.channels.get(client_id) if info else None
            return channel.conn if channel else None

    def groups(self) -> list[str]:
        with self._lock:
            return sorted(g for g, info in self._groups.items() if info.channels)

    def group_info(self, group: str) -> dict[str, Any] | None:
        """The group's connections and subscriptions as JSON (``ConsumerConnection``), or
        None when no member is online."""
        with self._lock:
            info = self._groups.get(group)
            return info.to_json() if info and info.channels else None

    def groups_of_topic(self, topic: str) -> list[str]:
        with self._lock:
            return sorted(
                g
                for g, info in self._groups.items()
                if info.channels and topic in info.subscriptions
            )

    # -- telling the group ----------------------------------------------------------------------

    def tell(self, group: str, request: RemotingCommand) -> int:
        """Send a oneway ``request`` to every online member of ``group``; how many got it."""
        with self._lock:
            info = self._groups.get(group)
            channels = list(info.channels.values()) if info else []
        sent = 0
        for ch in channels:
            request.flag |= FLAG_ONEWAY
            try:
                ch.conn.send(request)
                sent += 1
            except RemotingError as exc:
                log.info("cannot tell consumer %s of %s: %s", ch.client_id, group, exc)
        return sent

    def _notify(self, group: str) -> None:
        if self.notify_ids_changed:
            self.tell(
                group,
                RemotingCommand.request(
                    RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group}
                ),
            )
