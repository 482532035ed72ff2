"""What the data server tells the control server, and the control server's handlers.

- ``RELAY_PULLED`` (oneway, over the client's link): the pulls the data server answered
  (``PullAccount``s, one per queue: ``data_server.accounts``), applied as the
  supervisor's own pull processor applies each.
- ``RELAY_METRICS`` (oneway, once a second over the data server's internal client): the
  request latency of the requests it answered (``rocketmq_rpc_latency``: added to the
  supervisor's) and its requests waiting for a worker by code (the processor watermarks:
  the latest replaces the one before). It carries the relay secret, as a link's hello.

Both are internal requests (``RemotingServer.register_internal``): the ACL hook does not
see them; a ``RELAY_PULLED`` is taken from a relayed connection only, a ``RELAY_METRICS``
with the secret only.
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from shmq.broker.processors.pull_account import PullAccount
from shmq.broker.stats.events import BrokerEvents
from shmq.errors import ResponseError, ShmqError
from shmq.remoting.client import RemotingClient
from shmq.remoting.codes import RequestCode, ResponseCode
from shmq.remoting.protocol import RemotingCommand
from shmq.remoting.server import Connection, RemotingServer

if TYPE_CHECKING:
    from shmq.broker.context import BrokerContext

log = logging.getLogger(__name__)

METRICS_EVERY_S = 1.0


class DataServerReports:
    """The control server's side: ``register`` its two handlers."""

    def __init__(self, ctx: BrokerContext, token: str, events: BrokerEvents) -> None:
        self.ctx = ctx
        self.token = token
        self.events = events

    def register(self, server: RemotingServer) -> None:
        server.register_internal(RequestCode.RELAY_PULLED, self.pulled)
        server.register_internal(RequestCode.RELAY_METRICS, self.metrics)

    def pulled(self, request: RemotingCommand, conn: Connection) -> None:
        if not conn.relayed:
            raise ResponseError(ResponseCode.NO_PERMISSION, "RELAY_PULLED from a connection "
                                "that is no relay link")  # fmt: skip
        for account in PullAccount.all_of(request):
            try:  # one account that cannot be applied does not drop the others with it
                account.apply(self.ctx)
            except (ShmqError, ValueError, KeyError) as exc:
                log.warning("a pull's account of %s/%s/%d not applied: %s", account.group,
                            account.topic, account.queue_id, exc)  # fmt: skip

    def metrics(self, request: RemotingCommand, _conn: Connection) -> None:
        offered = request.ext_fields.get("token", "")
        if not hmac.compare_digest(offered.encode(), self.token.encode()):
            raise ResponseError(ResponseCode.NO_PERMISSION, "RELAY_METRICS without the secret")
        data = json.loads(request.body)
        self.events.rpc.add([tuple(row) for row in data["rpc"]])
        self.events.data_server_queued = {int(c): int(n) for c, n in data["queued"].items()}


class MetricsShipper:
    """The data server's side of ``RELAY_METRICS``: a thread that sends what
    ``events.rpc`` counted since its last report and ``queued()`` once a second."""

    def __init__(
        self, client: RemotingClient, control: str, token: str, events: BrokerEvents,
        queued: Callable[[], dict[int, int]],
    ) -> None:  # fmt: skip
        self.client, self.control, self.token = client, control, token
        self.events, self.queued = events, queued
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="shmq-data-metrics", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(METRICS_EVERY_S):
            self.ship()

    def ship(self) -> None:
        rows = self.events.rpc.drain()
        body = json.dumps({"rpc": rows, "queued": {str(c): n for c, n in self.queued().items()}})
        request = RemotingCommand.request(RequestCode.RELAY_METRICS, {"token": self.token},
                                          body.encode(), oneway=True)  # fmt: skip
        try:
            self.client.invoke_oneway(self.control, request)
        except (ShmqError, OSError) as exc:
            self.events.rpc.add(rows)  # counted again with the next report
            log.debug("request metrics not sent: %s", exc)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.ship()
