"""RocketMQ 5's controller commands, as mqadmin sends them: ``getControllerMetaData``,
``electMaster`` and ``cleanBrokerMetadata`` to a controller, ``getBrokerEpoch`` to the
brokers. A namesrv that is no controller answers the controller's codes
REQUEST_CODE_NOT_SUPPORTED, and a broker outside controller mode refuses its epoch cache
(SYSTEM_ERROR, "this request only for controllerMode"); both become a ``ClientError``
saying controller mode is not enabled there. ``Admin`` documents each call.
"""

from __future__ import annotations

import time
from typing import Any

from shmq.client.admin.remote import Broker, Remote
from shmq.errors import ClientError, ResponseError
from shmq.remoting.protocol import RequestCode, ResponseCode, request_name

_NOT_CONTROLLER_MODE = "only for controllerMode"  # the broker's refusal, as RocketMQ words it


class ControllerAdmin:
    """Requests to a controller (by address) and to the brokers of controller mode."""

    def __init__(self, remote: Remote) -> None:
        self._remote = remote

    def controller_meta_data(self, controller: str) -> dict[str, Any]:
        return dict(self._ask(controller, RequestCode.CONTROLLER_GET_METADATA_INFO).ext_fields)

    def elect_master(
        self, controller: str, cluster: str, broker_name: str, broker_id: int
    ) -> dict[str, Any]:
        leader = self.controller_meta_data(controller).get("controllerLeaderAddress") or controller
        fields = {"clusterName": cluster, "brokerName": broker_name, "brokerId": broker_id,
                  "designateElect": True, "invokeTime": _now_ms()}  # fmt: skip
        response = self._ask(leader, RequestCode.CONTROLLER_ELECT_MASTER, fields)
        return {**response.ext_fields, "brokerMemberGroup": response.json_body()}

    def clean_broker_metadata(
        self,
        controller: str,
        broker_name: str,
        broker_ids: str | None = None,
        cluster: str | None = None,
        clean_living_broker: bool = False,
    ) -> None:
        fields = {"clusterName": cluster, "brokerName": broker_name,
                  "brokerControllerIdsToClean": broker_ids,
                  "isCleanLivingBroker": clean_living_broker, "invokeTime": _now_ms()}  # fmt: skip
        self._ask(controller, RequestCode.CLEAN_BROKER_DATA,
                  {k: v for k, v in fields.items() if v is not None})  # fmt: skip

    def broker_epoch(
        self, broker_name: str | None = None, cluster: str | None = None
    ) -> list[dict[str, Any]]:
        rows = []
        for target in self._broker_addrs(broker_name, cluster):
            try:
                body = self._remote.call(target, RequestCode.GET_BROKER_EPOCH_CACHE)[1]
            except ResponseError as exc:
                if exc.code == ResponseCode.SYSTEM_ERROR and _NOT_CONTROLLER_MODE in exc.remark:
                    raise ClientError(
                        f"broker {target[0]} ({target[1]}) is not in controller mode"
                        f" (enableControllerMode is false): it keeps no epochs"
                    ) from None
                raise
            rows.append({**body, "brokerAddr": target[1]})
        return rows

    def _ask(self, addr: str, code: int, fields: dict[str, Any] | None = None):
        try:
            return self._remote.ask(addr, code, fields)
        except ResponseError as exc:
            if exc.code != ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                raise
            raise ClientError(
                f"{addr} is not a controller: controller mode is not enabled there"
                f" (enableControllerMode is false, no controller runs), so it does not"
                f" serve {request_name(code)} ({exc.remark.strip()})"
            ) from None

    def _broker_addrs(self, broker_name: str | None, cluster: str | None) -> list[Broker]:
        """Every address (master and slaves) of ``broker_name``, or of each broker of
        ``cluster`` (default: every cluster's), as getBrokerEpoch asks them."""
        info = self._remote.cluster_info()
        table = info.get("brokerAddrTable", {})
        if broker_name is not None:
            if broker_name not in table:
                raise ClientError(f"broker {broker_name} is not registered with the namesrv")
            names = [broker_name]
        elif cluster is not None:
            names = info.get("clusterAddrTable", {}).get(cluster)
            if names is None:
                raise ClientError(f"cluster {cluster} is not registered with the namesrv")
        else:
            names = list(table)
        return [
            (name, addr)
            for name in sorted(names)
            for _, addr in sorted(table[name].get("brokerAddrs", {}).items(), key=_by_id)
        ]


def _by_id(entry: tuple[str, str]) -> int:
    return int(entry[0])


def _now_ms() -> int:
    return int(time.time() * 1000)
