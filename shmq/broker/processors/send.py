"""SEND_MESSAGE(10), SEND_MESSAGE_V2(310) and SEND_BATCH_MESSAGE(320) over TCP: RocketMQ
4.9's ``SendMessageProcessor`` for clients that are not on the broker's host.

A request becomes ring records exactly like a producer's: the broker checks the header as
4.9's ``msgCheck`` does (topic name, system topics, auto-create from the request's
``defaultTopicQueueNums``, queue id), rewrites what 4.9's broker rewrites (``WAIT`` dropped
and ``CLUSTER`` added; a half message into ``RMQ_SYS_TRANS_HALF_TOPIC``, a delayed or timer
message into its system topic, with the functions the producer's rings use; a
``%RETRY%`` send past its group's maximum reconsume times into ``%DLQ%``), encodes all of
a request's records with one ``encode_batch`` call and appends them to the broker's TCP
ring in one ``append_many``: a batch of 1,000 messages is one append. Everything is checked
before anything is appended, so a batch is stored whole or not at all. A send that waits
for its store (``WAIT`` not false) is answered once it is as durable as the broker
promises (``ipc.durability``: flushed in SYNC_FLUSH, acknowledged by a slave on a
SYNC_MASTER), or with 4.9's FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE.

The response header is 4.9's ``SendMessageResponseHeader``: msgId, the offset message id (a
batch's joined by commas); queueId, the queue the request named (or drew at random), even
when the message went to a system topic or the DLQ; queueOffset, the first record's in the
queue it went to; and RocketMQ 5.3's ``recallHandle`` for a message stored as a timer
message (``shmq.recall_handle``, not for a retry topic's, as 5.3's ``attachRecallHandle``).
Every response carries ``MSG_REGION`` and ``TRACE_ON``, as 4.9's does.
4.9's broker never sets ``transactionId`` (its clients take the unique key), nor does this.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from shmq import half_messages as hm
from shmq.broker.context import DataPathContext
from shmq.broker.processors.send_answers import Appended, SendAnswers
from shmq.broker.processors.send_back import DLQ_NUMS_PER_GROUP
from shmq.broker.processors.send_header import SendHeader, asked_delay
from shmq.broker.topic.config import TopicConfig
from shmq.codec import batch_body, msg_ids
from shmq.codec import record as rec
from shmq.codec.batch_body import BatchBody, decode_batch
from shmq.codec.msg_ids import joined_offset_msg_ids
from shmq.codec.record_rebuild import edit_properties, property_value
from shmq.config import parse_host
from shmq.delay_topics import TIMER_TOPIC, delayed_placement
from shmq.errors import ConfigError, InvalidMessageError, SendError
from shmq.ipc import ring
from shmq.ipc.durability import (
    FLUSH_DISK_TIMEOUT,
    FLUSH_SLAVE_TIMEOUT,
    SEND_OK,
    SLAVE_NOT_AVAILABLE,
    durability,
)
from shmq.message import pack_host
from shmq.names import (
    MAX_TOPIC_LENGTH,
    NOT_ALLOWED_SEND_TOPICS,
    RETRY_GROUP_TOPIC_PREFIX,
    dlq_topic,
    name_problem,
)
from shmq.properties import MAX_PROPERTIES_LENGTH, PROPERTY_UNIQ_KEY
from shmq.recall_handle import RecallHandle
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode, ResponseError
from shmq.remoting.server import Connection, RemotingServer

Rc = ResponseCode
log = logging.getLogger(__name__)

REGION_FIELDS = {"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}  # 4.9's defaults
_WAIT, _TRAN_MSG, _DELAY = b"WAIT", b"TRAN_MSG", b"DELAY"
_UNIQ_KEY = PROPERTY_UNIQ_KEY.encode()
_PLACEMENT_NAMES = {
    b"DELAY",
    b"REAL_TOPIC",
    b"REAL_QID",
    b"TIMER_DELIVER_MS",
    b"TIMER_DELAY_SEC",
    b"TIMER_DELAY_MS",
}
_HALF_NAMES = {b"TRAN_MSG", b"PGROUP", b"REAL_TOPIC", b"REAL_QID"}
_STATUS_CODES = {
    SEND_OK: Rc.SUCCESS,
    FLUSH_DISK_TIMEOUT: Rc.FLUSH_DISK_TIMEOUT,
    FLUSH_SLAVE_TIMEOUT: Rc.FLUSH_SLAVE_TIMEOUT,
    SLAVE_NOT_AVAILABLE: Rc.SLAVE_NOT_AVAILABLE,
}
# a ring refusal as 4.9 answers its PutMessageStatus
_REFUSALS = {
    ring.REASON_TOPIC_NOT_EXIST: Rc.TOPIC_NOT_EXIST,
    ring.REASON_NO_PERMISSION: Rc.NO_PERMISSION,
    ring.REASON_ACL: Rc.NO_PERMISSION,
    ring.REASON_TOO_LARGE: Rc.MESSAGE_ILLEGAL,
    ring.REASON_SYSFLAG: Rc.MESSAGE_ILLEGAL,
    ring.REASON_SERVICE_NOT_AVAILABLE: Rc.SERVICE_NOT_AVAILABLE,
}


@dataclass(frozen=True, slots=True)
class Pending:
    """What the response of an appended request needs besides the writer's answers."""

    topic: str
    queue_id: int
    wait: bool
    last_size: int  # of its last record: the flush must pass its end
    # a reply message's push to its requester (``reply_messages``): None for other sends,
    # "" when pushed, else why not; it, not the store, decides the response's code
    reply: str | None = None
    recall_handle: str | None = None  # a timer message's


def send_response(
    request: RemotingCommand, code: int, fields: dict[str, Any], remark: str | None = None
) -> RemotingCommand:
    """A send's response, with the region fields 4.9 adds to every one."""
    return RemotingCommand.response_to(request, code, remark, {**fields, **REGION_FIELDS})


def pushed_not_stored(request: RemotingCommand, queue_id: int) -> RemotingCommand:
    """4.9's response to a reply its requester took but the store did not (or was not
    asked to): SUCCESS with message id "0"."""
    return send_response(request, Rc.SUCCESS, {"msgId": "0", "queueId": queue_id,
                                               "queueOffset": 0})  # fmt: skip


@dataclass
class Records:
    """What one request appends: its messages as ``encode_batch``'s arrays, where to."""

    topic: str
    queue_id: int
    sysflag: int
    bodies: np.ndarray
    body_offs: np.ndarray
    props: np.ndarray
    props_offs: np.ndarray
    flags: np.ndarray | int
    wait: bool
    recall_handle: str | None = None  # a timer message's


@dataclass
class Prepared:
    """A send request checked and encoded (``RemotingSend.prepare``), not yet appended."""

    request: RemotingCommand
    conn: Connection
    header: SendHeader
    records: Records
    data: np.ndarray
    ends: np.ndarray
    pending: Pending


class RemotingSend:
    """The send codes; appends through a ring of the broker's own."""

    def __init__(self, ctx: DataPathContext) -> None:
        self.ctx = ctx
        self.ring = ctx.producer_ring("shmq-tcp-send")
        self.answers = SendAnswers(self.ring, self._respond, self._fail)
        cfg, store = ctx.config, ctx.config.store
        self.max_body = min(
            store.max_message_size,
            cfg.ring_message_limit,
            store.mapped_file_size_commit_log - 64 * 1024,
        )
        self.store_host = pack_host(*parse_host(store.store_host)).to_bytes(8, "big", signed=True)
        self.cluster = cfg.broker_cluster_name
        self.broker_name = cfg.broker_name
        self.levels = len(store.delay_levels_ms)
        self.max_delay_ms = store.timer_max_delay_sec * 1000
        self.body_crc = -1 if cfg.check_producer_crc else 0  # the writer checks it then
        self.sync_flush = store.sync_flush
        self.sync_master = cfg.broker_role == "SYNC_MASTER"
        self.fallbehind_max = cfg.ha_slave_fallbehind_max
        self.flush_timeout_s = store.sync_flush_timeout / 1000
        warm_up()

    def register(self, server: RemotingServer) -> None:
        for code in (
            RequestCode.SEND_MESSAGE,
            RequestCode.SEND_MESSAGE_V2,
            RequestCode.SEND_BATCH_MESSAGE,
        ):
            server.register(code, self.handle)

    def close(self) -> None:
        self.answers.close()
        self.ring.close()

    def handle(self, request: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        """Check, encode and append the request's messages; the answer thread responds once
        they are stored (``send_answers``). A request refused before anything is appended
        is answered here."""
        try:
            self.append(self.prepare(request, conn))
        except ResponseError as exc:
            return send_response(request, exc.code, {}, exc.remark)
        return None

    def prepare(self, request: RemotingCommand, conn: Connection) -> Prepared:
        """The request checked and its records encoded, ready to append; ``ResponseError``
        names what is wrong with it."""
        header = SendHeader.parse(request)
        self._check_broker()
        cfg = self._topic_config(header)
        queue_id = header.queueId  # answered as 4.9 answers it, wherever the message went
        if header.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            cfg = self._retry_or_dlq(header, cfg)
        batch = bool(header.batch) or request.code == RequestCode.SEND_BATCH_MESSAGE
        records = (self._batch if batch else self._single)(header, cfg, request.body)
        data, ends = encode_records(records, self._fields(header, records, conn), self.max_body)
        pending = Pending(records.topic, queue_id, records.wait, int(ends[-1] - ends[-2]),
                          recall_handle=records.recall_handle)  # fmt: skip
        return Prepared(request, conn, header, records, data, ends, pending)

    def append(self, prepared: Prepared) -> None:
        """Append prepared records; the answer thread responds (``ResponseError`` when
        they cannot be appended in time)."""
        appended = Appended(prepared.request, prepared.conn, prepared.pending)
        self.answers.append(appended, prepared.data, prepared.ends)

    def _fields(self, header: SendHeader, records: Records, conn: Connection) -> np.ndarray:
        """The per-record fields ``encode_batch`` takes, from the header and the peer."""
        n = records.body_offs.shape[0] - 1
        fields = np.zeros(n, dtype=rec.ENCODE_ROW)
        fields["queue_id"] = records.queue_id
        fields["flag"] = records.flags
        fields["sysflag"] = records.sysflag
        fields["born_ts"] = header.bornTimestamp
        host, _, port = conn.peer.rpartition(":")
        fields["born_host"] = pack_host(host, int(port))
        fields["reconsume_times"] = header.reconsumeTimes or 0
        fields["body_crc"] = self.body_crc
        return fields

    def _respond(self, appended: Appended, rows: np.ndarray) -> RemotingCommand:
        """The response to a request whose records the writer answered (``rows``): SUCCESS
        or FLUSH_DISK_TIMEOUT, both stored; a refusal as 4.9 answers its put status."""
        pending: Pending = appended.context
        n = rows.shape[0]
        status = rows[:, 0] & 0xFFFF
        refused = np.flatnonzero(status == ring.REJECTED)
        if refused.size:
            reason = int(rows[refused[0], 0] >> 16) & 0xFFFF
            stored = f" ({n - refused.size} of {n} were stored)" if refused.size < n else ""
            raise ResponseError(
                _REFUSALS.get(reason, Rc.SYSTEM_ERROR),
                f"the broker refused the message: {ring.REASONS[reason]}{stored}",
            )
        phys = rows[:, 2]
        code = self._durability(pending.wait, int(phys[-1]) + pending.last_size)
        fields = {
            "msgId": joined_offset_msg_ids(self.store_host, phys),
            "queueId": pending.queue_id,
            "queueOffset": int(rows[0, 1]),
        }
        if pending.recall_handle is not None:
            fields["recallHandle"] = pending.recall_handle
        if pending.reply is not None:  # 4.9's reply: the push decides, the store is noted
            code = Rc.SYSTEM_ERROR if pending.reply else Rc.SUCCESS
            return send_response(appended.request, code, fields, pending.reply or None)
        return send_response(appended.request, code, fields)

    @staticmethod
    def _fail(appended: Appended, exc: ResponseError) -> RemotingCommand:
        pending: Pending = appended.context
        if pending.reply == "":  # pushed, not stored: 4.9 answers SUCCESS with id "0"
            log.warning("a reply pushed to its requester was not stored: %s", exc.remark)
            return pushed_not_stored(appended.request, pending.queue_id)
        return send_response(appended.request, exc.code, {}, exc.remark)

    def _check_broker(self) -> None:
        cfg = self.ctx.config
        if cfg.broker_role == "SLAVE":
            raise ResponseError(
                Rc.SERVICE_NOT_AVAILABLE, "message store is slave mode, so putMessage is forbidden"
            )
        if not cfg.broker_permission & 2:
            raise ResponseError(
                Rc.NO_PERMISSION, f"the broker[{cfg.broker_ip1}] sending message is forbidden"
            )

    def _topic_config(self, header: SendHeader) -> TopicConfig:
        """4.9's ``msgCheck``: the topic's config (auto-created when allowed), its queue id
        in range; then ``handleRetryAndDLQ`` may send the message to the DLQ instead."""
        topic = header.topic
        problem = name_problem("topic", topic, MAX_TOPIC_LENGTH)
        if problem:
            raise ResponseError(Rc.SYSTEM_ERROR, problem)
        if topic in NOT_ALLOWED_SEND_TOPICS:
            raise ResponseError(
                Rc.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden."
            )
        topics = self.ctx.topics
        cfg = topics.get(topic)
        if cfg is None:
            try:
                cfg = topics.create_auto(topic, header.defaultTopicQueueNums)
            except ConfigError:
                if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                    raise ResponseError(
                        Rc.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
                    ) from None
                cfg = self.ctx.topic_publisher.ensure(topic, 1)
            else:
                self.ctx.topic_publisher.create(cfg)
        if not cfg.is_writable:
            raise ResponseError(
                Rc.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden"
            )
        if header.queueId >= max(cfg.write_queue_nums, cfg.read_queue_nums):
            raise ResponseError(
                Rc.SYSTEM_ERROR,
                f"request queueId[{header.queueId}] is illegal, topic {topic} has "
                f"{cfg.write_queue_nums} write queues",
            )
        if header.queueId >= cfg.write_queue_nums:
            raise ResponseError(
                Rc.SYSTEM_ERROR,
                f"request queueId[{header.queueId}] is not writable, topic "
                f"{topic} has {cfg.write_queue_nums} write queues",
            )
        if header.queueId < 0:
            header.queueId = random.randrange(cfg.write_queue_nums)
        return cfg

    def _retry_or_dlq(self, header: SendHeader, cfg: TopicConfig) -> TopicConfig:
        """A send to ``%RETRY%<group>`` whose reconsume times reached the group's maximum
        (or the request's) goes to ``%DLQ%<group>`` queue 0, undelayed."""
        group = header.topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
        group_cfg = self.ctx.subscription_groups.find(
            group, self.ctx.config.auto_create_subscription_group
        )
        max_times = header.maxReconsumeTimes
        if max_times is None:
            max_times = group_cfg.retry_max_times
        if (header.reconsumeTimes or 0) < max_times:
            return cfg
        dlq = self.ctx.topic_publisher.ensure(dlq_topic(group), DLQ_NUMS_PER_GROUP)
        original = property_value((header.properties or "").encode(), b"RETRY_TOPIC")
        self.ctx.events.dead_lettered(group, original or header.topic)
        header.topic, header.queueId = dlq.topic_name, 0
        header.properties = edit_properties(
            (header.properties or "").encode(), remove={_DELAY}
        ).decode("utf-8", "replace")
        return dlq

    def _single(self, header: SendHeader, cfg: TopicConfig, body: bytes) -> Records:
        """One message: 4.9's properties rewrite, then a half, delayed or timer message is
        placed in its system topic as the producer's rings place it."""
        props = (header.properties or "").encode()
        wait = (property_value(props, _WAIT) or "true").lower() == "true"
        props = edit_properties(props, remove={_WAIT}, add={"CLUSTER": self.cluster})
        topic, qid = header.topic, header.queueId
        sysflag = header.sysFlag
        recall_handle = None
        if (property_value(props, _TRAN_MSG) or "").lower() == "true":
            group = property_value(props, hm.PGROUP.encode()) or header.producerGroup
            props = edit_properties(props, remove=_HALF_NAMES)
            props += hm.half_properties(topic, qid, group)
            topic, qid = hm.HALF_TOPIC, hm.HALF_QUEUE_ID
            sysflag &= ~rec.SYSFLAG_TRANSACTION_MASK
        elif sysflag & rec.SYSFLAG_TRANSACTION_MASK == rec.SYSFLAG_TRANSACTION_PREPARED:
            raise ResponseError(
                Rc.MESSAGE_ILLEGAL,
                "sysFlag marks a prepared transaction "
                "message but its properties have no TRAN_MSG=true",
            )
        else:
            level, deliver_ms = asked_delay(props)
            if level or deliver_ms:
                try:
                    topic, qid, extra = delayed_placement(
                        topic,
                        qid,
                        level,
                        deliver_ms,
                        self.levels,
                        self.max_delay_ms,
                        time.time_ns() // 1_000_000,
                    )
                except InvalidMessageError as exc:
                    raise ResponseError(Rc.MESSAGE_ILLEGAL, str(exc)) from None
                recall_handle = self._recall_handle(header.topic, topic, deliver_ms, props)
                props = edit_properties(props, remove=_PLACEMENT_NAMES) + extra
        if len(props) > MAX_PROPERTIES_LENGTH:
            raise ResponseError(
                Rc.MESSAGE_ILLEGAL,
                f"properties are {len(props)} bytes, above the limit {MAX_PROPERTIES_LENGTH}",
            )
        return Records(
            topic,
            qid,
            self._sysflag(sysflag, cfg),
            np.frombuffer(body, dtype=np.uint8),
            np.array([0, len(body)], dtype=np.int64),
            np.frombuffer(props, dtype=np.uint8),
            np.array([0, len(props)], dtype=np.int64),
            header.flag,
            wait,
            recall_handle,
        )

    def _recall_handle(
        self, real_topic: str, stored_topic: str, deliver_ms: int, props: bytes
    ) -> str | None:
        """The recall handle of a message stored in ``stored_topic`` for ``deliver_ms``:
        a timer message's that has a unique key (the handle names it) and is not a retry."""
        uniq = property_value(props, _UNIQ_KEY)
        if stored_topic != TIMER_TOPIC or uniq is None:
            return None
        if real_topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return None
        return RecallHandle.for_timer(real_topic, self.broker_name, deliver_ms, uniq).encode()

    def _batch(self, header: SendHeader, cfg: TopicConfig, body: bytes) -> Records:
        """A batch (4.9's ``asyncSendBatchMessage`` and ``checkMessages``): no transaction
        and no delay, at most ``maxMessageSize`` in all; the header's properties and
        ``CLUSTER`` follow each message's own."""
        if header.sysFlag & rec.SYSFLAG_TRANSACTION_MASK:
            raise ResponseError(Rc.MESSAGE_ILLEGAL, "a batch cannot be transactional")
        props = (header.properties or "").encode()
        if any(asked_delay(props)):
            raise ResponseError(Rc.MESSAGE_ILLEGAL, "a batch cannot be delayed")
        if len(body) > self.ctx.config.store.max_message_size:
            raise ResponseError(
                Rc.MESSAGE_ILLEGAL,
                f"batch body of {len(body)} bytes is above "
                f"maxMessageSize {self.ctx.config.store.max_message_size}",
            )
        wait = (property_value(props, _WAIT) or "true").lower() == "true"
        suffix = edit_properties(props, add={"CLUSTER": self.cluster})
        try:
            batch: BatchBody = decode_batch(body, suffix)
        except InvalidMessageError as exc:
            raise ResponseError(Rc.MESSAGE_ILLEGAL, str(exc)) from None
        return Records(
            header.topic,
            header.queueId,
            self._sysflag(header.sysFlag, cfg),
            batch.bodies,
            batch.body_offs,
            batch.props,
            batch.props_offs,
            batch.flags,
            wait,
        )

    @staticmethod
    def _sysflag(sysflag: int, cfg: TopicConfig) -> int:
        if cfg.topic_filter_type == "MULTI_TAG":
            sysflag |= rec.SYSFLAG_MULTI_TAGS
        return sysflag

    # -- storing ----------------------------------------------------------------------------

    def _durability(self, wait: bool, end: int) -> int:
        """SUCCESS once the send is as durable as the broker promises (``ipc.durability``:
        flushed in SYNC_FLUSH, acknowledged by a slave on a SYNC_MASTER), else the code of
        4.9's status; a failed flush is an error (never SUCCESS)."""
        if not (wait and (self.sync_flush or self.sync_master)):
            return Rc.SUCCESS
        try:
            status = durability(self.ring, end, self.sync_flush, self.sync_master,
                                self.fallbehind_max, self.flush_timeout_s)  # fmt: skip
        except SendError as exc:
            raise ResponseError(Rc.SYSTEM_ERROR, str(exc)) from None
        return _STATUS_CODES[status]


def encode_records(
    records: Records, fields: np.ndarray, max_body: int
) -> tuple[np.ndarray, np.ndarray]:
    """The records encoded back to back and their ends (``encode_batch``); a body over
    ``max_body`` bytes is refused as RocketMQ's MESSAGE_ILLEGAL."""
    n = fields.shape[0]
    topic = np.frombuffer(records.topic.encode(), dtype=np.uint8)
    sizes = np.empty(n, dtype=np.int64)
    bad = rec.batch_sizes(records.body_offs, topic.shape[0], records.props_offs, max_body, sizes)
    if bad >= 0:
        size = int(records.body_offs[bad + 1] - records.body_offs[bad])
        raise ResponseError(
            Rc.MESSAGE_ILLEGAL,
            f"message {bad}: body of {size} bytes; "
            f"bodies must be 1..{max_body} bytes (maxMessageSize)",
        )
    ends = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=ends[1:])
    data = np.empty(int(ends[-1]), dtype=np.uint8)
    rec.encode_batch(
        data, 0, 0, topic, records.bodies, records.body_offs, records.props,
        records.props_offs, fields,
    )  # fmt: skip
    return data, ends


def warm_up() -> None:
    """Load the kernels a batch request runs (decode, encode) before the first comes."""
    msg_ids.warm_up()
    batch = decode_batch(batch_body.warm_up(), b"CLUSTER\x01c\x02")
    records = Records("WarmUp", 0, 0, batch.bodies, batch.body_offs, batch.props,
                      batch.props_offs, batch.flags, True)  # fmt: skip
    encode_records(records, np.zeros(1, dtype=rec.ENCODE_ROW), 1 << 20)
