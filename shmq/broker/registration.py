"""The broker's registration with the namesrvs (a mixin of ``supervisor.Broker``): the
REGISTER_BROKER heartbeat with its topics and, in controller mode, its report to the
controller; the answer's role decision (a promotion, a stop to rejoin, a SYNC_MASTER's
sync state set, ``sync_state``); a slave learning its master; UNREGISTER_BROKER at stop."""

from __future__ import annotations

import logging

from shmq.broker.agents.producer_wakeups import ProducerWakeups
from shmq.broker.ha import controller_mode as cm
from shmq.broker.ha.sync_state import Report, SyncState
from shmq.broker.topic.config import PERM_READ_WRITE
from shmq.config import parse_host
from shmq.errors import ShmqError
from shmq.ipc import counters as cn

log = logging.getLogger(__name__)


class NamesrvRegistration:
    """Registration for ``Broker``: uses its config, counters, control client, topics,
    epoch, ``sync_state``, ``_stop`` / ``_report_now`` events, ``_halt`` and
    ``_become_master``."""

    def _register_loop(self) -> None:
        cfg = self.config
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
                self._register_all()
            except Exception as exc:  # a promotion that failed: agents in an unknown state
                log.exception("registration failed")
                self._halt(f"registration or promotion failed: {exc}")

    def register_now(self) -> None:
        """Have the register loop register with every namesrv now (a change the routes
        must show before the next heartbeat)."""
        self._report_now.set()

    def _register_all(self) -> None:
        from shmq.remoting.protocol import RequestCode

        cfg = self.config
        body = {"topicConfigSerializeWrapper": _with_broker_permission(
            self.topics.to_wrapper_json(), cfg.broker_permission)}  # fmt: skip
        ha_port = cn.load(self.counters.words, cn.HA_PORT)
        ha_addr = f"{cfg.broker_ip1}:{ha_port}" if ha_port and not cfg.is_slave else ""
        fields = {
            "brokerName": cfg.broker_name,
            "brokerAddr": self.address,
            "clusterName": cfg.broker_cluster_name,
            "brokerId": cfg.broker_id,
            "haServerAddr": ha_addr,
        }
        report = self.sync_state.report() if self.sync_state is not None else None
        if cfg.enable_controller_mode:
            words = self.counters.words
            write = cn.load(words, cn.WRITE_OFFSET)
            ha_client = cn.unpack_address(cn.load(words, cn.HA_CLIENT_ADDR))
            members = report.addrs if report is not None else ()
            fields.update(cm.report(cfg, self.epoch, write, members, ha_client))
        for addr in cfg.namesrv_addrs:
            try:
                response, _ = self.control.client.invoke_json(
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
                    self._become_master(decision)
                elif stop_reason := cm.follow(self, decision):
                    self._halt(stop_reason)
                elif decision.role == "MASTER" and report is not None:
                    self.sync_state.answered(report, decision.alone)
                return  # one controller decides; the new role registers with every namesrv

    def _follow_sync_state(self, decision: cm.Decision) -> None:
        """A SYNC_MASTER in controller mode keeps its sync state set with the controller
        (``sync_state``); it starts empty (it reported none)."""
        cfg = self.config
        if cfg.broker_role != "SYNC_MASTER" or decision.role != "MASTER":
            return
        wakeups = ProducerWakeups(self.registry, self.names.prefix, cfg.max_producers)
        self.sync_state = SyncState(self.counters.words, self.ha_table.words, wakeups,
                                    cfg.store.sync_flush, cfg.ha_slave_fallbehind_max)  # fmt: skip
        self.sync_state.answered(Report(()), decision.alone)

    def _learn_master(self, ha_addr: str) -> None:
        """A slave without haMasterAddress takes the master's HA address from the namesrv's
        register answer (RocketMQ's ``updateHaMasterAddress``); its HA agent reads it."""
        try:
            host, port = parse_host(ha_addr) if ha_addr else ("", 0)
            packed = cn.pack_address(host, port) if ha_addr else 0
        except (ShmqError, ValueError):
            log.warning("the namesrv named an HA master address %r that is not ip:port", ha_addr)
            return
        words = self.counters.words
        if packed and packed != cn.load(words, cn.MASTER_HA_ADDR):
            log.info("HA master address: %s", ha_addr)
            cn.publish(words, cn.MASTER_HA_ADDR, packed)

    def _unregister_all(self) -> None:
        from shmq.remoting.protocol import RemotingCommand, RequestCode

        cfg = self.config
        for addr in cfg.namesrv_addrs:
            request = RemotingCommand.request(
                RequestCode.UNREGISTER_BROKER,
                {
                    "brokerName": cfg.broker_name,
                    "brokerAddr": self.address,
                    "clusterName": cfg.broker_cluster_name,
                    "brokerId": cfg.broker_id,
                },
            )
            try:
                self.control.client.invoke(addr, request, timeout=1.0)
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
