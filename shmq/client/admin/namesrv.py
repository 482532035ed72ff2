"""What mqadmin's namesrv commands change and read on the NameServers: the KV config
(``updateKvConfig``, ``deleteKvConfig``), ordered topics' queue lists (``updateOrderConf``),
a cluster's topics, a broker's write permission in the routes (``wipeWritePerm``,
``addWritePerm``) and the namesrvs' own settings. Changes go to every namesrv, reads to the
first that answers (``Remote``). ``Admin`` documents each call."""

from __future__ import annotations

from shmq.client.admin.remote import Remote
from shmq.client.route import parse_order_topic_conf
from shmq.errors import ClientError, ResponseError
from shmq.java_properties import escape, parse_properties
from shmq.names import NAMESPACE_ORDER_TOPIC_CONFIG
from shmq.remoting.protocol import RequestCode, ResponseCode


class NamesrvAdmin:
    """KV config, order confs, topics by cluster, write perms and namesrv settings."""

    def __init__(self, remote: Remote) -> None:
        self._remote = remote

    # -- KV config ------------------------------------------------------------------------------

    def update_kv_config(self, namespace: str, key: str, value: str) -> None:
        fields = {"namespace": namespace, "key": key, "value": value}
        self._remote.each_namesrv(RequestCode.PUT_KV_CONFIG, fields)

    def delete_kv_config(self, namespace: str, key: str) -> None:
        fields = {"namespace": namespace, "key": key}
        self._remote.each_namesrv(RequestCode.DELETE_KV_CONFIG, fields)

    def get_kv_config(self, namespace: str, key: str) -> str | None:
        fields = {"namespace": namespace, "key": key}
        try:
            response = self._remote.first_namesrv(RequestCode.GET_KV_CONFIG, fields)
        except ResponseError as exc:
            if exc.code == ResponseCode.QUERY_NOT_FOUND:
                return None
            raise
        return response.ext_fields.get("value")

    def kv_list(self, namespace: str) -> dict[str, str]:
        fields = {"namespace": namespace}
        try:
            response = self._remote.first_namesrv(RequestCode.GET_KVLIST_BY_NAMESPACE, fields)
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
        parse_order_topic_conf(conf)
        self.update_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, topic, conf)

    def delete_order_conf(self, topic: str) -> None:
        self.delete_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, topic)

    def order_conf(self, topic: str) -> str | None:
        return self.get_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, topic)

    # -- routes ---------------------------------------------------------------------------------

    def topics_by_cluster(self, cluster: str) -> list[str]:
        fields = {"cluster": cluster}
        response = self._remote.first_namesrv(RequestCode.GET_TOPICS_BY_CLUSTER, fields)
        return sorted((response.json_body() or {}).get("topicList", []))

    def wipe_write_perm(self, broker_name: str) -> dict[str, int]:
        return self._perm_change(
            RequestCode.WIPE_WRITE_PERM_OF_BROKER, broker_name, "wipeTopicCount"
        )

    def add_write_perm(self, broker_name: str) -> dict[str, int]:
        return self._perm_change(RequestCode.ADD_WRITE_PERM_OF_BROKER, broker_name, "addTopicCount")

    def _perm_change(self, code: int, broker_name: str, count_field: str) -> dict[str, int]:
        answers = self._remote.each_namesrv(code, {"brokerName": broker_name})
        return {addr: response.ext_int(count_field) for addr, response in answers.items()}

    # -- the namesrvs' own config ---------------------------------------------------------------

    def namesrv_config(self) -> dict[str, dict[str, str]]:
        answers = self._remote.each_namesrv(RequestCode.GET_NAMESRV_CONFIG)
        return {addr: parse_properties(bytes(r.body).decode()) for addr, r in answers.items()}

    def update_namesrv_config(self, key: str, value: str) -> None:
        body = f"{escape(key)}={escape(value)}\n".encode()
        self._remote.each_namesrv(RequestCode.UPDATE_NAMESRV_CONFIG, {}, body)
