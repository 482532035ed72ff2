"""Who is online in a group, as mqadmin's ``consumerConnection``, ``producerConnection`` and
``consumerStatus`` see it: the members each master knows, merged over the brokers, and a
consumer's running info asked through a broker it heartbeats to. ``Admin`` documents each
call."""

from __future__ import annotations

from typing import Any

from shmq.client.admin.remote import Broker, Remote
from shmq.errors import ResponseError
from shmq.remoting.admin_bodies import queue_entries
from shmq.remoting.protocol import RequestCode, ResponseCode

RUNNING_INFO_TIMEOUT_S = 8.0  # the broker gives a consumer 5 s to answer, then says so


class GroupConnections:
    """A group's online consumers and producers, and what each consumer holds."""

    def __init__(self, remote: Remote) -> None:
        self._remote = remote

    def _connections(self, group: str) -> list[tuple[Broker, dict[str, Any]]]:
        """``(broker, ConsumerConnection)`` of each master where ``group`` has members."""
        found = []
        for target in self._remote.masters():
            try:
                body = self._remote.call(
                    target, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group}
                )[1]
            except ResponseError as exc:
                if exc.code == ResponseCode.CONSUMER_NOT_ONLINE:
                    continue
                raise
            found.append((target, body))
        return found

    def consumer_connection(self, group: str) -> dict[str, Any]:
        merged: dict[str, Any] | None = None
        clients: dict[str, dict[str, Any]] = {}
        for _, body in self._connections(group):
            if merged is None:
                merged = {**body, "subscriptionTable": {}}
            merged["subscriptionTable"].update(body.get("subscriptionTable", {}))
            for conn in body.get("connectionSet", []):
                clients.setdefault(conn["clientId"], conn)
        if merged is None:
            raise ResponseError(
                ResponseCode.CONSUMER_NOT_ONLINE,
                f"the consumer group {group} is not online on any broker",
            )
        merged["connectionSet"] = [clients[c] for c in sorted(clients)]
        return merged

    def producer_connection(self, group: str) -> dict[str, Any]:
        clients: dict[str, dict[str, Any]] = {}
        for target in self._remote.masters():
            try:
                body = self._remote.call(target, RequestCode.GET_PRODUCER_CONNECTION_LIST,
                                         {"producerGroup": group})[1]  # fmt: skip
            except ResponseError as exc:
                if exc.code == ResponseCode.SYSTEM_ERROR:  # the group is not on this broker
                    continue
                raise
            for conn in body.get("connectionSet", []):
                clients.setdefault(conn["clientId"], conn)
        if not clients:
            raise ResponseError(ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist")
        return {"connectionSet": [clients[c] for c in sorted(clients)]}

    def consumer_status(
        self, group: str, client_id: str | None = None, jstack: bool = False
    ) -> dict[str, dict[str, Any]]:
        where: dict[str, Broker] = {}
        for target, body in self._connections(group):
            for conn in body.get("connectionSet", []):
                where.setdefault(conn["clientId"], target)
        if client_id is not None:
            where = {c: t for c, t in where.items() if c == client_id}
        if not where:
            who = f"consumer {client_id} of group {group}" if client_id else f"group {group}"
            raise ResponseError(
                ResponseCode.CONSUMER_NOT_ONLINE, f"the {who} is not online on any broker"
            )
        out = {}
        for cid, target in sorted(where.items()):
            fields = {"consumerGroup": group, "clientId": cid, "jstackEnable": jstack}
            info = self._remote.call(target, RequestCode.GET_CONSUMER_RUNNING_INFO, fields,
                                     timeout=RUNNING_INFO_TIMEOUT_S)[1]  # fmt: skip
            out[cid] = {**info, "mqTable": queue_entries(info.get("mqTable", {}))}
        return out
