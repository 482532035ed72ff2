"""The brokers themselves, as mqadmin's ``clusterList``, ``haStatus``, ``brokerStatus``,
``getBrokerConfig`` and ``updateBrokerConfig`` see them: who is registered, their runtime
numbers and replication state, and their configuration (GET_BROKER_CONFIG's properties
text, every broker and store key under RocketMQ's names). ``Admin`` documents each call."""

from __future__ import annotations

from typing import Any

from shmq.client.admin.remote import Broker, Remote
from shmq.errors import ClientError, RemotingError
from shmq.java_properties import escape, parse_properties
from shmq.remoting.admin_bodies import runtime_stats
from shmq.remoting.protocol import RequestCode


class Brokers:
    """Registered brokers, their status and their config."""

    def __init__(self, remote: Remote) -> None:
        self._remote = remote

    def cluster_list(self) -> list[dict[str, Any]]:
        info = self._remote.cluster_info()
        cluster_of = {
            name: cluster
            for cluster, names in info.get("clusterAddrTable", {}).items()
            for name in names
        }
        out = []
        for name, data in sorted(info.get("brokerAddrTable", {}).items()):
            for broker_id, addr in sorted(data.get("brokerAddrs", {}).items(), key=_id_order):
                entry: dict[str, Any] = {
                    "cluster": cluster_of.get(name, data.get("cluster", "")),
                    "brokerName": name,
                    "brokerId": int(broker_id),
                    "address": addr,
                }
                try:
                    entry["status"] = self._runtime_stats((name, addr))
                except RemotingError as exc:
                    entry["status"], entry["error"] = None, str(exc)
                out.append(entry)
        return out

    def ha_status(self) -> list[dict[str, Any]]:
        out = []
        for entry in self.cluster_list():
            name, addr = entry["brokerName"], entry["address"]
            try:
                status = self._remote.call((name, addr), RequestCode.GET_BROKER_HA_STATUS)[1]
            except RemotingError as exc:
                status = {"brokerName": name, "brokerId": entry["brokerId"], "error": str(exc)}
            out.append({"address": addr, **status})
        return out

    def broker_status(self, broker: str) -> dict[str, Any]:
        return self._runtime_stats(self._remote.broker(broker))

    def _runtime_stats(self, broker: Broker) -> dict[str, Any]:
        """shmq's numbers from the broker's runtime info ``KVTable``."""
        body = self._remote.call(broker, RequestCode.GET_BROKER_RUNTIME_INFO)[1]
        try:
            return runtime_stats(body)
        except ValueError as exc:
            raise ClientError(f"broker {broker[0]} ({broker[1]}): {exc}") from None

    def broker_config(
        self, broker: str | None = None, cluster: str | None = None
    ) -> dict[str, dict[str, str]]:
        out = {}
        for target in self._remote.targets(broker, cluster):
            response = self._remote.invoke(target, RequestCode.GET_BROKER_CONFIG)
            out[target[0]] = parse_properties(bytes(response.body).decode())
        return out

    def update_broker_config(
        self, key: str, value: str, broker: str | None = None, cluster: str | None = None
    ) -> dict[str, str | None]:
        body = f"{escape(key)}={escape(value)}\n".encode()
        return {
            target[0]: self._remote.invoke(
                target, RequestCode.UPDATE_BROKER_CONFIG, body=body
            ).remark
            for target in self._remote.targets(broker, cluster)
        }


def _id_order(item: tuple[str, str]) -> int:
    return int(item[0])
