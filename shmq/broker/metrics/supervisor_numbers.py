"""The numbers only the supervisor holds, handed to the metrics process when it asks.

Consumer offsets, the messages each group got and their bytes (TCP pulls are counted as
the control server answers them), client connections, the rings' state, what the processors counted
(``stats.events``: request latencies, transactions ended, DLQ sends, where TCP pulls left
each queue, POP messages not acked) and the requests waiting for the control server's
workers (``processor_watermarks``) live in the supervisor's memory, not in shared memory.
The metrics process asks over its pipe at scrape time and posts the supervisor's semaphore;
housekeeping wakes and answers with a copy of them (``answer``; every 100 ms it looks for a
question anyway): no work for the supervisor while nobody scrapes, one small pickled object
per scrape while someone does, never a lock the data path takes (the tables' own locks, held
for a dict copy, are the control server's).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING

from shmq.broker.stats.events import EventCounts
from shmq.remoting.codes import RequestCode

if TYPE_CHECKING:
    from shmq.broker.context import BrokerContext


ASK = "numbers"
# the groups of the rings the broker writes through itself (``ring_puts``, the schedule agent)
OWN_RING_PREFIX = "shmq-"
# ConsumeType as RocketMQ 5's consume_mode label spells it
CONSUME_MODES = {"CONSUME_PASSIVELY": "push", "CONSUME_ACTIVELY": "pull", "CONSUME_POP": "pop"}

Key = tuple[str, str]  # (group, topic)

_R = RequestCode
# RocketMQ 5's rocketmq_processor_watermark label of each request code: the executor its
# BrokerController registers the code's processor on (POP's reads go with pull, its acks
# with ack); every other code is ``admin``'s. shmq's control server has one pool of workers
# in front of which each connection's requests wait, so a processor's watermark is the
# requests of its codes waiting there.
PROCESSORS: dict[int, str] = {
    **dict.fromkeys((_R.SEND_MESSAGE, _R.SEND_MESSAGE_V2, _R.SEND_BATCH_MESSAGE,
                     _R.CONSUMER_SEND_MSG_BACK), "send"),
    **dict.fromkeys((_R.PULL_MESSAGE, _R.POP_MESSAGE, _R.PEEK_MESSAGE, _R.NOTIFICATION,
                     _R.POLLING_INFO), "pull"),
    **dict.fromkeys((_R.ACK_MESSAGE, _R.BATCH_ACK_MESSAGE, _R.CHANGE_MESSAGE_INVISIBLETIME),
                    "ack"),
    **dict.fromkeys((_R.QUERY_MESSAGE, _R.VIEW_MESSAGE_BY_ID), "query_message"),
    _R.HEART_BEAT: "heartbeat",
    **dict.fromkeys((_R.UNREGISTER_CLIENT, _R.CHECK_CLIENT_CONFIG), "client_manager"),
    **dict.fromkeys((_R.GET_CONSUMER_LIST_BY_GROUP, _R.UPDATE_CONSUMER_OFFSET,
                     _R.QUERY_CONSUMER_OFFSET), "consumer_manager"),
    _R.END_TRANSACTION: "transaction",
    **dict.fromkeys((_R.SEND_REPLY_MESSAGE, _R.SEND_REPLY_MESSAGE_V2), "reply"),
}  # fmt: skip
WATERMARK_PROCESSORS = (*dict.fromkeys(PROCESSORS.values()), "admin")


@dataclass
class ConsumerConnection:
    """One consumer client's connection, as RocketMQ 5's consumer_connections labels it."""

    group: str
    language: str
    version: str
    consume_mode: str


@dataclass
class RingState:
    """A producer ring of this host: its group, slot, bytes in use, whether it is fenced
    (the writer no longer reads it) and whether it is the broker's own (an agent's)."""

    group: str
    slot: int
    capacity: int
    used: int
    fenced: bool
    own: bool


@dataclass
class SupervisorNumbers:
    """What the supervisor answers (see the module docstring)."""

    gets: dict[Key, int] = field(default_factory=dict)  # messages got since the start
    got_bytes: dict[Key, int] = field(default_factory=dict)  # their records' bytes
    offsets: dict[Key, dict[int, int]] = field(default_factory=dict)  # committed, by queue id
    groups: int = 0  # subscription groups
    consumers: list[ConsumerConnection] = field(default_factory=list)
    rings: list[RingState] = field(default_factory=list)
    permission: int = 0  # brokerPermission now (updateBrokerConfig changes it)
    # producers heartbeating over TCP, as (language, version) per group membership
    tcp_producers: list[tuple[str, str]] = field(default_factory=list)
    events: EventCounts = field(default_factory=EventCounts)
    # requests waiting for a worker, by RocketMQ's processor name (every one present)
    watermarks: dict[str, int] = field(default_factory=dict)


def processor_watermarks(queued: dict[int, int]) -> dict[str, int]:
    """``queued`` (requests waiting, by request code) by RocketMQ's processor names."""
    marks = dict.fromkeys(WATERMARK_PROCESSORS, 0)
    for code, n in queued.items():
        marks[PROCESSORS.get(code, "admin")] += n
    return marks


def collect(ctx: BrokerContext) -> SupervisorNumbers:
    """The numbers now: the gets as of housekeeping's last look at the consumers' rows
    (once a second)."""
    offsets = {}
    for group in ctx.offsets.groups():
        for topic in ctx.offsets.topics_of_group(group):
            offsets[(group, topic)] = ctx.offsets.offsets(group, topic)
    consumers = []
    for group in ctx.consumers.groups():
        info = ctx.consumers.group_info(group)
        if info is None:
            continue
        mode = CONSUME_MODES.get(info["consumeType"], info["consumeType"].lower())
        consumers += [
            ConsumerConnection(group, str(c["language"]).lower(), str(c["version"]), mode)
            for c in info["connectionSet"]
        ]
    rings = [
        RingState(
            row["group"],
            row["slot"],
            row["ring_bytes"],
            row["used_bytes"],
            bool(row["fenced"]),
            row["group"].startswith(OWN_RING_PREFIX),
        )
        for row in ctx.clients.stats()
        if row["kind"] == "producer" and "ring_bytes" in row
    ]
    return SupervisorNumbers(
        gets=ctx.gets.counts(),
        got_bytes=ctx.gets.sizes(),
        offsets=offsets,
        groups=len(ctx.subscription_groups.all()),
        consumers=consumers,
        rings=rings,
        permission=ctx.config.broker_permission,
        tcp_producers=[(c.language.lower(), str(c.version)) for c in ctx.producers.members()],
        events=ctx.events.snapshot(),
        watermarks=processor_watermarks(
            ctx.server.queued_requests() + Counter(ctx.events.data_server_queued)
        ),
    )


def answer(channel: Connection, ctx: BrokerContext) -> None:
    """Housekeeping: answer the metrics process's question, if it asked one."""
    if channel.poll(0):
        channel.recv()
        channel.send(collect(ctx))
