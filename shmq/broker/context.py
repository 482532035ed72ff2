"""What the request processors of a broker work with: the narrow broker context.

A processor (``processors/``), the transaction service and the topic deletion get this
object, never the supervisor: the config, the shared segments they read or hand out, the
store as the process reads it (one reader, ``store_view``), the metadata tables, the
client registries, the statistics, and the few broker operations they call, each an object
with a name of its own (``topic_publisher``: create a topic; ``topic_table``: publish the
table the agents read; ``namesrv``: register with the namesrvs now; ``agents``: wake an
agent, list the agent processes). The supervisor builds it once its shared memory and
tables exist, before any processor; nothing here starts or stops anything.

The TCP data path's processors (send, pull and its hold) take the narrower
``DataPathContext``: exactly what they use, which both the supervisor (this
``BrokerContext``) and the data server, a process of its own (``data_server.context``),
can build.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from shmq.broker.acl.validator import PlainAcl
from shmq.broker.agents.broker_names import BrokerNames
from shmq.broker.client.consumer_manager import ConsumerManager
from shmq.broker.client.producer_manager import ProducerManager
from shmq.broker.client.queue_locks import QueueLocks
from shmq.broker.client.slots import ClientSlot, ClientSlots
from shmq.broker.config.broker_config import BrokerConfig
from shmq.broker.live_config import LiveConfig
from shmq.broker.offset.consumer_offsets import ConsumerOffsetManager
from shmq.broker.process_group import ProcessGroup
from shmq.broker.registration import NamesrvRegistration
from shmq.broker.ring_puts import broker_ring
from shmq.broker.stats.events import BrokerEvents
from shmq.broker.stats.get_counts import GetCounts
from shmq.broker.stats.items import BrokerStatsItems
from shmq.broker.stats.rates import BrokerRates
from shmq.broker.store_view import StoreView
from shmq.broker.subscription.groups import SubscriptionGroupConfig, SubscriptionGroupManager
from shmq.broker.topic.config import TopicConfig, TopicConfigManager
from shmq.broker.topic.publisher import TopicPublisher
from shmq.broker.topic.table import TopicTable
from shmq.ipc.ring_appender import RingAppender
from shmq.ipc.segment import Segment
from shmq.remoting.server import Connection, RemotingServer

if TYPE_CHECKING:
    from shmq.broker.processors.pull_account import PullAccount


class TopicLookup(Protocol):
    def get(self, name: str) -> TopicConfig | None: ...
    def create_auto(self, name: str, queues: int | None) -> TopicConfig: ...


class TopicCreation(Protocol):
    def create(self, cfg: TopicConfig) -> None: ...
    def ensure(self, topic: str, queues: int) -> TopicConfig: ...


class GroupLookup(Protocol):
    def find(self, group: str, auto_create: bool) -> SubscriptionGroupConfig: ...


class ConsumerLookup(Protocol):
    def group_info(self, group: str) -> dict[str, Any] | None: ...


class DataPathContext(Protocol):
    """What ``RemotingSend``, ``RemotingPull`` and ``PullHold`` use."""

    @property
    def config(self) -> BrokerConfig: ...

    names: BrokerNames
    counters: Segment
    registry: Segment
    store: StoreView
    topics: TopicLookup
    topic_publisher: TopicCreation
    subscription_groups: GroupLookup
    consumers: ConsumerLookup  # the subscriptions of groups' last heartbeats
    events: BrokerEvents

    def producer_ring(self, group: str) -> RingAppender:
        """A producer ring of the process's own (the TCP sends')."""

    def consumer_slot(self, name: str) -> ClientSlot:
        """A consumer slot of the process's own (a hold's wake-ups)."""

    def release_consumer_slot(self, slot: ClientSlot) -> None:
        """The slot is no longer used (the process's hold closed)."""

    def account_pull(self, conn: Connection, account: PullAccount) -> None:
        """Tell the broker what an answered pull on ``conn`` changes."""


@dataclass(eq=False)
class BrokerContext:
    """The broker as its processors see it (see the module docstring)."""

    settings: LiveConfig  # read through ``config``
    names: BrokerNames  # the shared-memory names local clients are given
    counters: Segment  # the shared counters (``ipc.counters``)
    registry: Segment  # the client registry (``ipc.registry``)
    ha_table: Segment  # the HA agent's table of slaves (``ipc.ha_table``)
    store: StoreView
    topics: TopicConfigManager
    offsets: ConsumerOffsetManager
    subscription_groups: SubscriptionGroupManager
    clients: ClientSlots  # local producers' rings and consumers' slots
    consumers: ConsumerManager
    producers: ProducerManager
    queue_locks: QueueLocks
    gets: GetCounts
    events: BrokerEvents  # what processors count as they answer (for the metrics)
    rates: BrokerRates
    stats_items: BrokerStatsItems
    topic_table: TopicTable
    topic_publisher: TopicPublisher
    namesrv: NamesrvRegistration
    agents: ProcessGroup
    server: RemotingServer  # the control server: its open connections
    public_address: Callable[[], str]  # the broker's address (the data server's port)
    acl: PlainAcl | None = None  # with aclEnable: plain_acl.yml's accounts

    @property
    def config(self) -> BrokerConfig:
        """The broker's config now (UPDATE_BROKER_CONFIG and a promotion replace it)."""
        return self.settings.current

    @config.setter
    def config(self, config: BrokerConfig) -> None:
        self.settings.current = config

    @property
    def root(self) -> str:
        """The store's root directory."""
        return self.settings.current.store.store_path_root_dir

    @property
    def address(self) -> str:
        """This broker's address, ``ip:port``: what the namesrvs advertise."""
        return self.public_address()

    def producer_ring(self, group: str) -> RingAppender:
        return broker_ring(self, group)

    def consumer_slot(self, name: str) -> ClientSlot:
        return self.clients.register_consumer(os.getpid(), name)

    def release_consumer_slot(self, slot: ClientSlot) -> None:
        self.clients.release("consumer", slot.index, slot.gen)

    def account_pull(self, conn: Connection, account: PullAccount) -> None:
        account.apply(self)
