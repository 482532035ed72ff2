"""The NameServer process: route requests over RocketMQ's protocol, plus the expiry scan.

Brokers register (REGISTER_BROKER) every 30 s; clients ask for topic routes and cluster
info. With ``enable_controller`` (RocketMQ 5's ``enableControllerInNamesrv``) the NameServer
also runs the controller (``namesrv.controller``): registrations of brokers in controller
mode carry their role, epoch and max offset and are answered with the role the controller
decides; the scan thread also elects a new master when a master's heartbeats stop.

A daemon thread runs ``scan_not_active_brokers`` first after 5 s (or the scan interval,
if smaller) and then every scan interval, as RocketMQ 4.9's NamesrvController does; a
closed registration connection removes its brokers at once. Its server keeps the remoting
server's bounds with their defaults: among them, at most 256 MiB of request frames in flight
over all connections (``remoting.frame_budget``), the most a burst of REGISTER_BROKER bodies
of many topics needs.

Admin requests (mqadmin's namesrv commands), answered as RocketMQ's DefaultRequestProcessor
does: the KV config (``namesrv.kv_config``: PUT/GET/DELETE_KV_CONFIG,
GET_KVLIST_BY_NAMESPACE, QUERY_NOT_FOUND with RocketMQ's remarks for what is missing),
GET_TOPICS_BY_CLUSTER, the unit-topic lists (by ``topicSysFlag``), QUERY_DATA_VERSION (a
RocketMQ broker that does not force its registration asks it first), and
WIPE/ADD_WRITE_PERM_OF_BROKER (``routes``). With
``order_message_enable`` (RocketMQ's ``orderMessageEnable``, off by default there too) a
route carries the topic's ``ORDER_TOPIC_CONFIG`` entry as its ``orderTopicConf``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from shmq.errors import ConfigError, EpochNotReadyError, ResponseError
from shmq.names import NAMESPACE_ORDER_TOPIC_CONFIG
from shmq.namesrv import metrics, namesrv_config
from shmq.namesrv.controller import (
    HEARTBEAT_TIMEOUT_MS,
    MASTER_ROLES,
    NO_TRUNCATE,
    Controller,
    RoleDecision,
)
from shmq.namesrv.kv_config import KVConfigManager
from shmq.namesrv.routes import BROKER_EXPIRE_MS, FLAG_UNIT, FLAG_UNIT_SUB, RouteInfoManager
from shmq.remoting import fastjson
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode
from shmq.remoting.rpc_latency import RpcLatency
from shmq.remoting.security.tls_server import TlsServerConfig
from shmq.remoting.server import Connection, RemotingServer

log = logging.getLogger(__name__)

DEFAULT_PORT = 9876
SCAN_INTERVAL_MS = 10_000  # RocketMQ 4.9's scanNotActiveBroker period
# getControllerMetaData's answer: the namesrv's controller is one node, its own leader
CONTROLLER_GROUP, CONTROLLER_ID = "DefaultControllerGroup", "n0"
FIRST_SCAN_DELAY_MS = 5_000


def _register_body(request: RemotingCommand) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(topicConfigTable, dataVersion) from a RegisterBrokerBody; empty body → no topics."""
    body = request.json_body()
    if body is None:
        return {}, None
    wrapper = body.get("topicConfigSerializeWrapper") if isinstance(body, dict) else None
    if not isinstance(wrapper, dict):
        raise ResponseError(
            ResponseCode.SYSTEM_ERROR, "register body has no topicConfigSerializeWrapper object"
        )
    table = wrapper.get("topicConfigTable") or {}
    data_version = wrapper.get("dataVersion")
    if data_version is not None and not isinstance(data_version, dict):
        raise ResponseError(
            ResponseCode.SYSTEM_ERROR, f"register body dataVersion is {data_version!r}"
        )
    return table, data_version


class NameServer:
    """Route registry served on ``host:port``; ``routes`` is its ``RouteInfoManager``,
    ``kv_config`` its ``KVConfigManager`` (kept in ``kv_config_path``, RocketMQ's
    ``kvConfigPath``; None: in memory only). A ``kv_config_path`` whose file does not
    parse raises ``ConfigError`` naming it. ``tls``: the port's ``tls.server.*`` settings
    (RocketMQ's defaults: permissive, test mode). ``metrics_port``: serve Prometheus metrics
    there (``namesrv.metrics``; 0: any free port, None: off) on ``metrics_host`` (default
    ``host``)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        *,
        scan_interval_ms: int = SCAN_INTERVAL_MS,
        broker_expire_ms: int = BROKER_EXPIRE_MS,
        enable_controller: bool = False,
        controller_heartbeat_timeout_ms: int = HEARTBEAT_TIMEOUT_MS,
        controller_store_path: str | None = None,
        kv_config_path: str | None = None,
        order_message_enable: bool = False,
        tls: TlsServerConfig | None = None,
        metrics_port: int | None = None,
        metrics_host: str = "",
    ) -> None:
        if scan_interval_ms <= 0 or broker_expire_ms <= 0:
            raise ValueError(
                f"scan_interval_ms ({scan_interval_ms}) and broker_expire_ms"
                f" ({broker_expire_ms}) must be > 0"
            )
        self.scan_interval_ms = scan_interval_ms
        self.broker_expire_ms = broker_expire_ms
        self.routes = RouteInfoManager()
        self.kv_config = KVConfigManager(kv_config_path)
        self.order_message_enable = order_message_enable
        self.controller = (
            Controller(controller_heartbeat_timeout_ms, store_path=controller_store_path)
            if enable_controller
            else None
        )
        self._server = RemotingServer(host, port, name="namesrv", tls=tls or TlsServerConfig())
        # the Prometheus endpoint (``namesrv.metrics``), off unless given a port (0: any)
        self._metrics_at = None if metrics_port is None else (metrics_host or host, metrics_port)
        self._metrics = None
        self._latency = RpcLatency()
        if metrics_port is not None:
            self._server.observe = self._latency.answered
        self._stop = threading.Event()
        self._scan_thread: threading.Thread | None = None
        handlers = {
            RequestCode.REGISTER_BROKER: self._register_broker,
            RequestCode.UNREGISTER_BROKER: self._unregister_broker,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self._get_route,
            RequestCode.GET_BROKER_CLUSTER_INFO: self._cluster_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self._topic_list,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self._delete_topic,
            RequestCode.PUT_KV_CONFIG: self._put_kv_config,
            RequestCode.GET_KV_CONFIG: self._get_kv_config,
            RequestCode.DELETE_KV_CONFIG: self._delete_kv_config,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self._kv_list,
            RequestCode.GET_TOPICS_BY_CLUSTER: self._topics_by_cluster,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: self._system_topics,
            RequestCode.GET_UNIT_TOPIC_LIST: self._unit_topics,
            RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: self._has_unit_sub_topics,
            RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: self._has_unit_sub_ununit_topics,
            RequestCode.QUERY_DATA_VERSION: self._query_data_version,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self._wipe_write_perm,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self._add_write_perm,
            RequestCode.GET_NAMESRV_CONFIG: self._get_config,
            RequestCode.UPDATE_NAMESRV_CONFIG: self._update_config,
        }
        if self.controller is not None:
            handlers[RequestCode.CONTROLLER_REGISTER_BROKER] = self._controller_register
            handlers[RequestCode.CONTROLLER_GET_SYNC_STATE_DATA] = self._sync_state
            handlers[RequestCode.CONTROLLER_GET_METADATA_INFO] = self._controller_metadata
            handlers[RequestCode.CONTROLLER_ELECT_MASTER] = self._elect_master
            handlers[RequestCode.CLEAN_BROKER_DATA] = self._clean_broker_data
        for code, handler in handlers.items():
            self._server.register(code, handler)
        self._server.on_disconnect(lambda conn: self.routes.on_connection_closed(conn.id))

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def address(self) -> str:
        return self._server.address

    @property
    def metrics_address(self) -> str:
        """``host:port`` of the metrics endpoint ("" when it is off)."""
        if self._metrics is None:
            return ""
        host, port = self._metrics.server_address[:2]
        return f"{host}:{port}"

    def start(self) -> None:
        """Listen (``RemotingError`` if the port cannot be bound; ``ConfigError`` if the
        metrics port cannot) and start the scan thread."""
        self._server.start()
        if self._metrics_at is not None:
            host, port = self._metrics_at
            try:
                self._metrics = metrics.serve(self, self._latency, host, port)
            except OSError as exc:
                self._server.stop()
                raise ConfigError(
                    f"cannot listen on {host}:{port} for the namesrv's metrics: {exc}"
                ) from None
        self._scan_thread = threading.Thread(
            target=self._scan_loop, name="namesrv-scan", daemon=True
        )
        self._scan_thread.start()

    def stop(self) -> None:
        """Stop serving and scanning; idempotent."""
        self._stop.set()
        self._server.stop()
        if self._metrics is not None:
            self._metrics.shutdown()
            self._metrics.server_close()
            self._metrics = None
        if self._scan_thread is not None:
            self._scan_thread.join(1.0)

    def _scan_loop(self) -> None:
        delay_ms = min(FIRST_SCAN_DELAY_MS, self.scan_interval_ms)
        while not self._stop.wait(delay_ms / 1000):
            try:
                self.routes.scan_not_active_brokers(expire_ms=self.broker_expire_ms)
                if self.controller is not None:
                    self.controller.scan()
            except Exception:
                log.exception("namesrv: broker expiry scan failed")
            delay_ms = self.scan_interval_ms

    def _register_broker(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        broker_name = request.ext("brokerName")
        broker_addr = request.ext("brokerAddr")
        cluster = request.ext("clusterName")
        broker_id = request.ext_int("brokerId")
        ha_server_addr = request.ext("haServerAddr")
        table, data_version = _register_body(request)
        decision = None
        if request.ext_fields.get("epoch") is not None:  # a broker in controller mode
            decision = self._decide(request)
            if decision.role == "SLAVE" and broker_id == 0:
                # a master the controller replaced: no route for it; it stops on this answer
                return RemotingCommand.response_to(request, ext_fields=decision.to_ext())
        result = self.routes.register_broker(
            cluster,
            broker_addr,
            broker_name,
            broker_id,
            ha_server_addr,
            table,
            data_version,
            connection_id=conn.id,
        )
        if decision is not None:
            result = {**result, **decision.to_ext()}
        return RemotingCommand.response_to(request, ext_fields=result)

    def _decide(self, request: RemotingCommand, starting: bool = False) -> RoleDecision:
        """The controller's answer to a controller-mode broker's report; a bad report or a
        controller that is off answers SYSTEM_ERROR naming why."""
        if self.controller is None:
            raise ResponseError(
                ResponseCode.SYSTEM_ERROR,
                "a broker in controller mode registered, but this namesrv runs no controller"
                " (enableControllerInNamesrv=false)",
            )
        role = request.ext("brokerRole")
        try:
            return self.controller.heartbeat(
                request.ext("brokerName"),
                request.ext("brokerAddr"),
                role=role,
                broker_id=request.ext_int("brokerId"),
                epoch=request.ext_int("epoch"),
                max_offset=request.ext_int("maxOffset"),
                epoch_start=(
                    request.ext_int("epochStartOffset")
                    if role in MASTER_ROLES and "epochStartOffset" in request.ext_fields
                    else NO_TRUNCATE
                ),
                sync_state_set=(
                    tuple(a for a in request.ext("syncStateSet").split(",") if a)
                    if role in MASTER_ROLES and "syncStateSet" in request.ext_fields
                    else None
                ),
                ha_client_addr=request.ext_fields.get("haClientAddr", "")
                if role == "SLAVE"
                else "",
                starting=starting,
            )
        except (ValueError, EpochNotReadyError) as exc:
            raise ResponseError(ResponseCode.SYSTEM_ERROR, str(exc)) from None

    def _controller_register(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        """A broker in controller mode asks its role before it serves (CONTROLLER_REGISTER_
        BROKER): only the controller learns of it, the routes do not."""
        return RemotingCommand.response_to(request, ext_fields=self._decide(request, True).to_ext())

    def _sync_state(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        body = RemotingCommand.body_json(self.controller.sync_state())
        return RemotingCommand.response_to(request, body=body)

    def _controller_metadata(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        """mqadmin getControllerMetaData: this namesrv's controller is the only one, its own
        leader (RocketMQ 5's controller in the namesrv without DLedger peers)."""
        fields = {"group": CONTROLLER_GROUP, "controllerLeaderId": CONTROLLER_ID,
                  "controllerLeaderAddress": self.address, "isLeader": "true",
                  "peers": f"{CONTROLLER_ID}-{self.address}"}  # fmt: skip
        return RemotingCommand.response_to(request, ext_fields=fields)

    def _elect_master(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        """mqadmin electMaster (``Controller.elect``); the answer names the master, its
        epoch and the group's members as RocketMQ's ``ElectMasterResponseHeader`` and
        ``BrokerMemberGroup`` do. A refused election is CONTROLLER_ELECT_MASTER_FAILED."""
        name = request.ext("brokerName")
        designated = request.ext_fields.get("designateElect", "true").lower() == "true"
        try:
            broker_id = request.ext_int("brokerId") if designated else None
            master, epoch = self.controller.elect(name, broker_id)
        except ValueError as exc:
            raise ResponseError(ResponseCode.CONTROLLER_ELECT_MASTER_FAILED, str(exc)) from None
        members = self.controller.sync_state().get(name, {}).get("replicas", {})
        addrs = {str(0 if a == master else r["broker_id"]): a for a, r in members.items()}
        body = {"cluster": request.ext_fields.get("clusterName", ""), "brokerName": name,
                "brokerAddrs": addrs}  # fmt: skip
        fields = {"masterBrokerId": "0", "masterAddress": master, "masterEpoch": str(epoch),
                  "syncStateSetEpoch": str(epoch)}  # fmt: skip
        return RemotingCommand.response_to(
            request, ext_fields=fields, body=RemotingCommand.body_json(body)
        )

    def _clean_broker_data(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        """mqadmin cleanBrokerMetadata (``Controller.clean``): ids as ``1;2;3`` (none: the
        whole group); a refusal is CONTROLLER_INVALID_CLEAN_BROKER_METADATA naming why."""
        ids = request.ext_fields.get("brokerControllerIdsToClean") or ""
        living = request.ext_fields.get("isCleanLivingBroker", "false").lower() == "true"
        try:
            wanted = {int(i) for i in ids.replace(",", ";").split(";") if i.strip()} or None
            self.controller.clean(request.ext("brokerName"), wanted, living)
        except ValueError as exc:
            raise ResponseError(
                ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, str(exc)
            ) from None
        return RemotingCommand.response_to(request)

    def _query_data_version(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        """A broker asks whether its topic configs must be registered again (RocketMQ's
        ``needRegister``, when it does not force registration): the response header's
        ``changed``, and the body the data version this namesrv holds for it."""
        broker_addr = request.ext("brokerAddr")
        data_version = request.json_body()
        if data_version is not None and not isinstance(data_version, dict):
            raise ResponseError(
                ResponseCode.SYSTEM_ERROR,
                f"the body is a JSON {type(data_version).__name__}, not a DataVersion",
            )
        changed, held = self.routes.query_data_version(broker_addr, data_version)
        body = RemotingCommand.body_json(held) if held is not None else b""
        return RemotingCommand.response_to(
            request, ext_fields={"changed": "true" if changed else "false"}, body=body
        )

    def _unregister_broker(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        self.routes.unregister_broker(
            request.ext("clusterName"),
            request.ext("brokerAddr"),
            request.ext("brokerName"),
            request.ext_int("brokerId"),
        )
        return RemotingCommand.response_to(request)

    def _get_route(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        topic = request.ext_topic()
        route = self.routes.pick_topic_route(topic)
        if route is None:
            return RemotingCommand.response_to(
                request,
                ResponseCode.TOPIC_NOT_EXIST,
                f"No topic route info in name server for the topic: {topic}",
            )
        if self.order_message_enable:
            route["orderTopicConf"] = self.kv_config.get(NAMESPACE_ORDER_TOPIC_CONFIG, topic)
        return RemotingCommand.response_to(request, body=RemotingCommand.body_json(route))

    def _cluster_info(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        """RocketMQ's ``ClusterInfo``, written as fastjson does: a ``BrokerData``'s broker
        ids (``Long`` keys) bare, ``{0:"host:port"}``."""
        info = self.routes.cluster_info()
        for data in info["brokerAddrTable"].values():
            data["brokerAddrs"] = {int(k): v for k, v in data["brokerAddrs"].items()}
        body = fastjson.dumps(info).encode()
        return RemotingCommand.response_to(request, body=body)

    def _topic_list(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        body = RemotingCommand.body_json({"topicList": self.routes.all_topics()})
        return RemotingCommand.response_to(request, body=body)

    def _delete_topic(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        self.routes.delete_topic(request.ext_topic())
        return RemotingCommand.response_to(request)

    # -- KV config ------------------------------------------------------------------------------

    def _put_kv_config(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        namespace, key, value = request.ext("namespace"), request.ext("key"), request.ext("value")
        self._write_kv(lambda: self.kv_config.put(namespace, key, value))
        return RemotingCommand.response_to(request)

    def _delete_kv_config(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        namespace, key = request.ext("namespace"), request.ext("key")
        self._write_kv(lambda: self.kv_config.delete(namespace, key))
        return RemotingCommand.response_to(request)

    def _write_kv(self, change: Callable[[], None]) -> None:
        """Make a KV change; a file that cannot be written fails the request naming it."""
        try:
            change()
        except ConfigError as exc:
            raise ResponseError(ResponseCode.SYSTEM_ERROR, str(exc)) from None
        except OSError as exc:
            raise ResponseError(
                ResponseCode.SYSTEM_ERROR,
                f"KV config not changed: cannot write {self.kv_config.path}: {exc}",
            ) from None

    def _get_kv_config(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        namespace, key = request.ext("namespace"), request.ext("key")
        value = self.kv_config.get(namespace, key)
        if value is None:
            return RemotingCommand.response_to(
                request,
                ResponseCode.QUERY_NOT_FOUND,
                f"No config item, Namespace: {namespace} Key: {key}",
            )
        return RemotingCommand.response_to(request, ext_fields={"value": value})

    def _kv_list(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        """RocketMQ's ``KVTable`` body, ``{"table": {key: value}}``."""
        namespace = request.ext("namespace")
        table = self.kv_config.namespace(namespace)
        if table is None:
            return RemotingCommand.response_to(
                request, ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace}"
            )
        body = RemotingCommand.body_json({"table": table})
        return RemotingCommand.response_to(request, body=body)

    # -- topics and perms -----------------------------------------------------------------------

    def _topics_by_cluster(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        topics = self.routes.topics_by_cluster(request.ext("cluster"))
        body = RemotingCommand.body_json({"topicList": topics})
        return RemotingCommand.response_to(request, body=body)

    def _unit_topics(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        return self._topics_flagged(request, lambda flag: bool(flag & FLAG_UNIT))

    def _has_unit_sub_topics(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        return self._topics_flagged(request, lambda flag: bool(flag & FLAG_UNIT_SUB))

    def _has_unit_sub_ununit_topics(
        self, request: RemotingCommand, conn: Connection
    ) -> RemotingCommand:
        return self._topics_flagged(
            request, lambda flag: bool(flag & FLAG_UNIT_SUB) and not flag & FLAG_UNIT
        )

    def _topics_flagged(
        self, request: RemotingCommand, wanted: Callable[[int], bool]
    ) -> RemotingCommand:
        """RocketMQ's ``TopicList`` of the topics whose ``topicSysFlag`` ``wanted`` takes."""
        body = RemotingCommand.body_json({"topicList": self.routes.topics_by_sys_flag(wanted)})
        return RemotingCommand.response_to(request, body=body)

    def _system_topics(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        return RemotingCommand.response_to(
            request, body=RemotingCommand.body_json(self.routes.system_topics())
        )

    def _wipe_write_perm(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        count = self.routes.wipe_write_perm(request.ext("brokerName"))
        return RemotingCommand.response_to(request, ext_fields={"wipeTopicCount": count})

    def _add_write_perm(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        count = self.routes.add_write_perm(request.ext("brokerName"))
        return RemotingCommand.response_to(request, ext_fields={"addTopicCount": count})

    # -- its own config -------------------------------------------------------------------------

    def _get_config(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        body = namesrv_config.config_text(self).encode()
        return RemotingCommand.response_to(request, body=body)

    def _update_config(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        """mqadmin updateNamesrvConfig (``namesrv_config``: what may change, and how)."""
        try:
            text = bytes(request.body).decode("utf-8")
            black_listed = namesrv_config.update(self, text)
        except (UnicodeDecodeError, ConfigError) as exc:
            raise ResponseError(ResponseCode.SYSTEM_ERROR, str(exc)) from None
        if black_listed:
            raise ResponseError(ResponseCode.NO_PERMISSION, f"{namesrv_config.BLACK_LIST_REMARK}"
                                f" ({', '.join(black_listed)})")  # fmt: skip
        if text.strip():
            log.info("namesrv config updated: %s", text.strip().replace("\n", ", "))
        return RemotingCommand.response_to(request)
