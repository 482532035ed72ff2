"""Deleting topics on a broker: mqadmin's ``deleteTopic`` (DELETE_TOPIC_IN_BROKER),
``cleanUnusedTopic`` (CLEAN_UNUSED_TOPIC) and ``cleanExpiredCQ`` (CLEAN_EXPIRED_CONSUMEQUEUE).

The stored messages go by a record in the CommitLog (``store.topic_purge``), which only the
writer appends: it appends one for every topic that leaves its topic table, before it takes
any other record, and says so by publishing the table's version in ``TOPICS_APPLIED``. So a
deletion here is a change of the topic table and a wait for the writer; a slave, which runs
no writer, purges when its master's record reaches it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import ClassVar

from shmq.broker.processors.processor import Processor
from shmq.broker.topic.config import TopicConfig, system_topics
from shmq.errors import ResponseError, ShmqError
from shmq.ipc import counters as cn
from shmq.names import MAX_TOPIC_LENGTH, is_system_topic, name_problem, system_topic_refusal
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode
from shmq.remoting.server import Connection
from shmq.store.consume_queue import is_blank_unit

Rc = ResponseCode
# how long a deletion waits for the writer and reput, below mqadmin's and Admin's 5 s timeout
WRITER_WAIT_S = 3.0


class TopicDeletion(Processor):
    """The three codes above (RocketMQ's ``AdminBrokerProcessor`` answers them)."""

    CODES: ClassVar[Mapping[int, str]] = {
        RequestCode.DELETE_TOPIC_IN_BROKER: "delete_topic",
        RequestCode.CLEAN_UNUSED_TOPIC: "clean_unused_topic",
        RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: "clean_expired_consume_queue",
    }

    def delete_topic(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        topic = request.ext_topic()
        try:
            deleted = self.delete(topic)
        except ShmqError as exc:
            raise ResponseError(Rc.SYSTEM_ERROR, str(exc)) from exc
        if not deleted:
            raise ResponseError(Rc.TOPIC_NOT_EXIST, f"topic {topic} does not exist")
        self.ctx.store.forget_min_offsets(topic)
        return RemotingCommand.response_to(request)

    def delete(self, topic: str) -> bool:
        """Delete ``topic``'s config, its groups' offsets and its stored messages. False
        when there is no such topic. ``ShmqError`` for a system topic (RocketMQ 5's
        refusal), and when the writer did not record the deletion within
        ``WRITER_WAIT_S``: the topic is then put back, to be deleted again."""
        ctx = self.ctx
        if is_system_topic(topic) or topic in self._system_topics():
            raise ShmqError(system_topic_refusal(topic))
        config = ctx.topics.get(topic)
        if config is None or not ctx.topics.delete(topic):
            return False
        ctx.topics.persist()
        ctx.topic_table.publish()
        deadline = time.monotonic() + WRITER_WAIT_S
        if not self._writer_took_table(deadline):
            self._put_back(topic, config)
        self._await_reput(deadline)
        if ctx.offsets.remove_topic(topic):
            ctx.offsets.persist()
        ctx.namesrv.register_now()  # the namesrvs drop its route now, not at the next period
        return True

    def clean_unused_topic(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """CLEAN_UNUSED_TOPIC (mqadmin ``cleanUnusedTopic``): purge the stored messages of
        topics that have some in their consume queues but no topic config (deleted while
        no writer ran, or a store's config edited by hand); RocketMQ 4.9 destroys those
        consume queues. System topics stay. The body names the topics purged."""
        return self._purge_answer(request, self.unconfigured(expired=False))

    def clean_expired_consume_queue(
        self, request: RemotingCommand, _conn: Connection
    ) -> RemotingCommand:
        """CLEAN_EXPIRED_CONSUMEQUEUE (mqadmin ``cleanExpiredCQ``): purge the consume queues
        of topics without a topic config whose messages all expired (cleanup deleted their
        CommitLog files; reput keeps a queue's last file), which ``cleanUnusedTopic`` leaves
        as they hold no message. RocketMQ 4.9 destroys every such queue, configured topics'
        too, and their offsets start again at 0; a configured topic's queue keeps its last
        file here, which gives its offsets, so a group's committed offset never lies past a
        queue that started again. The body names the topics purged."""
        return self._purge_answer(request, self.unconfigured(expired=True))

    def _purge_answer(self, request: RemotingCommand, topics: list[str]) -> RemotingCommand:
        if topics:
            try:
                self.purge_unconfigured(topics)
            except ShmqError as exc:
                raise ResponseError(Rc.SYSTEM_ERROR, str(exc)) from exc
            for topic in topics:
                self.ctx.store.forget_min_offsets(topic)
        body = RemotingCommand.body_json({"topics": topics})
        return RemotingCommand.response_to(request, body=body)

    def unconfigured(self, expired: bool) -> list[str]:
        """Topics with consume queues and no topic config, system topics left out: those
        with a message in a queue (past a deletion's blank unit), or with ``expired`` those
        whose queues all end in a message below the CommitLog's first offset (RocketMQ's
        test), not in the blank unit a purge starts a queue with."""
        ctx, store = self.ctx, self.ctx.store
        root = os.path.join(ctx.root, "consumequeue")
        configured = ctx.topics.all()
        floor = cn.load(ctx.counters.words, cn.MIN_PHYSICAL_OFFSET)
        found = []
        for topic in sorted(os.listdir(root)) if os.path.isdir(root) else ():
            if (
                topic in configured
                or name_problem("topic", topic, MAX_TOPIC_LENGTH)
                or is_system_topic(topic)
                or topic in self._system_topics()
            ):
                continue
            queues = [int(q) for q in os.listdir(os.path.join(root, topic)) if q.isdigit()]
            maxima = {q: store.max_offset(topic, q) for q in queues}
            if not expired:
                take = any(store.min_offset(topic, q) < end for q, end in maxima.items())
            else:
                lasts = [store.unit_at(topic, q, end - 1) for q, end in maxima.items() if end]
                take = bool(lasts) and all(
                    u is not None and not is_blank_unit(*u) and u[0] < floor for u in lasts
                )
            if take:
                found.append(topic)
        return found

    def purge_unconfigured(self, topics: list[str]) -> None:
        """Have the writer record the deletion of ``topics``, which it never had in its
        table: they enter it for a moment, unwritable (perm 0), and leave it."""
        if self.ctx.config.is_slave:
            raise ShmqError("a slave purges what its master deletes: clean its master")
        deadline = time.monotonic() + WRITER_WAIT_S
        self.ctx.topic_table.publish({t: (1, 1, 0) for t in topics})
        took = self._writer_took_table(deadline)
        self.ctx.topic_table.publish()
        if not (took and self._writer_took_table(deadline)):
            raise ShmqError(
                f"the writer did not record the deletion of {', '.join(topics)} within "
                f"{WRITER_WAIT_S:g} s ({self._why_not()}): clean again"
            )
        self._await_reput(deadline)

    def _writer_took_table(self, deadline: float) -> bool:
        """Wait until the writer works with the topic table published last (its deletion
        records written), until ``deadline`` (``time.monotonic``); at once on a slave."""
        ctx = self.ctx
        if ctx.config.is_slave:
            return True
        version = ctx.topic_table.version()
        ctx.agents.wake("writer")
        while cn.load(ctx.counters.words, cn.TOPICS_APPLIED) < version:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.001)
        return True

    def _await_reput(self, deadline: float) -> None:
        """Wait until reput dispatched what the writer wrote, the deletion records with it,
        so an answer comes after the purge (as RocketMQ destroys the consume queues before
        it answers); until ``deadline`` at most: reput purges later when it is behind."""
        words = self.ctx.counters.words
        end = cn.load(words, cn.WRITE_OFFSET)
        while cn.load(words, cn.DISPATCHED_OFFSET) < end and time.monotonic() < deadline:
            time.sleep(0.001)

    def _put_back(self, topic: str, config: TopicConfig) -> None:
        self.ctx.topic_publisher.create(config)
        raise ShmqError(
            f"topic {topic} is kept: the writer did not record its deletion within "
            f"{WRITER_WAIT_S:g} s ({self._why_not()}); delete it again"
        )

    def _why_not(self) -> str:
        return cn.refuse_reason(self.ctx.counters.words) or "it did not answer"

    def _system_topics(self) -> set[str]:
        cfg = self.ctx.config
        return system_topics(cfg.broker_cluster_name, cfg.broker_name)
