"""The namesrvs and master brokers an ``Admin`` talks to, and how its requests reach them.

Every part of ``Admin`` gets this one object: where a request goes (the namesrvs, a
cluster's masters, a topic's, one broker by name or address, the broker storing a message)
and how it is sent (a failure names the broker or the namesrvs) are written once here, not
in each part.

The namesrvs share nothing, each keeps its own KV table and routes, so changes go to every
namesrv, as RocketMQ's admin sends them; every namesrv is asked even when one fails, and
the failure then names which took the change. Reads ask the first namesrv that answers.
"""

from __future__ import annotations

from typing import Any

from shmq.client.route import split_addrs
from shmq.errors import (
    ClientError,
    NoRouteError,
    RemotingConnectError,
    RemotingError,
    ResponseError,
)
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import (
    RemotingCommand,
    RequestCode,
    ResponseCode,
    check_response,
    request_name,
)
from shmq.remoting.security.credentials import Credentials
from shmq.remoting.security.tls import TlsOptions

MASTER_ID = "0"

Broker = tuple[str, str]  # (broker name, address)


class Remote:
    """Requests to the namesrv(s) ``namesrv`` (``;``-separated) and to the brokers they
    know, over one ``RemotingClient`` (``timeout`` per request; ``credentials`` sign them,
    ``tls`` wraps its connections)."""

    def __init__(
        self,
        namesrv: str,
        timeout: float = 5.0,
        *,
        credentials: Credentials | tuple[str, str] | None = None,
        tls: bool | TlsOptions | None = None,
    ) -> None:
        self.namesrv_addrs = split_addrs(namesrv)
        self._client = RemotingClient(connect_timeout=min(3.0, timeout), default_timeout=timeout,
                                      credentials=credentials, tls=tls)  # fmt: skip
        self._store_hosts: dict[str, str] = {}  # broker address → its storeHost

    def close(self) -> None:
        self._client.close()

    @property
    def credentials(self) -> Credentials | None:
        """What signs the requests: the clients an admin call opens (a producer) use it."""
        return self._client.credentials

    @property
    def tls(self) -> TlsOptions | None:
        return self._client.tls

    # -- namesrvs -------------------------------------------------------------------------------

    def ask(
        self, addr: str, code: int, ext_fields: dict[str, Any] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        """``addr``'s SUCCESS response (``ResponseError`` for any other code)."""
        request = RemotingCommand.request(code, ext_fields, body)
        return check_response(self._client.invoke(addr, request))

    def first_namesrv(self, code: int, ext_fields: dict[str, Any] | None = None) -> RemotingCommand:
        """The first namesrv's answer, with its header (the next one is asked when one
        cannot be reached)."""
        last: Exception | None = None
        for addr in self.namesrv_addrs:
            try:
                return self.ask(addr, code, ext_fields)
            except ResponseError:
                raise
            except RemotingError as exc:
                last = exc
        raise RemotingConnectError(f"no namesrv of {self.namesrvs} answered: {last}")

    def each_namesrv(
        self, code: int, ext_fields: dict[str, Any] | None = None, body: bytes = b""
    ) -> dict[str, RemotingCommand]:
        """Every namesrv's answer by address; when any failed, its error (the last
        failure's type), naming every failure and the namesrvs that took the request."""
        done: dict[str, RemotingCommand] = {}
        failed: dict[str, RemotingError] = {}
        for addr in self.namesrv_addrs:
            try:
                done[addr] = self.ask(addr, code, ext_fields, body)
            except RemotingError as exc:
                failed[addr] = exc
        if not failed:
            return done
        why = "; ".join(f"namesrv {addr}: {exc}" for addr, exc in failed.items())
        message = f"{request_name(code)} failed on {why} (taken by: {', '.join(done) or 'none'})"
        last = list(failed.values())[-1]
        if isinstance(last, ResponseError):
            raise ResponseError(last.code, message) from last
        raise type(last)(message) from last

    @property
    def namesrvs(self) -> str:
        """The namesrv addresses as given (``;``-separated), for messages and clients."""
        return ";".join(self.namesrv_addrs)

    # -- brokers --------------------------------------------------------------------------------

    def invoke(
        self,
        broker: Broker,
        code: int,
        ext_fields: dict[str, Any] | None = None,
        body: bytes = b"",
        timeout: float | None = None,
    ) -> RemotingCommand:
        """``broker``'s SUCCESS response; a ``ResponseError`` names the broker."""
        name, addr = broker
        request = RemotingCommand.request(code, ext_fields, body)
        try:
            return check_response(self._client.invoke(addr, request, timeout))
        except ResponseError as exc:
            if name in exc.remark:
                raise
            raise ResponseError(exc.code, f"broker {name} ({addr}): {exc.remark}") from None

    def answer(
        self, broker: Broker, request: RemotingCommand, timeout: float | None = None
    ) -> RemotingCommand:
        """``broker``'s response to a ready-made ``request``, whatever its code: for
        requests whose other answers are results too (a pull's PULL_NOT_FOUND)."""
        return self._client.invoke(broker[1], request, timeout)

    def call(
        self,
        broker: Broker,
        code: int,
        ext_fields: dict[str, Any] | None = None,
        body: Any = None,
        timeout: float | None = None,
    ) -> tuple[RemotingCommand, Any]:
        """``invoke`` with ``body`` sent as JSON: (response, its JSON body or None)."""
        raw = b"" if body is None else RemotingCommand.body_json(body)
        response = self.invoke(broker, code, ext_fields, raw, timeout)
        return response, response.json_body()

    def cluster_info(self) -> dict[str, Any]:
        """The namesrv's ``ClusterInfo``: ``{"brokerAddrTable": {name: {"cluster",
        "brokerName", "brokerAddrs": {id: addr}}}, "clusterAddrTable": {cluster: [names]}}``."""
        return self.first_namesrv(RequestCode.GET_BROKER_CLUSTER_INFO).json_body() or {}

    def masters(self, cluster: str | None = None) -> list[Broker]:
        """``(broker name, master address)`` of ``cluster``'s brokers (every cluster's when
        None), sorted by name."""
        info = self.cluster_info()
        clusters = info.get("clusterAddrTable", {})
        if cluster is not None and cluster not in clusters:
            known = ", ".join(sorted(clusters)) or "none"
            raise ClientError(
                f"cluster {cluster} is not registered with namesrv {self.namesrvs}"
                f" (clusters: {known})"
            )
        names = clusters[cluster] if cluster is not None else info.get("brokerAddrTable", {})
        out = []
        for name in sorted(names):
            addr = info.get("brokerAddrTable", {}).get(name, {}).get("brokerAddrs", {})
            if MASTER_ID in addr:
                out.append((name, addr[MASTER_ID]))
        return out

    def broker(self, broker: str) -> Broker:
        """``(name, address)`` of a broker given by name or by ``host:port``."""
        info = self.cluster_info().get("brokerAddrTable", {})
        for name, data in info.items():
            addrs = data.get("brokerAddrs", {})
            if broker == name and MASTER_ID in addrs:
                return name, addrs[MASTER_ID]
            if broker in addrs.values():
                return name, broker
        if ":" in broker:
            return broker, broker  # not registered, but an address: ask it directly
        raise ClientError(f"broker {broker} is not registered with namesrv {self.namesrvs}")

    def targets(self, broker: str | None, cluster: str | None) -> list[Broker]:
        """Just ``broker`` when given, else the masters of ``cluster``, or of the only
        cluster the namesrv knows (several are an error: the caller must choose)."""
        if broker is not None:
            return [self.broker(broker)]
        if cluster is None:
            clusters = sorted(self.cluster_info().get("clusterAddrTable", {}))
            if len(clusters) > 1:
                raise ClientError(
                    f"namesrv {self.namesrvs} knows several clusters"
                    f" ({', '.join(clusters)}): give a cluster or a broker"
                )
        masters = self.masters(cluster)
        if not masters:
            raise ClientError(
                f"no broker is registered with namesrv {self.namesrvs}"
                + (f" in cluster {cluster}" if cluster else "")
            )
        return masters

    def topic_route(self, topic: str) -> dict[str, Any]:
        """The namesrv's ``TopicRouteData``: ``queueDatas`` (per broker: queue counts,
        perm) and ``brokerDatas`` (per broker: cluster and addresses by id)."""
        fields = {"topic": topic}
        try:
            return self.first_namesrv(RequestCode.GET_ROUTEINFO_BY_TOPIC, fields).json_body()
        except ResponseError as exc:
            if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                raise NoRouteError(
                    f"No route info of this topic: {topic} (namesrv {self.namesrvs})"
                ) from None
            raise

    def topic_brokers(self, topic: str) -> list[Broker]:
        """``(name, master address)`` of the brokers serving ``topic``."""
        route = self.topic_route(topic)
        masters = {
            b["brokerName"]: b["brokerAddrs"][MASTER_ID]
            for b in route.get("brokerDatas", [])
            if MASTER_ID in b.get("brokerAddrs", {})
        }
        out = [
            (q["brokerName"], masters[q["brokerName"]])
            for q in route.get("queueDatas", [])
            if q["brokerName"] in masters
        ]
        if not out:
            raise NoRouteError(f"No route info of this topic: {topic} (no master serves it)")
        return sorted(out)

    def by_store_host(self, store_host: str) -> Broker | None:
        """The master whose messages carry ``store_host`` (the host of an offset message
        id): its address, or the storeHost it reports (asked once per broker)."""
        masters = self.masters()
        for name, addr in masters:
            if addr == store_host:
                return name, addr
        for name, addr in masters:
            if addr not in self._store_hosts:
                try:
                    info = self.call((name, addr), RequestCode.GET_STORE_INFO)[1]
                except RemotingError:
                    continue
                self._store_hosts[addr] = info.get("storeHost", "")
            if self._store_hosts[addr] == store_host:
                return name, addr
        return None
