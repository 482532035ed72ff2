"""The NameServer's part of ``Admin`` (mqadmin's namesrv commands): the KV config
(``updateKvConfig``, ``deleteKvConfig``), ordered topics' queue lists (``updateOrderConf``),
a cluster's topics, and a broker's write permission in the routes (``wipeWritePerm``,
``addWritePerm``): a mixin over ``Admin``'s ``namesrv_addrs`` and ``client``.

The namesrvs share nothing, each keeps its own KV table and routes, so changes go to every
namesrv, as RocketMQ's admin sends them; every namesrv is asked even when one fails, and
the failure then names which took the change. Reads ask the first namesrv that answers.
"""

from __future__ import annotations

from typing import Any

from shmq.client.route import parse_order_topic_conf
from shmq.errors import ClientError, RemotingConnectError, RemotingError, ResponseError
from shmq.java_properties import escape, parse_properties
from shmq.names import NAMESPACE_ORDER_TOPIC_CONFIG
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import (
    RemotingCommand,
    RequestCode,
    ResponseCode,
    check_response,
    request_name,
)


class NamesrvAdmin:
    """KV config, order confs, topics by cluster and write perms, on the namesrvs."""

    namesrv_addrs: list[str]
    client: RemotingClient

    # -- requests -------------------------------------------------------------------------------

    def _ask(
        self, addr: str, code: int, ext_fields: dict[str, Any], body: bytes = b""
    ) -> RemotingCommand:
        """``addr``'s SUCCESS response (``ResponseError`` for any other code)."""
        request = RemotingCommand.request(code, ext_fields, body)
        return check_response(self.client.invoke(addr, request))

    def _first_namesrv(self, code: int, ext_fields: dict[str, Any]) -> RemotingCommand:
        """The first namesrv's answer, with its header (the next one is asked when one
        cannot be reached)."""
        last: Exception | None = None
        for addr in self.namesrv_addrs:
            try:
                return self._ask(addr, code, ext_fields)
            except ResponseError:
                raise
            except RemotingError as exc:
                last = exc
        raise RemotingConnectError(f"no namesrv of {';'.join(self.namesrv_addrs)} answered: {last}")

    def _each_namesrv(
        self, code: int, ext_fields: dict[str, Any], body: bytes = b""
    ) -> dict[str, RemotingCommand]:
        """Every namesrv's answer by address; when any failed, its error (the last
        failure's type), naming every failure and the namesrvs that took the request."""
        done: dict[str, RemotingCommand] = {}
        failed: dict[str, RemotingError] = {}
        for addr in self.namesrv_addrs:
            try:
                done[addr] = self._ask(addr, code, ext_fields, body)
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

    # -- KV config ------------------------------------------------------------------------------

    def update_kv_config(self, namespace: str, key: str, value: str) -> None:
        """Create or replace ``key`` of ``namespace`` on every namesrv (mqadmin
        ``updateKvConfig -s -k -v``)."""
        fields = {"namespace": namespace, "key": key, "value": value}
        self._each_namesrv(RequestCode.PUT_KV_CONFIG, fields)

    def delete_kv_config(self, namespace: str, key: str) -> None:
        """Remove ``key`` of ``namespace`` from every namesrv (mqadmin ``deleteKvConfig``);
        a key that is not there is no error."""
        self._each_namesrv(RequestCode.DELETE_KV_CONFIG, {"namespace": namespace, "key": key})

    def get_kv_config(self, namespace: str, key: str) -> str | None:
        """The value of ``key`` in ``namespace``, None when the namesrv has none."""
        fields = {"namespace": namespace, "key": key}
        try:
            response = self._first_namesrv(RequestCode.GET_KV_CONFIG, fields)
        except ResponseError as exc:
            if exc.code == ResponseCode.QUERY_NOT_FOUND:
                return None
            raise
        return response.ext_fields.get("value")

    def kv_list(self, namespace: str) -> dict[str, str]:
        """Every key and value of ``namespace`` (empty when the namesrv has none)."""
        try:
            response = self._first_namesrv(
                RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": namespace}
            )
        except ResponseError as exc:
            if exc.code == ResponseCode.QUERY_NOT_FOUND:
                return {}
            raise
        body = response.json_body()
        table = body.get("table") if isinstance(body, dict) else None
        if not isinstance(table, dict):
            raise ClientError(f"KV list of namespace {namespace}: {body!r} is no KVTable")
        return {str(k): str(v) for k, v in table.items()}

    # -- ordered topics -------------------------------------------------------------------------

    def update_order_conf(self, topic: str, conf: str) -> None:
        """Make ``topic`` ordered with ``conf``'s queues, ``"brokerA:4;brokerB:4"``
        (mqadmin ``updateOrderConf -m put``): its ``ORDER_TOPIC_CONFIG`` entry on every
        namesrv. A malformed ``conf`` is a ``ConfigError`` before any namesrv is asked.
        Namesrvs hand it out in routes only with ``orderMessageEnable``."""
        parse_order_topic_conf(conf)
        self.update_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, topic, conf)

    def delete_order_conf(self, topic: str) -> None:
        """Make ``topic`` unordered again (mqadmin ``updateOrderConf -m delete``)."""
        self.delete_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, topic)

    def order_conf(self, topic: str) -> str | None:
        """``topic``'s order conf, None when it has none (``updateOrderConf -m get``)."""
        return self.get_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, topic)

    # -- routes ---------------------------------------------------------------------------------

    def topics_by_cluster(self, cluster: str) -> list[str]:
        """The topics the brokers of ``cluster`` serve, sorted (none for an unknown one)."""
        response = self._first_namesrv(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": cluster})
        return sorted((response.json_body() or {}).get("topicList", []))

    def wipe_write_perm(self, broker_name: str) -> dict[str, int]:
        """Take ``broker_name`` out of producers' routes on every namesrv (mqadmin
        ``wipeWritePerm -b``): its queues become read-only in every topic's route (the
        broker itself still takes writes). By namesrv address, the number of topics it
        changed. The broker's next registration with a new dataVersion (a topic change,
        a restart) gives the perm back; ``add_write_perm`` does it at once."""
        return self._perm_change(
            RequestCode.WIPE_WRITE_PERM_OF_BROKER, broker_name, "wipeTopicCount"
        )

    def add_write_perm(self, broker_name: str) -> dict[str, int]:
        """Make ``broker_name``'s queues read-write again in every topic's route, on every
        namesrv (mqadmin ``addWritePerm -b``); by namesrv address, the topics changed."""
        return self._perm_change(RequestCode.ADD_WRITE_PERM_OF_BROKER, broker_name, "addTopicCount")

    def _perm_change(self, code: int, broker_name: str, count_field: str) -> dict[str, int]:
        answers = self._each_namesrv(code, {"brokerName": broker_name})
        return {addr: response.ext_int(count_field) for addr, response in answers.items()}

    # -- the namesrvs' own config ---------------------------------------------------------------

    def namesrv_config(self) -> dict[str, dict[str, str]]:
        """Each namesrv's settings by address (mqadmin ``getNamesrvConfig``)."""
        answers = self._each_namesrv(RequestCode.GET_NAMESRV_CONFIG, {})
        return {addr: parse_properties(bytes(r.body).decode()) for addr, r in answers.items()}

    def update_namesrv_config(self, key: str, value: str) -> None:
        """Set ``key`` on every namesrv (mqadmin ``updateNamesrvConfig -k -v``): only
        ``orderMessageEnable`` changes at run time, on the running namesrvs; anything else
        is refused by name (``namesrv.namesrv_config``)."""
        body = f"{escape(key)}={escape(value)}\n".encode()
        self._each_namesrv(RequestCode.UPDATE_NAMESRV_CONFIG, {}, body)
