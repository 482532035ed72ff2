"""The topic table the agents read (``ipc.topic_table``: each topic's queue counts and
perm), written from the topic configs; the supervisor process is its only writer."""

from __future__ import annotations

from shmq.broker.topic.config import TopicConfigManager
from shmq.ipc import topic_table as tt
from shmq.ipc.segment import Segment


class TopicTable:
    """Publishes ``topics`` into the shared table ``segment``."""

    def __init__(self, topics: TopicConfigManager, segment: Segment) -> None:
        self.topics = topics
        self.segment = segment

    def publish(self, extra: dict[str, tuple[int, int, int]] | None = None) -> None:
        """Every topic config, and ``extra`` entries (name → read and write queue counts,
        perm) a moment long (``topic.deletion``)."""
        table = {
            name: (c.read_queue_nums, c.write_queue_nums, c.perm)
            for name, c in self.topics.all().items()
        }
        tt.publish_topics(self.segment.buf, self.segment.words, {**(extra or {}), **table})

    def capacity(self) -> int:
        """Topics the table holds at most (the broker's ``maxTopics``)."""
        return int(self.segment.words[tt.CAPACITY])

    def version(self) -> int:
        """The version of the table published last (the writer says which it applied)."""
        return tt.load_version(self.segment.words)
