"""Registration of clients on the broker's host (shmq's own codes, no RocketMQ counterpart):
GET_STORE_INFO, REGISTER_PRODUCER / UNREGISTER_PRODUCER and REGISTER_CONSUMER /
UNREGISTER_CONSUMER.

The data path of a local client never comes here: a producer registers once and gets its
ring (``client.slots``); a consumer registers once and gets its wake-up semaphore and the
store's location, then reads the mapped files itself. The answer names the store and the
shared segments, so the client can check it reads the same store on the same host.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, ClassVar

from shmq.broker.acl.rings import ring_account
from shmq.broker.processors.processor import Processor
from shmq.broker.processors.responses import json_response
from shmq.errors import ResponseError
from shmq.ipc.host import host_id, path_id
from shmq.ipc.layout import layout_id
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode
from shmq.remoting.server import Connection


class LocalRegistration(Processor):
    """The local clients' codes; slots come from ``ctx.clients``."""

    CODES: ClassVar[Mapping[int, str]] = {
        RequestCode.REGISTER_PRODUCER: "register_producer",
        RequestCode.UNREGISTER_PRODUCER: "unregister_client_slot",
        RequestCode.REGISTER_CONSUMER: "register_consumer",
        RequestCode.UNREGISTER_CONSUMER: "unregister_client_slot",
        RequestCode.GET_STORE_INFO: "store_info",
    }

    def store_info(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        return json_response(request, self._store_info())

    def _store_info(self) -> dict[str, Any]:
        ctx = self.ctx
        cfg, names = ctx.config, ctx.names
        store = cfg.store
        return {
            "brokerName": cfg.broker_name,
            "brokerAddr": ctx.address,
            "storePathRootDir": os.path.abspath(store.store_path_root_dir),
            "hostId": host_id(),
            "storeId": path_id(store.store_path_root_dir),
            "shmLayout": layout_id(),
            "uid": os.geteuid(),  # a client of another user is served over TCP
            "localClientGid": store.local_client_gid,  # unless it is in this group
            "mappedFileSizeCommitLog": store.mapped_file_size_commit_log,
            "consumeQueueFileSize": store.consume_queue_file_size,
            "flushDiskType": store.flush_disk_type,
            "syncFlushTimeout": store.sync_flush_timeout,
            "brokerRole": cfg.broker_role,
            "haSlaveFallbehindMax": cfg.ha_slave_fallbehind_max,
            "maxMessageSize": store.max_message_size,
            "checkProducerCrc": cfg.check_producer_crc,
            "delayLevels": len(store.delay_levels_ms),
            "timerMaxDelaySec": store.timer_max_delay_sec,
            "storeHost": store.store_host,
            "prefix": names.prefix,
            "counters": names.counters,
            "topics": names.topics,
            "queues": names.queues,
            "registry": names.registry,
            "writerSem": names.agent_sem("writer"),
        }

    def register_producer(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        cfg = self.ctx.config
        if cfg.is_slave:  # RocketMQ's store refuses puts on a slave so
            raise ResponseError(
                ResponseCode.SERVICE_NOT_AVAILABLE,
                f"broker {cfg.broker_name} (id {cfg.broker_id}) "
                "is a slave: message store is slave mode, so putMessage is forbidden",
            )
        account = 0  # with ACL on, the ring writes only what the registering account may
        if self.ctx.acl is not None:
            host = conn.peer.rpartition(":")[0] or conn.peer
            account = ring_account(self.ctx.acl, request.ext_fields, host)
        slot = self.ctx.clients.register_producer(
            request.ext_int("pid"), request.ext_group("group"), account
        )
        info = self._store_info()
        info.update(slot=slot.index, gen=slot.gen, ring=slot.segment.name, sem=slot.sem_name)
        return json_response(request, info)

    def register_consumer(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        slot = self.ctx.clients.register_consumer(
            request.ext_int("pid"), request.ext_group("group")
        )
        info = self._store_info()
        info.update(slot=slot.index, gen=slot.gen, sem=slot.sem_name,
                    gets=self.ctx.names.consumer_gets)  # fmt: skip
        return json_response(request, info)

    def unregister_client_slot(
        self, request: RemotingCommand, _conn: Connection
    ) -> RemotingCommand:
        kind = "producer" if request.code == RequestCode.UNREGISTER_PRODUCER else "consumer"
        self.ctx.clients.release(kind, request.ext_int("slot"), request.ext_int("gen"))
        return RemotingCommand.response_to(request)
