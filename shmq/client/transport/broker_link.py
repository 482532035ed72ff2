"""A client's registration with one broker: its shared segments, attached by name."""

from __future__ import annotations

import contextlib
import os

from shmq.config import parse_host
from shmq.errors import RemotingError, ShmqError
from shmq.ipc import counters as cn
from shmq.ipc.segment import Segment
from shmq.message import pack_host
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RequestCode


class BrokerLink:
    """Registered as a producer (``kind="producer"``, gets a ring) or a consumer."""

    def __init__(self, client: RemotingClient, address: str, group: str, kind: str) -> None:
        self.client = client
        self.address = address
        self.kind = kind
        code = (
            RequestCode.REGISTER_PRODUCER if kind == "producer" else RequestCode.REGISTER_CONSUMER
        )
        _, self.info = client.invoke_json(address, code, {"pid": os.getpid(), "group": group})
        self.broker_name = self.info["brokerName"]
        try:
            self.counters = Segment.attach(self.info["counters"], readonly=True)
            cn.check(self.counters.words)
            self.registry = Segment.attach(self.info["registry"])
        except ShmqError as exc:
            self._unregister()
            raise ShmqError(
                f"broker {address} is not on this host or its shared memory is gone: {exc}"
            ) from exc
        self.sync_flush = self.info["flushDiskType"] == "SYNC_FLUSH"
        self.sync_master = self.info.get("brokerRole") == "SYNC_MASTER"
        host, port = parse_host(self.info["storeHost"])
        self.store_host_bytes = pack_host(host, port).to_bytes(8, "big", signed=True)
        # bornHost: this client's end of its connection to the broker, as the broker sees it
        host, port = client.local_address(address)
        self.born_host = pack_host(host, port)
        self.born_host_text = f"{host}:{port}"

    def _unregister(self) -> None:
        code = (
            RequestCode.UNREGISTER_PRODUCER
            if self.kind == "producer"
            else RequestCode.UNREGISTER_CONSUMER
        )
        # When the broker is gone, it frees the slot once it sees this process exit.
        with contextlib.suppress(RemotingError):
            self.client.invoke_json(
                self.address, code, {"slot": self.info["slot"], "gen": self.info["gen"]}, timeout=1
            )

    def close(self) -> None:
        self._unregister()
        self.counters.close()
        self.registry.close()
