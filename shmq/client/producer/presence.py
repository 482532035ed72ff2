"""A producer group's presence at the brokers (the producer half of RocketMQ's
``MQClientInstance``): a duplex connection to every master broker of the namesrv's
clusters, a heartbeat on each every ``heartbeat_interval``, and the brokers' requests that
come back on them.

A transaction producer needs it: a broker checks a half message back with any live producer
of its group, also one that never sent to that broker (the one that did may have died), so
every producer of the group announces itself to every broker. A connection that broke is
opened again, and announced again, by the next heartbeat or send.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
from collections.abc import Callable

from shmq.client.instance import _local_ip  # the client id's form, as a consumer's
from shmq.client.route import split_addrs
from shmq.errors import RemotingError
from shmq.remoting.client import RemotingClient
from shmq.remoting.duplex import DuplexChannel
from shmq.remoting.protocol import RemotingCommand, RequestCode

log = logging.getLogger(__name__)

MASTER_ID = "0"
_instances = itertools.count()


class ProducerPresence:
    """``on_request(broker address, request)`` is called on a connection's reader thread:
    it must only note the request and return. The connections take the credentials and
    TLS of the producer's control ``client``."""

    def __init__(
        self,
        group: str,
        namesrv: str,
        client: RemotingClient,
        on_request: Callable[[str, RemotingCommand], None],
        heartbeat_interval: float = 30.0,
    ) -> None:
        self.group = group
        self.namesrv_addrs = split_addrs(namesrv)
        self.client = client
        self.on_request = on_request
        self.heartbeat_interval = heartbeat_interval
        self.client_id = f"{_local_ip()}@{os.getpid()}#p{next(_instances)}"
        self._channels: dict[str, DuplexChannel] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Announce the group to every broker now, then every ``heartbeat_interval``."""
        self.heartbeat()
        self._thread = threading.Thread(target=self._loop, name="shmq-producer-heartbeat",
                                        daemon=True)  # fmt: skip
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.heartbeat_interval):
            self.heartbeat()

    def brokers(self) -> set[str]:
        """The master addresses the namesrvs know (those it cannot reach are left out)."""
        for addr in self.namesrv_addrs:
            try:
                _, info = self.client.invoke_json(addr, RequestCode.GET_BROKER_CLUSTER_INFO)
            except RemotingError as exc:
                log.debug("cluster info from namesrv %s: %s", addr, exc)
                continue
            table = (info or {}).get("brokerAddrTable", {})
            return {b["brokerAddrs"][MASTER_ID] for b in table.values()
                    if MASTER_ID in b.get("brokerAddrs", {})}  # fmt: skip
        return set()

    def heartbeat(self) -> None:
        """Send a heartbeat to every master broker, and to any other one connected."""
        with self._lock:
            known = set(self._channels)
        for addr in self.brokers() | known:
            try:
                self._announce(addr, self._channel(addr))
            except RemotingError as exc:
                log.info("producer %s: heartbeat to %s failed: %s", self.group, addr, exc)

    def _channel(self, addr: str) -> DuplexChannel:
        with self._lock:
            channel = self._channels.get(addr)
            if channel is None:
                channel = self._channels[addr] = DuplexChannel(
                    addr, lambda request: self.on_request(addr, request),
                    credentials=self.client.credentials, tls=self.client.tls,
                )  # fmt: skip
        return channel

    def _announce(self, addr: str, channel: DuplexChannel) -> None:
        body = {"clientID": self.client_id, "producerDataSet": [{"groupName": self.group}],
                "consumerDataSet": []}  # fmt: skip
        channel.invoke_json(RequestCode.HEART_BEAT, body_obj=body)

    def send_soon(self, addr: str, frame: bytes) -> None:
        """Send the oneway request ``frame`` to the broker at ``addr`` on this group's
        connection (``DuplexChannel.send_frame_soon``; a new connection is announced first,
        so check-backs can come back on it)."""
        channel = self._channel(addr)
        if not channel.connected:
            self._announce(addr, channel)
        channel.send_frame_soon(frame)

    def close(self) -> None:
        """Stop the heartbeats, unregister from every broker, close the connections."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        with self._lock:
            channels = dict(self._channels)
            self._channels.clear()
        for addr, channel in channels.items():
            if channel.connected:
                request = RemotingCommand.request(
                    RequestCode.UNREGISTER_CLIENT,
                    {"clientID": self.client_id, "producerGroup": self.group},
                )
                try:
                    channel.invoke(request, timeout=1.0)
                except RemotingError as exc:
                    log.debug("unregister from %s failed: %s", addr, exc)
            channel.close()
