"""RocketMQ 5's POP requests over remoting: POP_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE,
CHANGE_MESSAGE_INVISIBLETIME, PEEK_MESSAGE, NOTIFICATION and POLLING_INFO (RocketMQ's
``PopMessageProcessor``, ``AckMessageProcessor``, ``ChangeInvisibleTimeProcessor``,
``PeekMessageProcessor``, ``NotificationProcessor``, ``PollingInfoProcessor``), and shmq's
own GET_POP_STATUS for ``shmq admin pop-status``.

One implementation serves every POP client: RocketMQ 5 remoting clients, the gRPC proxy
(a process of the broker's group that sends these requests) and shmq's SimpleConsumer. A
pop reads queues by the store's one rule (``store.fetch``), from where the group's last pop
of each queue ended (``pop.service``), and records a checkpoint before it answers; a pop
that finds nothing waits (long polling, ``pull_hold``) up to its ``pollTime``. A pop whose
``expType`` is SQL92 (with ``enablePropertyFilter``) takes only the messages its expression
matches; the others are passed over as a tag filter's are, and the group's offset moves past
them.

As RocketMQ: a pop of queue -1 reads every readable queue of the topic, from a random one
on; ``popFromRetryProbability`` percent of pops read the group's POP retry topic first,
the others after the topic when they are not full; a FIFO pop (``order``) never reads the
retry topic, skips a queue whose last pop is not acked and still invisible, and pops the
messages not acked again once their invisible time passes (their consumed count, in
``orderCountInfo``, is their reconsume times). Messages from the retry topic go back under
their original topic with ``POP_CK`` set, as RocketMQ's broker re-encodes them.

shmq's extension: ``shmqLocal=true`` on POP_MESSAGE (a SimpleConsumer on the broker's host)
answers the same headers and no body, since that client reads the records from the
store's files itself; such a pop may take up to ``LOCAL_MAX_NUMS`` messages.
"""

from __future__ import annotations

import base64
import json
import random
import struct
import time
from typing import Any

import numpy as np

from shmq.broker.context import BrokerContext
from shmq.broker.pop.service import Popped, PopService
from shmq.broker.processors.pull import SQL92, check_expression_type, compiled_sql, sql_matched
from shmq.broker.processors.pull_hold import HeldPull, PullHold
from shmq.broker.ring_puts import broker_ring, put_records, refusal
from shmq.codec import record as rec
from shmq.codec.record_rebuild import edit_properties, property_value, rebuild_record
from shmq.errors import FilterExpressionError, InvalidMessageError
from shmq.filter.sql92 import SqlFilter
from shmq.ipc import counters as cn
from shmq.names import dlq_topic
from shmq.pop_receipt import (
    ORDER_REVIVE_QID,
    RETRY_NONE,
    RETRY_V1,
    InvalidReceiptError,
    Receipt,
    msg_offset_entry,
    order_count_entries,
    parse_receipt,
    pop_retry_topic,
    start_offset_entry,
)
from shmq.remoting.custom_header import BOOL, INT, LONG, STR, Spec, decode_header
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode, ResponseError
from shmq.remoting.server import Connection, RemotingServer
from shmq.store.fetch import LOCAL, QueueBounds, transfer_limits
from shmq.store.results import GetStatus, parse_tag_filter

Rc = ResponseCode
MAX_NUMS = 32  # RocketMQ's limit on maxMsgNums
LOCAL_MAX_NUMS = 1024
POLL_LATE_MS = 500  # a pop that arrives this much after its poll time ended is answered so
INIT_MIN, INIT_MAX = 0, 1
_QUEUE_OFFSET_POS = 20  # QUEUEOFFSET, then PHYSICALOFFSET, in a stored record
_OFFSETS = struct.Struct(">qq")
_RETRY_TOPIC = b"RETRY_TOPIC"

# the fields every POP request header starts with (the queue it names)
_QUEUE: Spec = {
    "consumerGroup": (STR, True),
    "topic": (STR, True),
    "queueId": (INT, True),
}
POP_HEADER: Spec = {
    **_QUEUE,
    "maxMsgNums": (INT, True),
    "invisibleTime": (LONG, True),
    "pollTime": (LONG, True),
    "bornTime": (LONG, False),
    "initMode": (INT, True),
    "expType": (STR, False),
    "exp": (STR, False),
    "order": (BOOL, False),
    "attemptId": (STR, False),
    "shmqLocal": (BOOL, False),
}
ACK_HEADER: Spec = {
    **_QUEUE,
    "extraInfo": (STR, True),
    "offset": (LONG, True),
}
CHANGE_HEADER: Spec = {**ACK_HEADER, "invisibleTime": (LONG, True)}
PEEK_HEADER: Spec = {
    **_QUEUE,
    "maxMsgNums": (INT, True),
}
NOTIFICATION_HEADER: Spec = {
    **_QUEUE,
    "pollTime": (LONG, True),
    "bornTime": (LONG, False),
    "order": (BOOL, False),
    "attemptId": (STR, False),
}
POLLING_INFO_HEADER: Spec = _QUEUE


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class PopRequest:
    """A POP_MESSAGE's fields, checked (RocketMQ's checks, in its order)."""

    def __init__(
        self, processor: PopProcessor, request: RemotingCommand, peek: bool = False
    ) -> None:
        ctx = processor.ctx
        h = decode_header(request, PEEK_HEADER if peek else POP_HEADER)
        self.group, self.topic, self.queue_id = h["consumerGroup"], h["topic"], h["queueId"]
        self.max_nums = h["maxMsgNums"]
        self.local = bool(h.get("shmqLocal"))
        self.order = bool(h.get("order"))
        self.attempt_id = h.get("attemptId") or ""
        self.invisible = h.get("invisibleTime") or 0
        self.poll_ms = h.get("pollTime") or 0
        self.init_mode = h.get("initMode", INIT_MIN) or INIT_MIN
        now = now_ms()
        born = h.get("bornTime") or now
        if self.poll_ms > 0 and now - born > self.poll_ms + POLL_LATE_MS:
            raise ResponseError(
                Rc.POLLING_TIMEOUT,
                "the broker's poll time is over before "
                f"the request arrived ({now - born} ms after it was sent)",
            )
        self.poll_ms = max(0, min(self.poll_ms, born + self.poll_ms - now))
        cfg = ctx.config
        if not cfg.broker_permission & 4:
            raise ResponseError(
                Rc.NO_PERMISSION, f"the broker[{cfg.broker_ip1}] peeking message is forbidden"
            )
        limit = LOCAL_MAX_NUMS if self.local else MAX_NUMS
        if not 0 < self.max_nums <= limit:
            raise ResponseError(
                Rc.INVALID_PARAMETER, f"the broker restrict msg number between 1 and {limit}"
            )
        if self.invisible < 0:
            raise ResponseError(Rc.INVALID_PARAMETER, "invisibleTime must not be negative")
        topic_cfg = ctx.topics.get(self.topic)
        if topic_cfg is None:
            raise ResponseError(
                Rc.TOPIC_NOT_EXIST, f"topic[{self.topic}] not exist, apply first please!"
            )
        if not topic_cfg.is_readable:
            raise ResponseError(
                Rc.NO_PERMISSION, f"the topic[{self.topic}] peeking message is forbidden"
            )
        self.read_queues = topic_cfg.read_queue_nums
        if self.queue_id >= self.read_queues or self.queue_id < -1:
            raise ResponseError(
                Rc.INVALID_PARAMETER,
                f"queueId[{self.queue_id}] is illegal, topic:[{self.topic}] "
                f"topicConfig.readQueueNums:[{self.read_queues}]",
            )
        group_cfg = ctx.subscription_groups.find(self.group, cfg.auto_create_subscription_group)
        if not group_cfg.consume_enable:
            raise ResponseError(Rc.NO_PERMISSION, f"subscription group no permission, {self.group}")
        self.max_times = group_cfg.retry_max_times
        kind = h.get("expType")
        check_expression_type(kind, cfg.enable_property_filter)
        # a SQL92 filter reads each unit's properties (never a retry topic's, as in pull)
        self.sql: SqlFilter | None = None
        self.codes = None
        try:
            if kind == SQL92:
                self.sql = compiled_sql(h.get("exp"))
            else:
                self.codes = parse_tag_filter(h.get("exp"))
        except FilterExpressionError as exc:
            raise ResponseError(
                Rc.SUBSCRIPTION_PARSE_FAILED, f"parse the consumer's subscription failed: {exc}"
            ) from None
        except InvalidMessageError:
            raise ResponseError(
                Rc.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed"
            ) from None
        self.retry_topic = pop_retry_topic(self.group, self.topic)

    def queues(self, ctx: BrokerContext, r: int) -> list[tuple[str, str, int]]:
        """``(real topic, retry flag, queue id)`` in the order this pop reads them."""
        ids = (
            [self.queue_id]
            if self.queue_id >= 0
            else [(r + i) % self.read_queues for i in range(self.read_queues)]
        )
        normal = [(self.topic, RETRY_NONE, q) for q in ids]
        if self.order:
            return normal
        retry_cfg = ctx.topics.get(self.retry_topic)
        retry = (
            []
            if retry_cfg is None
            else [(self.retry_topic, RETRY_V1, q) for q in range(retry_cfg.read_queue_nums)]
        )
        first = r < ctx.config.pop_from_retry_probability
        return retry + normal if first else normal + retry

    def watched(self, ctx: BrokerContext) -> tuple[tuple[str, int], ...]:
        """The queues whose growth wakes this pop when it is held."""
        return tuple((t, q) for t, _, q in self.queues(ctx, 0))


class PopProcessor:
    """The POP request processors over one ``PopService`` (see the module docstring)."""

    def __init__(self, ctx: BrokerContext, pop: PopService) -> None:
        self.ctx = ctx
        self.pop = pop
        self.limits = transfer_limits(ctx.config.store)
        self.file_size = ctx.config.store.mapped_file_size_commit_log
        self.hold = PullHold(
            ctx, self._answer_held, ctx.config.max_pop_polling_size, "shmq-pop-hold"
        )
        self.ring = broker_ring(ctx, "shmq-pop-dlq")  # FIFO messages past their attempts
        ctx.events.pop_inflight = self.inflight

    def register(self, server: RemotingServer) -> None:
        for code, handler in (
            (RequestCode.POP_MESSAGE, self.pop_message),
            (RequestCode.ACK_MESSAGE, self.ack_message),
            (RequestCode.BATCH_ACK_MESSAGE, self.batch_ack_message),
            (RequestCode.CHANGE_MESSAGE_INVISIBLETIME, self.change_invisible_time),
            (RequestCode.PEEK_MESSAGE, self.peek_message),
            (RequestCode.NOTIFICATION, self.notification),
            (RequestCode.POLLING_INFO, self.polling_info),
            (RequestCode.GET_POP_STATUS, self.pop_status),
        ):
            server.register(code, handler)

    def close(self) -> None:
        self.hold.close()
        self.ring.close()

    def inflight(self) -> dict[tuple[str, str], int]:
        """Per (group, topic as stored: a POP retry topic is its own), the messages popped
        and not acked (the metrics' ``rocketmq_consumer_inflight_messages``). Read without
        the POP lock: the checkpoints are copied in one step under the GIL."""
        counts: dict[tuple[str, str], int] = {}
        for ck in list(self.pop.state.checkpoints.values()):
            key = (ck.group, ck.topic)
            counts[key] = counts.get(key, 0) + len(ck.members) - len(ck.acked)
        return counts

    def wake(self) -> None:
        """Held pops look again (revived copies, an unblocked FIFO queue)."""
        self.hold.poke()

    # -- POP_MESSAGE ----------------------------------------------------------------------

    def pop_message(self, request: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        req = PopRequest(self, request)
        response = self._pop(request, req)
        if response is not None or req.poll_ms <= 0:
            return response or self._no_message(request, req)
        held = HeldPull(request, conn, req.watched(self.ctx), 0, req.poll_ms)
        held.seen = self.hold.level(held.queues)
        response = self._pop(request, req)  # a message may have come in meanwhile
        if response is not None:
            return response
        full = self.hold.held() > self.ctx.config.pop_polling_size and (
            self._held_for(req.group, req.topic, req.queue_id) >= self.ctx.config.pop_polling_size
        )
        if full or not self.hold.suspend(held):
            return RemotingCommand.response_to(request, Rc.POLLING_FULL, "POLLING_FULL")
        return None

    def _answer_held(self, held: HeldPull, final: bool) -> RemotingCommand | None:
        if held.request.code == RequestCode.NOTIFICATION:
            return self._notify_answer(held, final)
        try:
            req = PopRequest(self, held.request)
            req.poll_ms = 0
            response = self._pop(held.request, req)
        except ResponseError as exc:
            return RemotingCommand.response_to(held.request, exc.code, exc.remark)
        if response is None and final:
            return self._no_message(held.request, req)
        return response

    def _no_message(self, request: RemotingCommand, req: PopRequest) -> RemotingCommand:
        return RemotingCommand.response_to(
            request,
            Rc.POLLING_TIMEOUT,
            "NO_MESSAGE_IN_QUEUE",
            {
                "popTime": now_ms(),
                "invisibleTime": req.invisible,
                "reviveQid": 0,
                "restNum": 0,
            },
        )

    def _pop(self, request: RemotingCommand, req: PopRequest) -> RemotingCommand | None:
        """The pop's answer with messages, or None when it found none."""
        pop_time = now_ms()
        revive_qid = ORDER_REVIVE_QID if req.order else self.pop.next_revive_qid()
        r = random.randrange(100)
        starts, offsets, counts = [], [], []
        body: list[bytes] = []
        rest = taken = 0
        for topic, flag, queue_id in req.queues(self.ctx, r):
            want = req.max_nums - taken
            if want <= 0:
                rest += max(
                    0,
                    self.ctx.store.max_offset(topic, queue_id)
                    - self.pop.cursor((req.group, topic, queue_id), lambda: 0),
                )
                continue
            got = self._pop_queue(req, topic, queue_id, want, pop_time, revive_qid, body)
            if got is None:
                continue
            start, popped, popped_counts, left = got
            rest += left
            if not popped:
                continue
            taken += len(popped)
            starts.append(start_offset_entry(flag, queue_id, start))
            offsets.append(msg_offset_entry(flag, queue_id, popped))
            if req.order:
                counts += order_count_entries(flag, queue_id, popped_counts)
        if not taken:
            return None
        # the records' bytes as answered (a local pop answers none: its reads count none)
        self.ctx.gets.pulled(req.group, req.topic, taken, sum(map(len, body)))
        fields: dict[str, Any] = {
            "popTime": pop_time,
            "invisibleTime": req.invisible,
            "reviveQid": revive_qid,
            "restNum": rest,
            "startOffsetInfo": ";".join(starts),
            "msgOffsetInfo": ";".join(offsets),
        }
        if req.order:
            fields["orderCountInfo"] = ";".join(counts)
        return RemotingCommand.response_to(request, Rc.SUCCESS, "FOUND", fields, b"".join(body))

    def _pop_queue(
        self,
        req: PopRequest,
        topic: str,
        queue_id: int,
        want: int,
        pop_time: int,
        revive_qid: int,
        body: list[bytes],
    ) -> tuple[int, list[int], dict[int, int], int] | None:
        """Pop up to ``want`` messages of one queue: ``(start offset, offsets popped, FIFO
        consumed counts, messages left after them)``, or None for a blocked FIFO queue."""
        store, key = self.ctx.store, (req.group, topic, queue_id)
        high = store.max_offset(topic, queue_id)
        known = self.pop.cursor(key, lambda: -1)  # -1: never popped, no committed offset
        if 0 <= high <= known and not req.order:
            return known, [], {}, 0  # nothing new: the common case of a long poll's re-run
        with self.pop.lock:
            last = self.pop.order_checkpoint(key) if req.order else None
            again = False  # the same request again: the same messages, not counted twice
            if last is not None and last.unacked:
                again = bool(req.attempt_id) and req.attempt_id == last.attempt_id
                if not again and pop_time < last.blocked_until():
                    return None
            low = store.min_offset(topic, queue_id, 1.0)
            start = self.pop.cursor(key, lambda: self._initial(req, topic, queue_id, low, high))
            start = min(max(start, low), high)
            if start >= high:
                self.pop.record_pop(
                    Popped(
                        req.group,
                        topic,
                        queue_id,
                        start,
                        pop_time,
                        req.invisible,
                        revive_qid,
                        [],
                        start,
                    )
                )
                return start, [], {}, 0
            popped, next_offset, records = self._read(req, topic, queue_id, start, want, high)
            counts: dict[int, int] = {}
            dead: list[int] = []
            if req.order:
                if last is not None:
                    popped = [o for o in popped if o not in last.acked]
                    bump = 0 if again else 1
                    counts = {
                        o: last.counts.get(o, -bump) + bump if o in last.members else 0
                        for o in popped
                    }
                else:
                    counts = dict.fromkeys(popped, 0)
                dead = [o for o in popped if 0 <= req.max_times < counts[o]]
                if dead:
                    self._to_dlq(req.group, topic, queue_id, dead, records)
            self.pop.record_pop(
                Popped(
                    req.group,
                    topic,
                    queue_id,
                    start,
                    pop_time,
                    req.invisible,
                    revive_qid,
                    popped,
                    next_offset,
                    counts,
                    tuple(dead),
                    req.attempt_id,
                )
            )
        live = [o for o in popped if o not in dead]
        if not req.local:
            retry = topic != req.topic
            for offset in live:
                record = records[offset]
                if retry:
                    record = self._as_original(
                        record, req, topic, queue_id, offset, start, pop_time, revive_qid
                    )
                body.append(record)
        return start, live, {o: counts[o] for o in live} if req.order else {}, high - next_offset

    def _initial(self, req: PopRequest, topic: str, queue_id: int, low: int, high: int) -> int:
        """Where a group's first pop of a queue begins (RocketMQ's initPopOffset): the
        first message for MIN mode and retry topics; for MAX mode the first when the queue
        still starts at 0 (a young queue: its messages are all new to the group), else the
        last."""
        if req.init_mode == INIT_MIN or topic != req.topic or low <= 0:
            return low
        return max(high - 1, 0)

    def _read(
        self, req: PopRequest, topic: str, queue_id: int, start: int, want: int, high: int
    ) -> tuple[list[int], int, dict[int, bytes]]:
        """The queue offsets read from ``start`` (the tag filter's), where the next read
        begins, and (unless the client reads the store itself) each one's record."""
        words = self.ctx.counters.words
        bounds = QueueBounds(
            start if start < high else 0,
            high,
            cn.load(words, cn.MIN_PHYSICAL_OFFSET),
            cn.load(words, cn.WRITE_OFFSET),
            self.file_size,
        )
        limits = LOCAL if req.local else self.limits
        records: dict[int, bytes] = {}
        with self.ctx.store.reading() as reader:
            fetch = reader.fetch(topic, queue_id, start, want, req.codes, bounds, limits)
            if fetch.status is GetStatus.FOUND and req.sql is not None and topic == req.topic:
                fetch = sql_matched(reader, topic, queue_id, fetch, req.sql)
            if fetch.status is not GetStatus.FOUND:
                return [], max(fetch.next_begin_offset, start), records
            if req.local and not req.order:
                return fetch.queue_offsets.tolist(), fetch.next_begin_offset, records
            for mf, rows, ok in reader.records(
                topic, queue_id, fetch.phys, fetch.sizes, fetch.queue_offsets
            ):
                for i in ok.tolist():
                    pos, size = int(rows["pos"][i]), int(rows["size"][i])
                    records[int(rows["queue_offset"][i])] = mf.buf[pos : pos + size].tobytes()
        return sorted(records), fetch.next_begin_offset, records

    def _as_original(
        self,
        record: bytes,
        req: PopRequest,
        topic: str,
        queue_id: int,
        offset: int,
        start: int,
        pop_time: int,
        revive_qid: int,
    ) -> bytes:
        """A retry topic's record under its original topic, with ``POP_CK`` (RocketMQ's
        broker does this unless ``popResponseReturnActualRetryTopic``)."""
        buf, row, props = _parsed(record)
        original = property_value(props, _RETRY_TOPIC) or req.topic
        receipt = Receipt(
            start,
            pop_time,
            req.invisible,
            revive_qid,
            RETRY_V1,
            self.ctx.config.broker_name,
            queue_id,
            offset,
        )
        props = edit_properties(props, add={"POP_CK": receipt.encode()})
        out = rebuild_record(buf, row, original.encode(), queue_id, props)
        queue_offset, phys = _OFFSETS.unpack_from(record, _QUEUE_OFFSET_POS)
        _OFFSETS.pack_into(out, _QUEUE_OFFSET_POS, queue_offset, phys)
        return bytes(out)

    def _to_dlq(
        self, group: str, topic: str, queue_id: int, dead: list[int], records: dict[int, bytes]
    ) -> None:
        """FIFO messages popped more than the group's ``retryMaxTimes``: to its DLQ."""
        target = self.ctx.topic_publisher.ensure(dlq_topic(group), 1).topic_name.encode()
        out = []
        for offset in dead:
            record = records.get(offset)
            if record is None:
                continue
            buf, row, props = _parsed(record)
            props = edit_properties(props, add={"RETRY_TOPIC": topic})
            out.append(rebuild_record(buf, row, target, 0, props))
        for answer in put_records(self.ring, self.pop.lock, out, "POP dead letter"):
            error = refusal(answer, "POP dead letter")
            if error is not None:
                raise error
        self.pop.dead_lettered(group, topic, len(out))
        self.ctx.events.dead_lettered(group, topic, len(out))

    # -- ACK_MESSAGE, BATCH_ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME ----------------------

    def _receipt(self, h: dict[str, Any]) -> tuple[str, str, Receipt]:
        """The group, real topic and receipt of an ack or a change, checked as RocketMQ's
        (the topic, the queue id, the offset within the queue)."""
        try:
            receipt = parse_receipt(h["extraInfo"])
        except InvalidReceiptError as exc:
            raise ResponseError(Rc.INVALID_PARAMETER, f"invalid extraInfo: {exc}") from None
        topic, queue_id = h["topic"], h["queueId"]
        topic_cfg = self.ctx.topics.get(topic)
        if topic_cfg is None:
            raise ResponseError(
                Rc.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
            )
        if not 0 <= queue_id < topic_cfg.read_queue_nums or queue_id != receipt.queue_id:
            raise ResponseError(
                Rc.MESSAGE_ILLEGAL, f"queueId[{queue_id}] is illegal, topic:[{topic}]"
            )
        offset = h["offset"]
        low = self.ctx.store.min_offset(topic, queue_id, 1.0)
        if not low <= offset <= self.ctx.store.max_offset(topic, queue_id) or (
            offset != receipt.queue_offset
        ):
            raise ResponseError(
                Rc.NO_MESSAGE, f"offset is illegal, key:{topic}@{queue_id}, offset:{offset}"
            )
        return h["consumerGroup"], topic, receipt

    def ack_message(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        group, topic, receipt = self._receipt(decode_header(request, ACK_HEADER))
        if not self.pop.ack(group, topic, receipt, [receipt.queue_offset]):
            raise ResponseError(Rc.MESSAGE_ILLEGAL, "the offset is not in the order pop")
        if receipt.is_order:
            self.wake()  # the queue may be unblocked
        return RemotingCommand.response_to(request)

    def batch_ack_message(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        try:
            acks = json.loads(bytes(request.body or b"")).get("acks") or []
            parsed = [_batch_ack(a) for a in acks]
        except (ValueError, TypeError, AttributeError, KeyError) as exc:
            raise ResponseError(Rc.INVALID_PARAMETER, f"bad batch ack body: {exc}") from None
        if not parsed:
            raise ResponseError(Rc.NO_MESSAGE, "no ack in the request")
        order = False
        for group, topic, receipt, offsets in parsed:
            self.pop.ack(group, receipt.real_topic(topic, group), receipt, offsets)
            order |= receipt.is_order
        if order:
            self.wake()
        return RemotingCommand.response_to(request)

    def change_invisible_time(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        h = decode_header(request, CHANGE_HEADER)
        group, topic, receipt = self._receipt(h)
        if h["invisibleTime"] < 0:
            raise ResponseError(Rc.INVALID_PARAMETER, "invisibleTime must not be negative")
        pop_time, invisible = self.pop.change_invisible(
            group, topic, receipt, h["invisibleTime"], now_ms()
        )
        return RemotingCommand.response_to(
            request,
            Rc.SUCCESS,
            None,
            {
                "popTime": pop_time,
                "invisibleTime": invisible,
                "reviveQid": receipt.revive_qid,
            },
        )

    # -- PEEK_MESSAGE, NOTIFICATION, POLLING_INFO, GET_POP_STATUS -------------------------

    def peek_message(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        req = PopRequest(self, request, peek=True)
        body: list[bytes] = []
        rest = 0
        for topic, _, queue_id in req.queues(self.ctx, random.randrange(100)):
            want = req.max_nums - len(body)
            high = self.ctx.store.max_offset(topic, queue_id)
            start = self.pop.cursor((req.group, topic, queue_id), lambda: 0)
            start = max(start, self.ctx.store.min_offset(topic, queue_id, 1.0))
            if want > 0 and start < high:
                popped, next_offset, records = self._read(req, topic, queue_id, start, want, high)
                body += [records[o] for o in popped]
                start = next_offset
            rest += max(0, high - start)
        if not body:
            return RemotingCommand.response_to(
                request, Rc.PULL_NOT_FOUND, "no message", {"restNum": rest}
            )
        return RemotingCommand.response_to(
            request,
            Rc.SUCCESS,
            None,
            {
                "popTime": 0,
                "invisibleTime": 0,
                "reviveQid": 0,
                "restNum": rest,
            },
            b"".join(body),
        )

    def notification(self, request: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        h = decode_header(request, NOTIFICATION_HEADER)
        req = self._notify_request(request)
        if self._has_message(req) or h["pollTime"] <= 0:
            return self._has_msg(request, self._has_message(req))
        held = HeldPull(request, conn, req.watched(self.ctx), 0, req.poll_ms)
        held.seen = self.hold.level(held.queues)
        if not self.hold.suspend(held):
            return self._has_msg(request, False, polling_full=True)
        return None

    def _notify_request(self, request: RemotingCommand) -> PopRequest:
        """A NOTIFICATION as the pop it asks about (same checks)."""
        fields = dict(request.ext_fields)
        fields.setdefault("maxMsgNums", "1")
        fields.setdefault("invisibleTime", "0")
        fields.setdefault("initMode", str(INIT_MAX))
        probe = RemotingCommand.request(RequestCode.POP_MESSAGE, fields)
        return PopRequest(self, probe)

    def _notify_answer(self, held: HeldPull, final: bool) -> RemotingCommand | None:
        try:
            has = self._has_message(self._notify_request(held.request))
        except ResponseError as exc:
            return RemotingCommand.response_to(held.request, exc.code, exc.remark)
        return self._has_msg(held.request, has) if has or final else None

    def _has_message(self, req: PopRequest) -> bool:
        for topic, _, queue_id in req.queues(self.ctx, 0):
            key = (req.group, topic, queue_id)
            if req.order:
                last = self.pop.order_checkpoint(key)
                if last is not None and last.unacked and now_ms() < last.blocked_until():
                    continue
            start = self.pop.cursor(key, lambda: 0)
            if start < self.ctx.store.max_offset(topic, queue_id):
                return True
        return False

    @staticmethod
    def _has_msg(
        request: RemotingCommand, has: bool, polling_full: bool = False
    ) -> RemotingCommand:
        fields = {"hasMsg": str(has).lower()}
        if polling_full:
            fields["pollingFull"] = "true"
        return RemotingCommand.response_to(request, Rc.SUCCESS, None, fields)

    def polling_info(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        h = decode_header(request, POLLING_INFO_HEADER)
        group, topic, queue_id = h["consumerGroup"], h["topic"], h["queueId"]
        n = self._held_for(group, topic, queue_id)
        return RemotingCommand.response_to(request, Rc.SUCCESS, None, {"pollingNum": n})

    def _held_for(self, group: str, topic: str, queue_id: int) -> int:
        """Held requests of ``group`` for ``topic`` and ``queue_id`` (RocketMQ's polling
        key ``topic@group@queueId``)."""
        fields = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id)}
        return sum(
            all(h.request.ext_fields.get(k) == v for k, v in fields.items())
            for h in self.hold.held_requests()
        )

    def pop_status(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        status = self.pop.status(now_ms(), self.ctx.store.max_offset)
        return RemotingCommand.response_to(request, body=json.dumps(status).encode())


def _parsed(record: bytes) -> tuple[np.ndarray, np.void, bytes]:
    """One stored record (copied out of the CommitLog) decoded: its buffer, its row and
    its properties."""
    buf = np.frombuffer(record, dtype=np.uint8)
    rows = np.zeros(1, dtype=rec.RECORD_ROW)
    _, phys = _OFFSETS.unpack_from(record, _QUEUE_OFFSET_POS)  # checked against its place
    if rec.parse_at(buf, np.zeros(1, dtype=np.int64), len(record), phys, False, rows) != 1:
        raise ResponseError(Rc.SYSTEM_ERROR, f"the record at {phys} does not decode")
    s, n = int(rows[0]["props_start"]), int(rows[0]["props_len"])
    return buf, rows[0], buf[s : s + n].tobytes()


def _batch_ack(ack: dict[str, Any]) -> tuple[str, str, Receipt, list[int]]:
    """One BatchAck of a BATCH_ACK_MESSAGE body: group, topic, a receipt naming its
    checkpoint, and the offsets its bit set names."""

    def field(short: str, long: str) -> Any:
        return ack[short] if short in ack else ack[long]

    group, topic = str(field("c", "consumerGroup")), str(field("t", "topic"))
    start, queue_id = int(field("so", "startOffset")), int(field("q", "queueId"))
    bits = base64.b64decode(str(field("b", "bitSet")), validate=True)
    if len(bits) > 4096:
        raise ValueError("bit set too long")
    set_bits = np.flatnonzero(np.unpackbits(np.frombuffer(bits, np.uint8), bitorder="little"))
    offsets = (set_bits + start).tolist()
    flag = str(field("r", "retry"))
    receipt = parse_receipt(
        " ".join(
            map(
                str,
                (
                    start,
                    int(field("pt", "popTime")),
                    int(field("it", "invisibleTime")),
                    int(field("rq", "reviveQueueId")),
                    flag,
                    "-",
                    queue_id,
                    start,
                ),
            )
        )
    )
    return group, topic, receipt, offsets
