"""The client's side of the POP receipt (``shmq.pop_receipt``): rebuilding each message's
handle from a POP_MESSAGE response header (RocketMQ's ``ExtraInfoUtil`` as its client
uses it), and the handle after a change of invisible time.

A POP response names the pop once (``popTime``, ``invisibleTime``, ``reviveQid``) and, per
queue read, where the pop's checkpoint starts and which offsets it took (``startOffsetInfo``,
``msgOffsetInfo``; FIFO pops add ``orderCountInfo``, how often each offset was delivered
before). Entries are keyed ``<retryFlag>@<queueId>``: the retry flag says whether the queue
is the popped topic's ("0") or the group's POP retry topic's ("1" v1, "2" v2). The rebuild
rule: the message at offset ``o`` of queue key ``k`` gets ``startOffsetInfo[k] popTime
invisibleTime reviveQid flag brokerName queueId o``.

The header comes from the network: anything off the shape is an ``InvalidReceiptError``
(a ``ShmqError``), never an ``IndexError`` or ``KeyError`` from deep inside.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from shmq.names import RETRY_GROUP_TOPIC_PREFIX
from shmq.pop_receipt import (
    RETRY_NONE,
    RETRY_V1,
    RETRY_V2,
    InvalidReceiptError,
    Receipt,
    parse_offset_info,
    pop_retry_topic,
)

QueueKey = tuple[str, int]  # (retry flag, queue id)
# A checkpoint's identity in a batch ack: (topic as presented, retry flag, queue id,
# start offset, revive qid, pop time, invisible time)
AckKey = tuple[str, str, int, int, int, int, int]


def topic_flag(topic: str) -> str:
    """The retry flag of a record's topic, by its name (``KeyBuilder``'s rule: v2 names
    join group and topic with ``+``)."""
    if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return RETRY_NONE
    return RETRY_V2 if "+" in topic else RETRY_V1


def _ints(ext: Mapping[str, str], names: tuple[str, ...], what: str) -> list[int]:
    values = []
    for name in names:
        text = ext.get(name)
        try:
            values.append(int(text))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise InvalidReceiptError(f"{what} header field {name} is {text!r}, not a number"
                                      ) from None  # fmt: skip
    return values


def _order_counts(text: str | None) -> tuple[dict[tuple[str, int, int], int], dict[QueueKey, int]]:
    """``orderCountInfo`` as (per message, per queue) counts."""
    per_message: dict[tuple[str, int, int], int] = {}
    per_queue: dict[QueueKey, int] = {}
    for entry in (text or "").split(";"):
        if not entry:
            continue
        parts = entry.split(" ")
        qid, sep, offset = parts[1].removeprefix("qo").partition("%") if len(parts) == 3 else (
            "", "", "")  # fmt: skip
        try:
            if len(parts) != 3 or parts[0] not in (RETRY_NONE, RETRY_V1, RETRY_V2):
                raise ValueError
            if sep:
                per_message[(parts[0], int(qid), int(offset))] = int(parts[2])
            else:
                per_queue[(parts[0], int(parts[1]))] = int(parts[2])
        except ValueError:
            raise InvalidReceiptError(
                f"orderCountInfo entry {entry[:64]!r} is not 'retryFlag qo<queueId>%<offset> "
                "count' or 'retryFlag queueId count'"
            ) from None
    return per_message, per_queue


@dataclass(frozen=True)
class PopHeader:
    """A POP_MESSAGE response's header (``PopMessageResponseHeader``), parsed.

    Example (spec §2.4's worked example)::

        header = PopHeader.parse({"popTime": "1700000000000", "invisibleTime": "60000",
                                  "reviveQid": "3", "restNum": "0",
                                  "startOffsetInfo": "0 1 100",
                                  "msgOffsetInfo": "0 1 100,101,102"})
        header.receipt("broker-a", "0", 1, 101).encode()
        # '100 1700000000000 60000 3 0 broker-a 1 101'
    """

    pop_time: int
    invisible_time: int
    revive_qid: int
    rest_num: int
    start_offsets: Mapping[QueueKey, int]  # startOffsetInfo
    msg_offsets: Mapping[QueueKey, list[int]]  # msgOffsetInfo, in the broker's order
    order_counts: Mapping[tuple[str, int, int], int]  # orderCountInfo, per message
    queue_counts: Mapping[QueueKey, int]  # orderCountInfo, per queue (older brokers)

    @classmethod
    def parse(cls, ext: Mapping[str, str]) -> PopHeader:
        """From the response's ext fields."""
        names = ("popTime", "invisibleTime", "reviveQid", "restNum")
        pop_time, invisible, revive, rest = _ints(ext, names, "POP_MESSAGE response")
        starts = parse_offset_info(ext.get("startOffsetInfo"))
        if any(len(v) != 1 for v in starts.values()):
            raise InvalidReceiptError(f"startOffsetInfo {ext.get('startOffsetInfo')!r} gives "
                                      "a queue no or several start offsets")  # fmt: skip
        offsets = parse_offset_info(ext.get("msgOffsetInfo"))
        missing = set(offsets) - set(starts)
        if missing:
            raise InvalidReceiptError(f"msgOffsetInfo names queues {sorted(missing)} that "
                                      "startOffsetInfo does not")  # fmt: skip
        per_message, per_queue = _order_counts(ext.get("orderCountInfo"))
        start = {key: v[0] for key, v in starts.items()}
        return cls(pop_time, invisible, revive, rest, start, offsets, per_message, per_queue)

    def receipt(self, broker_name: str, flag: str, queue_id: int, offset: int) -> Receipt:
        """The receipt of the message at ``offset`` of queue (``flag``, ``queue_id``): the
        client's rebuild rule."""
        start = self.start_offsets.get((flag, queue_id))
        if start is None:
            raise InvalidReceiptError(f"startOffsetInfo has no queue {flag} {queue_id}")
        return Receipt(start, self.pop_time, self.invisible_time, self.revive_qid, flag,
                       broker_name, queue_id, offset)  # fmt: skip

    def ack_key(self, topic: str, flag: str, queue_id: int) -> AckKey:
        """The checkpoint of queue (``flag``, ``queue_id``) of this pop of ``topic``."""
        return (topic, flag, queue_id, self.start_offsets[(flag, queue_id)], self.revive_qid,
                self.pop_time, self.invisible_time)  # fmt: skip

    def delivery_count(self, flag: str, queue_id: int, offset: int) -> int | None:
        """A FIFO pop's count of earlier deliveries of the message (its reconsumeTimes), or
        None when the header has none."""
        count = self.order_counts.get((flag, queue_id, offset))
        return self.queue_counts.get((flag, queue_id)) if count is None else count


def queue_topic(topic: str, group: str, flag: str) -> str:
    """The topic of a queue of retry ``flag`` in a pop of ``topic`` by ``group``."""
    return topic if flag == RETRY_NONE else pop_retry_topic(group, topic, v2=flag == RETRY_V2)


def ack_key(topic: str, receipt: Receipt) -> AckKey:
    """The checkpoint ``receipt`` belongs to (``topic``: its message's, as presented)."""
    return (topic, receipt.retry_flag, receipt.queue_id, receipt.start_offset,
            receipt.revive_qid, receipt.pop_time, receipt.invisible_time)  # fmt: skip


def changed(receipt: Receipt, ext: Mapping[str, str]) -> Receipt:
    """``receipt`` after CHANGE_MESSAGE_INVISIBLETIME answered with ``ext``
    (``ChangeInvisibleTimeResponseHeader``); the broker keeps the revive queue."""
    pop_time, invisible = _ints(ext, ("popTime", "invisibleTime"),
                                "CHANGE_MESSAGE_INVISIBLETIME response")  # fmt: skip
    return receipt.changed(pop_time, invisible)
