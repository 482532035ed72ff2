"""GET_BROKER_RUNTIME_INFO and GET_BROKER_HA_STATUS (RocketMQ's ``AdminBrokerProcessor``;
the HA status is shmq's own code): the broker's runtime numbers (``stats.runtime``) as
RocketMQ's ``KVTable``, and its replication state (``ha.status``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from shmq.broker.ha.status import ha_status
from shmq.broker.processors.processor import Processor
from shmq.broker.processors.responses import json_response
from shmq.broker.stats.runtime import broker_stats, rocketmq_runtime_table
from shmq.errors import ResponseError, ShmqError
from shmq.remoting.admin_bodies import kv_table
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode
from shmq.remoting.server import Connection


class BrokerStatus(Processor):
    """The two codes above."""

    CODES: ClassVar[Mapping[int, str]] = {
        RequestCode.GET_BROKER_RUNTIME_INFO: "runtime_info",
        RequestCode.GET_BROKER_HA_STATUS: "ha_status",
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
