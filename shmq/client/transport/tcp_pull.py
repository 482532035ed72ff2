"""A consumer's TCP data path to one broker: PULL_MESSAGE with long polling.

The TCP twin of ``queue_reader``'s shared-memory link, behind the same three calls:
``pull`` (messages from an offset, waiting up to a timeout), ``wait`` (until one of some
queues has a message past its offset) and ``wake``. Pulls go on one pipelined connection
(``remoting.pipeline``) and there is at most one per queue at a time: a pull that finds
messages is answered at once, one that finds nothing is held by the broker (long polling,
RocketMQ's ``brokerSuspendMaxTimeMillis`` 15 s, the client waiting a little longer) until
the queue grows. ``wait`` starts a held pull on every queue that has none and sleeps until
one is answered; after a pull that found messages the next one is sent at once (as
RocketMQ's push consumer does), so a consumer that keeps up finds its next messages
already on the way. A pull answered for an offset nobody asks for any more (a seek, a
rebalance) is dropped.

The response body is the stored records; they decode with the store's parser
(``codec.pull_body``) into the same ``MessageExt`` / ``MessageBatch`` as the mmap path.
Response codes map as RocketMQ's client maps them: SUCCESS → FOUND, PULL_NOT_FOUND →
NO_NEW_MSG, PULL_RETRY_IMMEDIATELY → NO_MATCHED_MSG, PULL_OFFSET_MOVED → OFFSET_ILLEGAL
(with the broker's next offset); any other code raises ``ResponseError``. Each result
carries the broker's ``suggestWhichBrokerId``: ``QueueReader`` pulls the queue from that
broker next.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from shmq.body_compression import decompress_bodies
from shmq.client.selector import MessageSelector
from shmq.client.types import MessageQueue, PullResult, PullStatus
from shmq.codec import pull_body
from shmq.codec import record as rec
from shmq.codec.pull_body import parse_pull_body
from shmq.errors import ClientError, RemotingError, RemotingTimeoutError, ResponseError
from shmq.message import MessageBatch, stored_message
from shmq.remoting.client import RemotingClient
from shmq.remoting.pipeline import PipelinedChannel, Reply
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode, SerializeType
from shmq.store.reader import record_tags

Rc = ResponseCode
SUSPEND_MS = 15_000  # brokerSuspendMaxTimeMillis
SUSPEND_SLACK_S = 5.0  # the client waits this much longer than the broker holds a pull
PULL_TIMEOUT_S = 10.0  # consumerPullTimeoutMillis, for a pull that is not held
# PullSysFlag: commit offset, suspend, subscription
FLAG_SUSPEND, FLAG_SUBSCRIPTION = 0x2, 0x4
PULL_STATUSES = {  # how a consumer reads the broker's answer to a pull (4.9's PullAPIWrapper)
    Rc.SUCCESS: PullStatus.FOUND,
    Rc.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    Rc.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    Rc.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


def pull_request(
    group: str, mq: MessageQueue, offset: int, max_nums: int,
    expression: str | MessageSelector, suspend_ms: int,
) -> RemotingCommand:  # fmt: skip
    """A PULL_MESSAGE of ``mq`` from ``offset`` with the subscription ``expression`` (TAG,
    or a ``MessageSelector``'s type), committing nothing; held up to ``suspend_ms`` by the
    broker when nothing is there."""
    kind = "TAG"
    if isinstance(expression, MessageSelector):
        kind, expression = expression.expression_type, expression.expression
    flags = FLAG_SUBSCRIPTION | (FLAG_SUSPEND if suspend_ms else 0)
    return RemotingCommand.request(
        RequestCode.PULL_MESSAGE,
        {"consumerGroup": group, "topic": mq.topic, "queueId": mq.queue_id,
         "queueOffset": offset, "maxMsgNums": max_nums, "sysFlag": flags,
         "commitOffset": 0, "suspendTimeoutMillis": suspend_ms,
         "subscription": expression, "subVersion": 0, "expressionType": kind},
        serialize_type=SerializeType.ROCKETMQ,
    )  # fmt: skip


class _Pull:
    """One pull of a queue: in flight until ``done``, then its reply or error."""

    __slots__ = ("done", "error", "expression", "max_nums", "offset", "opaque", "reply")

    def __init__(self, offset: int, max_nums: int, expression: str | MessageSelector) -> None:
        self.offset = offset
        self.max_nums = max_nums
        self.expression = expression
        self.opaque = 0
        self.done = False
        self.reply: Reply | None = None
        self.error: BaseException | None = None


class TcpConsumerLink:
    """Pulls of ``group`` from the broker at ``address``; offsets and max offsets go
    through the control ``client``, whose credentials sign the pulls too."""

    def __init__(self, client: RemotingClient, address: str, group: str) -> None:
        self.client = client
        self.address = address
        self.group = group
        self._channel: PipelinedChannel | None = None
        self._cond = threading.Condition()
        self._pulls: dict[MessageQueue, _Pull] = {}
        self._asked: dict[MessageQueue, tuple[int, str]] = {}  # the last max_nums, expression
        self._wakes = 0
        self.closed = False
        pull_body.warm_up()

    # -- the reader's calls -----------------------------------------------------------------

    def pull(
        self, mq: MessageQueue, offset: int, max_nums: int,
        expression: str | MessageSelector | None, tags: frozenset[str] | None, timeout: float,
        bulk: bool,
    ) -> PullResult:  # fmt: skip
        """Up to ``max_nums`` messages of ``mq`` from ``offset`` (``tags``: the tag strings
        to keep after the broker's hash filter), waiting up to ``timeout`` seconds."""
        expression = expression or "*"
        deadline = time.monotonic() + timeout
        with self._cond:
            self._asked[mq] = (max_nums, expression)
            p = self._pulls.get(mq)
            if p is None or p.offset != offset or p.expression != expression:
                suspend_ms = int(timeout * 1000) if timeout > 0 else 0
                p = self._start(mq, offset, max_nums, expression, suspend_ms)
                if not suspend_ms:  # not held: its answer comes within a round trip
                    deadline = time.monotonic() + PULL_TIMEOUT_S
            while not p.done:
                left = deadline - time.monotonic()
                if left <= 0 or self.closed:
                    return PullResult(PullStatus.NO_NEW_MSG, offset, 0, offset)
                self._cond.wait(left)
            del self._pulls[mq]
        result = self._result(mq, p, tags, bulk)
        if result.pull_status is PullStatus.FOUND:
            with self._cond:  # the next pull is on its way while these are consumed
                if mq not in self._pulls and not self.closed:
                    self._start(mq, result.next_begin_offset, max_nums, expression, SUSPEND_MS)
        return result

    def wait(self, offsets: dict[MessageQueue, int], timeout: float) -> list[MessageQueue]:
        """Until a pull of one of ``offsets``' queues is answered (held pulls started where
        none is in flight), ``wake`` is called, or ``timeout`` seconds pass; the queues
        whose pull was answered (none: the time passed or a wake)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            wakes = self._wakes
            for mq, offset in offsets.items():
                p = self._pulls.get(mq)
                if p is None or p.offset != offset:
                    max_nums, expression = self._asked.get(mq, (32, "*"))
                    self._start(mq, offset, max_nums, expression, SUSPEND_MS)
            while True:
                answered = [mq for mq in offsets if mq in self._pulls and self._pulls[mq].done]
                if answered:
                    return answered
                left = deadline - time.monotonic()
                if left <= 0 or self._wakes != wakes or self.closed:
                    return []
                self._cond.wait(left)

    def wake(self) -> None:
        with self._cond:
            self._wakes += 1
            self._cond.notify_all()

    @property
    def live(self) -> bool:
        """A TCP link reconnects by itself: only a closed one is done."""
        return not self.closed

    def max_offset(self, mq: MessageQueue) -> int:
        response, _ = self.client.invoke_json(
            self.address, RequestCode.GET_MAX_OFFSET, {"topic": mq.topic, "queueId": mq.queue_id}
        )
        return int(response.ext_fields["offset"])

    def close(self) -> None:
        with self._cond:
            self.closed = True
            channel, self._channel = self._channel, None
            self._cond.notify_all()
        if channel is not None:
            channel.close()

    # -- requests ---------------------------------------------------------------------------

    def _start(
        self,
        mq: MessageQueue,
        offset: int,
        max_nums: int,
        expression: str | MessageSelector,
        suspend_ms: int,
    ) -> _Pull:
        """Send a pull of ``mq`` (call with ``_cond`` held); a pull of the queue still in
        flight is forgotten. A pull that cannot be written is answered with its error."""
        old = self._pulls.get(mq)
        channel = self._connect()
        if old is not None and not old.done and channel is not None:
            channel.forget(old.opaque)
        p = self._pulls[mq] = _Pull(offset, max_nums, expression)
        if channel is None:
            self._settle(p, None, ClientError(f"the consumer's link to {self.address} is closed"))
            return p
        request = pull_request(self.group, mq, offset, max_nums, expression, suspend_ms)
        request.opaque = p.opaque = channel.next_opaque()
        if self.client.credentials is not None:  # the control client's, as its TLS
            self.client.credentials.sign(request)
        wait_s = suspend_ms / 1000 + SUSPEND_SLACK_S if suspend_ms else PULL_TIMEOUT_S
        try:
            channel.send(p.opaque, request.encode(),
                         lambda reply, error: self._answered(p, reply, error),
                         time.monotonic() + wait_s)  # fmt: skip
        except RemotingError as exc:
            self._settle(p, None, exc)
        return p

    def _connect(self) -> PipelinedChannel | None:
        if self.closed:
            return None
        channel = self._channel
        if channel is None or channel.closed:
            channel = self._channel = PipelinedChannel(self.address, tls=self.client.tls)
        return channel

    def _answered(self, p: _Pull, reply: Reply | None, error: BaseException | None) -> None:
        with self._cond:
            self._settle(p, reply, error)

    def _settle(self, p: _Pull, reply: Reply | None, error: BaseException | None) -> None:
        p.reply, p.error, p.done = reply, error, True
        self._cond.notify_all()

    # -- answers ----------------------------------------------------------------------------

    def _result(
        self, mq: MessageQueue, p: _Pull, tags: frozenset[str] | None, bulk: bool
    ) -> PullResult:
        if p.error is not None:
            if isinstance(p.error, RemotingTimeoutError):
                return PullResult(PullStatus.NO_NEW_MSG, p.offset, 0, p.offset)
            raise p.error
        reply = p.reply
        status = PULL_STATUSES.get(reply.code)
        if status is None:
            raise ResponseError(reply.code, f"pull of {mq} from {self.address}: {reply.remark}")
        ext = reply.ext
        try:
            next_offset = int(ext["nextBeginOffset"])
            low, high = int(ext["minOffset"]), int(ext["maxOffset"])
            suggest = int(ext.get("suggestWhichBrokerId", 0))
        except (KeyError, ValueError) as exc:
            raise ResponseError(reply.code, f"pull of {mq}: bad response header {ext}") from exc
        if status is not PullStatus.FOUND:
            return PullResult(status, next_offset, low, high, suggest_which_broker_id=suggest)
        buf, rows = parse_pull_body(reply.body, mq.topic, mq.queue_id)
        keep = np.arange(rows.shape[0])
        if tags is not None:
            keep = keep[[record_tags(buf, rows[i]) in tags for i in range(rows.shape[0])]]
        if bulk:
            if not keep.shape[0]:
                return PullResult(PullStatus.NO_MATCHED_MSG, next_offset, low, high,
                                  suggest_which_broker_id=suggest)  # fmt: skip
            bodies = np.empty(int(rows["body_len"][keep].sum()), dtype=np.uint8)
            body_offs = np.zeros(keep.shape[0] + 1, dtype=np.int64)
            rec.gather_bodies(buf, rows, keep, bodies, body_offs, 0)
            bodies, body_offs, errors = decompress_bodies(
                bodies, body_offs, rows["sysflag"][keep], str(mq)
            )
            batch = MessageBatch(mq.topic, mq.queue_id, bodies, body_offs,
                                 rows["queue_offset"][keep].copy(),
                                 rows["store_ts"][keep].copy(), errors)  # fmt: skip
            return PullResult(PullStatus.FOUND, next_offset, low, high, batch=batch,
                              suggest_which_broker_id=suggest)  # fmt: skip
        raw = reply.body
        kept = rows[keep]
        names = ("pos", "queue_offset", "phys_offset", "size")
        cols = np.column_stack([kept[name] for name in names])
        msgs = [stored_message(raw, pos, mq.topic, mq.queue_id, qoff, phys, n)
                for pos, qoff, phys, n in cols.tolist()]  # fmt: skip
        status = PullStatus.FOUND if msgs else PullStatus.NO_MATCHED_MSG
        return PullResult(status, next_offset, low, high, msgs, suggest_which_broker_id=suggest)
