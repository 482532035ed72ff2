"""What the data server's processors get (``DataPathContext``): the shared segments it
maps, the store as this process reads it, the control server's tables, the subscriptions
heartbeats named, and the ring and consumer slot the supervisor registered for it.

The ring and the slot are the supervisor's (registered under its pid, so they outlive a
data server that dies): a restarted data server appends to the same ring, resuming at its
published tail, and parks on the same semaphore. A pull's account goes to the control
server over the client's own link (``PullAccount``, owed in ``accounts`` until the link's
next frame), so it is applied in the order of the client's requests.
"""

from __future__ import annotations

from dataclasses import dataclass

from shmq.broker.agents.broker_names import BrokerNames
from shmq.broker.client.slots import ClientSlot
from shmq.broker.config.broker_config import BrokerConfig
from shmq.broker.data_server.accounts import PendingAccounts
from shmq.broker.data_server.routing import Router
from shmq.broker.data_server.tables import ControlTables
from shmq.broker.processors.pull_account import PullAccount
from shmq.broker.stats.events import BrokerEvents
from shmq.broker.store_view import StoreView
from shmq.ipc.ring_appender import RingAppender
from shmq.ipc.segment import Segment
from shmq.remoting.server import Connection


@dataclass(eq=False)
class DataContext:
    """The data server's ``DataPathContext`` (see the module docstring)."""

    tables: ControlTables
    names: BrokerNames
    counters: Segment
    registry: Segment
    store: StoreView
    consumers: Router
    events: BrokerEvents  # the request latency shipped to the supervisor (``reports``)
    ring_info: dict  # ``ring_puts.broker_ring``'s fields of the supervisor's registration
    consumer: ClientSlot
    accounts: PendingAccounts  # the pulls' accounts owed to the control server

    @property
    def config(self) -> BrokerConfig:
        return self.tables.config

    @property
    def topics(self) -> ControlTables:
        return self.tables

    @property
    def topic_publisher(self) -> ControlTables:
        return self.tables

    @property
    def subscription_groups(self) -> ControlTables:
        return self.tables

    def producer_ring(self, group: str) -> RingAppender:
        return RingAppender(self.ring_info, self.counters, self.registry)

    def consumer_slot(self, name: str) -> ClientSlot:
        return self.consumer

    def release_consumer_slot(self, slot: ClientSlot) -> None:
        """Nothing: the supervisor keeps the slot for the next data server."""

    def account_pull(self, conn: Connection, account: PullAccount) -> None:
        self.accounts.add(conn, account)
