"""GET_BROKER_RUNTIME_INFO, GET_BROKER_HA_STATUS and GET_BROKER_EPOCH_CACHE (RocketMQ's
``AdminBrokerProcessor``; the HA status is shmq's own code): the broker's runtime numbers
(``stats.runtime``) as RocketMQ's ``KVTable``, its replication state (``ha.status``), and
in controller mode its epoch (``ha.controller_mode``) as RocketMQ's ``EpochEntryCache``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from shmq.broker.ha.controller_mode import load_epoch
from shmq.broker.ha.status import ha_status
from shmq.broker.processors.processor import Processor
from shmq.broker.processors.responses import json_response
from shmq.broker.stats.runtime import broker_stats, rocketmq_runtime_table
from shmq.errors import ResponseError, ShmqError
from shmq.ipc import counters as cn
from shmq.remoting.admin_bodies import kv_table
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode
from shmq.remoting.server import Connection


class BrokerStatus(Processor):
    """The three codes above."""

    CODES: ClassVar[Mapping[int, str]] = {
        RequestCode.GET_BROKER_RUNTIME_INFO: "runtime_info",
        RequestCode.GET_BROKER_HA_STATUS: "ha_status",
        RequestCode.GET_BROKER_EPOCH_CACHE: "epoch_cache",
    }

    def runtime_info(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """RocketMQ's ``KVTable``: the keys mqadmin reads, shmq's numbers as JSON text
        under ``admin_bodies.RUNTIME_KEY``."""
        try:
            stats = broker_stats(self.ctx)
            return json_response(request, kv_table(rocketmq_runtime_table(self.ctx, stats), stats))
        except ShmqError as exc:
            raise ResponseError(ResponseCode.SYSTEM_ERROR, str(exc)) from exc

    def ha_status(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        return json_response(request, ha_status(self.ctx))

    def epoch_cache(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """mqadmin ``getBrokerEpoch``: the epochs whose data the broker holds. shmq keeps
        the last one only (``epochFileCheckpoint``), so the list has at most one entry,
        ending at the CommitLog's end. Outside controller mode RocketMQ's refusal."""
        cfg = self.ctx.config
        if not cfg.enable_controller_mode:
            raise ResponseError(ResponseCode.SYSTEM_ERROR, "this request only for controllerMode ")
        try:
            epoch = load_epoch(self.ctx.root)
        except ShmqError as exc:
            raise ResponseError(ResponseCode.SYSTEM_ERROR, str(exc)) from exc
        max_offset = cn.load(self.ctx.counters.words, cn.WRITE_OFFSET)
        entries = []
        if epoch.epoch > 0:
            entries.append({"epoch": epoch.epoch, "startOffset": epoch.start_offset,
                            "endOffset": max_offset})  # fmt: skip
        return json_response(request, {
            "clusterName": cfg.broker_cluster_name, "brokerName": cfg.broker_name,
            "brokerId": cfg.broker_id, "epochList": entries, "maxOffset": max_offset,
        })  # fmt: skip
