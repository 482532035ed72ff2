"""PULL_MESSAGE(11) over TCP: RocketMQ 4.9's ``PullMessageProcessor`` and the store's
``getMessage``, for consumers that are not on the broker's host.

The broker reads the consume queue and the CommitLog through its own read-only mappings,
as shmq's own consumers do, by the store's one rule (``store.fetch``, 4.9's getMessage):
at most ``maxMsgNums`` and the broker's transfer limits (``maxTransfer*OnMessageInMemory``
near the CommitLog's end, ``*InDisk`` further back), units whose tag hash is not in the
subscription's skipped (at most ``max(800, maxMsgNums)`` units looked at), and the response
code 4.9 gives each store status (remark: the status's name). The response body is the
stored records back to back, each a slice copied from the CommitLog mapping (never decoded
and encoded again). A pull
that finds nothing with the suspend bit set is held (``pull_hold``) and answered once the
queue grows or its ``suspendTimeoutMillis`` passes; a pull with the commit bit stores its
``commitOffset`` for the group first. A pull answered with messages counts them as the
group's gets (``get_counts``), as 4.9's ``incGroupGetNums``: what a pull tells the broker
is one ``PullAccount`` (``ctx.account_pull``), so the data server, another process, can send
it to the control server.

The subscription comes from the request when its sysFlag has the subscription bit, else
from the group's last heartbeat (4.9's push consumer sends it only there).

Which broker the consumer should pull the queue from next (``suggestWhichBrokerId``), as
4.9: with ``slaveReadEnable``, the group's ``whichBrokerWhenConsumeSlowly`` (1) when the
CommitLog bytes after the last unit read exceed ``accessMessageInMemoryMaxRatio`` % of the
host's RAM (the consumer is far behind: let the slave's page cache serve it), else the
group's ``brokerId`` (0); without it, the master (0), and a slave answers every pull with
PULL_RETRY_IMMEDIATELY, no messages and the requested offset as ``nextBeginOffset`` (so a
consumer skips nothing). A slave never stores a pull's ``commitOffset``.
"""

from __future__ import annotations

import functools

import numpy as np

from shmq.broker.context import DataPathContext
from shmq.broker.processors.pull_account import PullAccount
from shmq.broker.processors.pull_hold import HeldPull, PullHold
from shmq.codec.record_copy import copy_owned_records
from shmq.errors import FilterExpressionError, InvalidMessageError
from shmq.filter.sql92 import SqlFilter, compile_sql
from shmq.ipc import counters as cn
from shmq.remoting.custom_header import INT, LONG, STR, Spec, decode_header
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode, ResponseError
from shmq.remoting.server import Connection, RemotingServer
from shmq.store.fetch import Fetch, QueueBounds, pull_response_code, transfer_limits
from shmq.store.reader import StoreReader, topic_bytes
from shmq.store.results import GetStatus, parse_tag_filter

Rc = ResponseCode

PULL_HEADER: Spec = {
    "consumerGroup": (STR, True), "topic": (STR, True), "queueId": (INT, True),
    "queueOffset": (LONG, True), "maxMsgNums": (INT, True), "sysFlag": (INT, True),
    "commitOffset": (LONG, True), "suspendTimeoutMillis": (LONG, True),
    "subscription": (STR, False), "subVersion": (LONG, True), "expressionType": (STR, False),
}  # fmt: skip
SQL92 = "SQL92"
# PullSysFlag
FLAG_COMMIT_OFFSET, FLAG_SUSPEND, FLAG_SUBSCRIPTION = 0x1, 0x2, 0x4
MIN_OFFSET_FRESH_S = 1.0  # a queue's first offset, listed at most once a second per queue


class RemotingPull:
    """The pull code; reads through the broker's one store view (``ctx.store``)."""

    def __init__(self, ctx: DataPathContext) -> None:
        self.ctx = ctx
        store = ctx.config.store
        self.file_size = store.mapped_file_size_commit_log
        self.limits = transfer_limits(store)
        self.hold = PullHold(ctx, self._answer_held, ctx.config.max_held_pulls, "shmq-pull-hold")
        warm_up()

    def register(self, server: RemotingServer) -> None:
        server.register(RequestCode.PULL_MESSAGE, self.handle)

    def close(self) -> None:
        self.hold.close()

    def handle(self, request: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        return self._process(request, conn, allow_suspend=True)

    def _answer_held(self, held: HeldPull, final: bool) -> RemotingCommand | None:
        """The hold service's re-run of a held pull: its response, or None to keep holding
        (the queue grew, but with nothing the subscription takes)."""
        try:
            response = self._process(held.request, held.conn, allow_suspend=False)
        except ResponseError as exc:  # e.g. the topic was deleted meanwhile
            return RemotingCommand.response_to(held.request, exc.code, exc.remark)
        if not final and response is not None and response.code == Rc.PULL_RETRY_IMMEDIATELY:
            return None
        return response

    # -- the request ------------------------------------------------------------------------

    def _process(
        self, request: RemotingCommand, conn: Connection, allow_suspend: bool
    ) -> RemotingCommand | None:
        h = decode_header(request, PULL_HEADER)
        group, topic, queue_id = h["consumerGroup"], h["topic"], h["queueId"]
        flags = h["sysFlag"]
        codes = self._check(h)
        fetch, body, count = self.get_message(topic, queue_id, h["queueOffset"], h["maxMsgNums"],
                                              codes)  # fmt: skip
        status, next_offset = fetch.status, fetch.next_begin_offset
        code = pull_response_code(status, h["queueOffset"])
        cfg = self.ctx.config
        suggest = 0  # MixAll.MASTER_ID
        if cfg.slave_read_enable:
            group_cfg = self.ctx.subscription_groups.find(group, cfg.auto_create_subscription_group)
            slow = fetch.suggest_slave
            suggest = group_cfg.which_broker_when_consume_slowly if slow else group_cfg.broker_id
        elif cfg.is_slave:  # a slave serves no reads: back to the master, skipping nothing
            code, next_offset, body = Rc.PULL_RETRY_IMMEDIATELY, h["queueOffset"], b""
        committing = allow_suspend and flags & FLAG_COMMIT_OFFSET and not cfg.is_slave
        account = PullAccount(
            group, topic, queue_id,
            count if code == Rc.SUCCESS else None, len(body),
            # the consumer's next pull starts where this one left it
            None if cfg.is_slave else next_offset if code == Rc.SUCCESS else h["queueOffset"],
            h["commitOffset"] if committing else None,
        )  # fmt: skip
        response: RemotingCommand | None = RemotingCommand.response_to(
            request,
            code,
            status.value,
            {
                "suggestWhichBrokerId": suggest,
                "nextBeginOffset": next_offset,
                "minOffset": fetch.min_offset,
                "maxOffset": fetch.max_offset,
            },
            body,
        )
        if code == Rc.PULL_NOT_FOUND and allow_suspend and flags & FLAG_SUSPEND:
            timeout_ms = h["suspendTimeoutMillis"]
            if not self.ctx.config.long_polling_enable:
                timeout_ms = self.ctx.config.short_polling_time_mills
            held = HeldPull(request, conn, ((topic, queue_id),), h["queueOffset"], timeout_ms)
            if self.hold.suspend(held):
                response = None
        if account.tells:
            self.ctx.account_pull(conn, account)
        return response

    def _check(self, h: dict) -> np.ndarray | SqlFilter | None:
        """4.9's checks before the read, in its order; the subscription's tag hashes (None:
        every message) or its compiled SQL92 filter (``enablePropertyFilter``; never on a
        retry topic, as RocketMQ without ``filterSupportRetry``)."""
        cfg = self.ctx.config
        if not cfg.broker_permission & 4:
            raise ResponseError(
                Rc.NO_PERMISSION, f"the broker[{cfg.broker_ip1}] pulling message is forbidden"
            )
        group, topic = h["consumerGroup"], h["topic"]
        group_cfg = self.ctx.subscription_groups.find(group, cfg.auto_create_subscription_group)
        if not group_cfg.consume_enable:
            raise ResponseError(Rc.NO_PERMISSION, f"subscription group no permission, {group}")
        topic_cfg = self.ctx.topics.get(topic)
        if topic_cfg is None:
            raise ResponseError(
                Rc.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
            )
        if not topic_cfg.is_readable:
            raise ResponseError(
                Rc.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden"
            )
        if not 0 <= h["queueId"] < topic_cfg.read_queue_nums:
            raise ResponseError(
                Rc.SYSTEM_ERROR,
                f"queueId[{h['queueId']}] is illegal, topic:[{topic}] "
                f"topicConfig.readQueueNums:[{topic_cfg.read_queue_nums}]",
            )
        if h["sysFlag"] & FLAG_SUBSCRIPTION:
            expression, kind = h["subscription"], h["expressionType"]
        else:
            expression, kind = self._group_subscription(group, topic, h["subVersion"])
        check_expression_type(kind, cfg.enable_property_filter)
        try:
            if kind == SQL92:
                return None if is_retry_topic(topic) else compiled_sql(expression)
            return parse_tag_filter(expression)
        except (InvalidMessageError, FilterExpressionError):
            raise ResponseError(Rc.SUBSCRIPTION_PARSE_FAILED,
                                "parse the consumer's subscription failed") from None  # fmt: skip

    def _group_subscription(self, group: str, topic: str, version: int) -> tuple[str, str]:
        info = self.ctx.consumers.group_info(group)
        if info is None:
            raise ResponseError(Rc.SUBSCRIPTION_NOT_EXIST, "the consumer's group info not exist")
        sub = info["subscriptionTable"].get(topic)
        if sub is None:
            raise ResponseError(Rc.SUBSCRIPTION_NOT_EXIST, "the consumer's subscription not exist")
        if int(sub.get("subVersion", 0)) < version:
            raise ResponseError(
                Rc.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest"
            )
        return str(sub.get("subString", "*")), str(sub.get("expressionType") or "TAG")

    # -- the store --------------------------------------------------------------------------

    def get_message(
        self, topic: str, queue_id: int, offset: int, max_nums: int,
        codes: np.ndarray | SqlFilter | None,
    ) -> tuple[Fetch, memoryview | bytes, int]:  # fmt: skip
        """The store's read (``store.fetch``) over the published consume queue, and the
        records it chose as stored: ``(fetch, body, messages in body)``. A read whose
        units own no record (cleanup removed them meanwhile) is MESSAGE_WAS_REMOVING; one
        whose messages a SQL92 filter (``codes``) all refuses, NO_MATCHED_MESSAGE (the
        consumer pulls on from ``next_begin_offset`` at once)."""
        sql = None
        if isinstance(codes, SqlFilter):
            sql, codes = codes, None
        store, words = self.ctx.store, self.ctx.counters.words
        bounds = QueueBounds(
            store.min_offset(topic, queue_id, MIN_OFFSET_FRESH_S),
            store.max_offset(topic, queue_id),
            cn.load(words, cn.MIN_PHYSICAL_OFFSET),
            cn.load(words, cn.WRITE_OFFSET),
            self.file_size,
        )
        with store.reading() as reader:
            fetch = reader.fetch(topic, queue_id, offset, max_nums, codes, bounds,
                                 self.limits)  # fmt: skip
            if fetch.status is not GetStatus.FOUND:
                return fetch, b"", 0
            if sql is not None:
                fetch = sql_matched(reader, topic, queue_id, fetch, sql)
                if fetch.status is not GetStatus.FOUND:
                    return fetch, b"", 0
            body, copied = reader.copy_records(topic, queue_id, fetch)
        if not copied:
            return fetch._replace(status=GetStatus.MESSAGE_WAS_REMOVING), b"", 0
        # the frame's encoding copies it once more: hand it over as a view, not a copy
        return fetch, memoryview(body), copied


def check_expression_type(kind: str | None, property_filter: bool = False) -> None:
    """Refuse a subscription by anything but tags as RocketMQ 4.9 does without property
    filters (``enablePropertyFilter``, off by default), and by anything but tags and SQL92
    with them."""
    if kind not in (None, "TAG") and not (property_filter and kind == SQL92):
        raise ResponseError(
            Rc.SYSTEM_ERROR, f"The broker does not support consumer to filter message by {kind}"
        )


@functools.lru_cache(maxsize=1024)
def compiled_sql(expression: str) -> SqlFilter:
    """A subscription's SQL92 expression compiled once (RocketMQ's ConsumerFilterManager
    keeps one per group and topic; every pull names its expression, so cache by that)."""
    return compile_sql(expression)


def is_retry_topic(topic: str) -> bool:
    return topic.startswith("%RETRY%")


def sql_matched(
    reader: StoreReader, topic: str, queue_id: int, fetch: Fetch, sql: SqlFilter
) -> Fetch:
    """``fetch`` narrowed to the units whose message ``sql`` matches: the units whose
    properties cannot match skipped undecoded (``StoreReader.holding``), the others decoded
    and evaluated; NO_MATCHED_MESSAGE when none does, with the same next offset."""
    fetch = reader.holding(topic, queue_id, fetch, sql.required)
    if fetch.status is not GetStatus.FOUND:
        return fetch
    keep = [m.queue_offset for m in reader.messages(topic, queue_id, fetch) if sql(m.properties)]
    if not keep:
        return fetch._replace(status=GetStatus.NO_MATCHED_MESSAGE)
    mask = np.isin(fetch.queue_offsets, np.array(keep, dtype=np.int64))
    return fetch._replace(phys=fetch.phys[mask], sizes=fetch.sizes[mask],
                          queue_offsets=fetch.queue_offsets[mask])  # fmt: skip


def warm_up() -> None:
    """Load the kernel that copies a response's records (from a read-only mapping)."""
    one = np.ones(1, dtype=np.int64)
    copy_owned_records(np.frombuffer(b"x", dtype=np.uint8), one - 1, one, one, topic_bytes("T"),
                       0, 0, np.empty(1, dtype=np.uint8), 0)  # fmt: skip
