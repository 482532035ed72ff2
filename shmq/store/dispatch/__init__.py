"""Dispatch (RocketMQ's reput): CommitLog records into consume-queue units and the index,
and a topic-deletion record into the purge of the topic's queues. Run by the reput agent
and by ``MessageStore``."""
