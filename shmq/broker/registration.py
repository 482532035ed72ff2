"""The broker's registration with the namesrvs: the REGISTER_BROKER heartbeat with its topics
and, in controller mode, its report to the controller; the answer's role decision (a
promotion, a stop to rejoin, a SYNC_MASTER's sync state set, ``sync_state``); a slave
learning its master; UNREGISTER_BROKER at stop.

The supervisor owns it and hands it what it reads (the live config, the topics, the
counters, its advertised address, the control client) and what acting on a decision
takes: ``promote`` (the supervisor restarts its agents as a master's) and ``halt`` (the
broker stops itself, naming why). Processors ask for a registration through it: at once
on the caller's thread (``register_all``, a new topic) or by the register loop
(``register_now``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import numpy as np

from shmq.broker.ha import controller_mode as cm
from shmq.broker.ha.slave_sync import SlaveSynchronize
from shmq.broker.ha.sync_state import SyncState
from shmq.broker.live_config import LiveConfig
from shmq.broker.topic.config import PERM_READ_WRITE, TopicConfigManager
from shmq.config import parse_host
from shmq.errors import ShmqError
from shmq.ipc import counters as cn
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RemotingCommand, RequestCode

log = logging.getLogger(__name__)


class NamesrvRegistration:
    """Registers the broker with every namesrv, in a loop (``run``) and on request.

    ``epoch``: the controller epoch this broker reports (controller mode; the supervisor
    sets it at start and at a promotion, a decision may advance it); ``sync_state``: a
    SYNC_MASTER's sync state set in controller mode, else None (the supervisor sets it)."""

    def __init__(
        self,
        config: LiveConfig,
        topics: TopicConfigManager,
        counters: np.ndarray,
        address: Callable[[], str],
        client: RemotingClient,
        slave_sync: SlaveSynchronize,
        *,
        stop: threading.Event,
        promote: Callable[[cm.Decision], None],
        halt: Callable[[str], None],
    ) -> None:
        self.config = config
        self.topics = topics
        self.words = counters
        self.address = address  # the broker's advertised ``ip:port``
        self.client = client
        self.slave_sync = slave_sync
        self._stop = stop
        self._promote = promote
        self._halt = halt
        self.epoch = cm.Epoch()
        self.sync_state: SyncState | None = None
        self._report_now = threading.Event()  # register now, not a heartbeat interval later

    def run(self) -> None:
        """The register loop, until the broker's ``stop`` event is set (and
        ``register_now`` called)."""
        cfg = self.config.current
        period = (
            cfg.broker_heartbeat_interval
            if cfg.enable_controller_mode
            else cfg.register_name_server_period
        )
        while not self._stop.is_set():
            self._report_now.wait(period / 1000)  # or sooner: the in-sync count changed
            self._report_now.clear()
            if self._stop.is_set():
                break
            try:
                self.register_all()
            except Exception as exc:  # a promotion that failed: agents in an unknown state
                log.exception("registration failed")
                self._halt(f"registration or promotion failed: {exc}")

    def register_now(self) -> None:
        """Have the register loop register with every namesrv now (a change the routes
        must show before the next heartbeat; also ends its wait at a stop)."""
        self._report_now.set()

    def register_all(self) -> None:
        """Register with every namesrv now, on the caller's thread, and act on the
        controller's decision (controller mode)."""
        cfg = self.config.current
        body = {"topicConfigSerializeWrapper": _with_broker_permission(
            self.topics.to_wrapper_json(), cfg.broker_permission)}  # fmt: skip
        ha_port = cn.load(self.words, cn.HA_PORT)
        ha_addr = f"{cfg.broker_ip1}:{ha_port}" if ha_port and not cfg.is_slave else ""
        fields = {
            "brokerName": cfg.broker_name,
            "brokerAddr": self.address(),
            "clusterName": cfg.broker_cluster_name,
            "brokerId": cfg.broker_id,
            "haServerAddr": ha_addr,
        }
        sync_state = self.sync_state
        report = sync_state.report() if sync_state is not None else None
        if cfg.enable_controller_mode:
            write = cn.load(self.words, cn.WRITE_OFFSET)
            ha_client = cn.unpack_address(cn.load(self.words, cn.HA_CLIENT_ADDR))
            members = report.addrs if report is not None else ()
            fields.update(cm.report(cfg, self.epoch, write, members, ha_client))
        for addr in cfg.namesrv_addrs:
            try:
                response, _ = self.client.invoke_json(
                    addr, RequestCode.REGISTER_BROKER, fields, body
                )
                decision = cm.Decision.from_ext(response.ext_fields)
            except ShmqError as exc:
                log.warning("cannot register with namesrv %s: %s", addr, exc)
                continue
            if cfg.is_slave:
                self.slave_sync.set_master(response.ext_fields.get("masterAddr") or "")
                if not cfg.ha_master_address:
                    self._learn_master(response.ext_fields.get("haServerAddr") or "")
            if decision is not None and cfg.enable_controller_mode:
                if decision.role == "MASTER" and cfg.is_slave:
                    self._promote(decision)
                    return
                write = cn.load(self.words, cn.WRITE_OFFSET)
                stop_reason, self.epoch = cm.follow(cfg, self.epoch, write, decision)
                if stop_reason:
                    self._halt(stop_reason)
                elif decision.role == "MASTER" and report is not None:
                    sync_state.answered(report, decision.alone)
                return  # one controller decides; the new role registers with every namesrv

    def _learn_master(self, ha_addr: str) -> None:
        """A slave without haMasterAddress takes the master's HA address from the namesrv's
        register answer (RocketMQ's ``updateHaMasterAddress``); its HA agent reads it."""
        try:
            host, port = parse_host(ha_addr) if ha_addr else ("", 0)
            packed = cn.pack_address(host, port) if ha_addr else 0
        except (ShmqError, ValueError):
            log.warning("the namesrv named an HA master address %r that is not ip:port", ha_addr)
            return
        if packed and packed != cn.load(self.words, cn.MASTER_HA_ADDR):
            log.info("HA master address: %s", ha_addr)
            cn.publish(self.words, cn.MASTER_HA_ADDR, packed)

    def unregister_all(self) -> None:
        """UNREGISTER_BROKER with every namesrv (a clean stop)."""
        cfg = self.config.current
        for addr in cfg.namesrv_addrs:
            request = RemotingCommand.request(
                RequestCode.UNREGISTER_BROKER,
                {
                    "brokerName": cfg.broker_name,
                    "brokerAddr": self.address(),
                    "clusterName": cfg.broker_cluster_name,
                    "brokerId": cfg.broker_id,
                },
            )
            try:
                self.client.invoke(addr, request, timeout=1.0)
            except ShmqError as exc:
                log.info("cannot unregister from namesrv %s: %s", addr, exc)


def _with_broker_permission(wrapper: dict, permission: int) -> dict:
    """A broker that is not both readable and writable registers each topic's permission
    masked by its own (RocketMQ 5's ``registerBrokerAll``), so the routes keep producers
    from a read-only broker and consumers from a write-only one."""
    if permission & PERM_READ_WRITE != PERM_READ_WRITE:
        for topic in wrapper["topicConfigTable"].values():
            topic["perm"] &= permission
    return wrapper
