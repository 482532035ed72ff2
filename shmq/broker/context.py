"""What the request processors of a broker work with: the narrow broker context.

A processor (``processors/``), the transaction service and the topic deletion get this
object, never the supervisor: the config, the shared segments they read or hand out, the
store as the process reads it (one reader, ``store_view``), the metadata tables, the
client registries, the statistics, and the few broker operations they call, each an object
with a name of its own (``topic_publisher``: create a topic; ``topic_table``: publish the
table the agents read; ``namesrv``: register with the namesrvs now; ``agents``: wake an
agent, list the agent processes). The supervisor builds it once its shared memory and
tables exist, before any processor; nothing here starts or stops anything.
"""

from __future__ import annotations

from dataclasses import dataclass

from shmq.broker.acl.validator import PlainAcl
from shmq.broker.agents.broker_names import BrokerNames
from shmq.broker.client.consumer_manager import ConsumerManager
from shmq.broker.client.producer_manager import ProducerManager
from shmq.broker.client.queue_locks import QueueLocks
from shmq.broker.client.slots import ClientSlots
from shmq.broker.config.broker_config import BrokerConfig
from shmq.broker.live_config import LiveConfig
from shmq.broker.offset.consumer_offsets import ConsumerOffsetManager
from shmq.broker.process_group import ProcessGroup
from shmq.broker.registration import NamesrvRegistration
from shmq.broker.stats.events import BrokerEvents
from shmq.broker.stats.get_counts import GetCounts
from shmq.broker.stats.items import BrokerStatsItems
from shmq.broker.stats.rates import BrokerRates
from shmq.broker.store_view import StoreView
from shmq.broker.subscription.groups import SubscriptionGroupManager
from shmq.broker.topic.config import TopicConfigManager
from shmq.broker.topic.publisher import TopicPublisher
from shmq.broker.topic.table import TopicTable
from shmq.ipc.segment import Segment
from shmq.remoting.server import RemotingServer


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
    server: RemotingServer  # the control server: this broker's address, open connections
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
        """This broker's control address, ``ip:port``."""
        return self.server.address
