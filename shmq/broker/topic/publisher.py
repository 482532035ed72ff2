"""Creating and changing topics (RocketMQ's ``TopicConfigManager.updateTopicConfig`` with
``registerIncrementBrokerData``): the config is persisted, registered with the namesrvs,
then published to the agents (``topic.table``).

The order matters: the writer appends a new topic's first message (and its sender is
answered) once the topic is in the shared table, so the namesrvs must know the topic before
that, or a consumer asking for the route right after the send would not find it.
"""

from __future__ import annotations

import logging

from shmq.broker.registration import NamesrvRegistration
from shmq.broker.topic.config import PERM_READ, PERM_WRITE, TopicConfig, TopicConfigManager
from shmq.broker.topic.table import TopicTable
from shmq.errors import ResponseError
from shmq.remoting.codes import ResponseCode

log = logging.getLogger(__name__)


class TopicPublisher:
    """Creates and changes topics: persisted, registered with the namesrvs, then published
    to the agents."""

    def __init__(
        self, topics: TopicConfigManager, table: TopicTable, namesrv: NamesrvRegistration
    ) -> None:
        self.topics = topics
        self.table = table
        self.namesrv = namesrv

    def create(self, cfg: TopicConfig) -> None:
        """Create or update a topic (see the module docstring for the order). A new topic
        past the shared table's ``maxTopics`` slots is refused before anything changes."""
        capacity = self.table.capacity()
        if self.topics.get(cfg.topic_name) is None and len(self.topics.all()) >= capacity:
            raise ResponseError(
                ResponseCode.SYSTEM_ERROR,
                f"cannot create topic {cfg.topic_name}: the broker holds {capacity} topics, "
                "its maxTopics",
            )
        self.topics.update(cfg)
        try:
            self.topics.persist()
        except OSError as exc:  # a full disk: served from memory, written once there is room
            log.error("topic %s created but not persisted yet: %s", cfg.topic_name, exc)
        self.namesrv.register_all()
        self.table.publish()

    def ensure(self, topic: str, queues: int) -> TopicConfig:
        """A retry or DLQ topic, created readable and writable when absent (RocketMQ's
        ``createTopicInSendMessageBackMethod``)."""
        cfg = self.topics.get(topic)
        if cfg is None:
            cfg = TopicConfig(topic, queues, queues, PERM_READ | PERM_WRITE)
            self.create(cfg)
            log.info("created %s with %d queue(s)", topic, queues)
        return cfg
