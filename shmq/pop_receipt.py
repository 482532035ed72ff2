"""RocketMQ 5's POP receipt: the ``extraInfo`` a popped message carries (its ``POP_CK``
property, the receipt handle of an ack or a change of invisible time), and the response
header strings a client rebuilds it from.

The broker, shmq's SimpleConsumer and the gRPC proxy all read and write it, so it lives
here, beside the message types. The format is RocketMQ's ``ExtraInfoUtil``: fields separated
by one space, ``startOffset popTime invisibleTime reviveQid retryFlag brokerName queueId
queueOffset``, with the CommitLog offset appended by the gRPC proxy. A receipt comes from a
client, so parsing it checks every field and raises ``InvalidReceiptError`` naming the
first that is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from shmq.errors import ShmqError

# reviveQid of a FIFO (orderly) pop: no checkpoint, the queue is blocked until acked
ORDER_REVIVE_QID = 999
RETRY_NONE, RETRY_V1, RETRY_V2 = "0", "1", "2"
_RETRY_FLAGS = (RETRY_NONE, RETRY_V1, RETRY_V2)
_MAX_FIELD = 255  # a broker name's limit; no numeric field is longer
_MAX_TEXT = 9 * 20 + _MAX_FIELD


class InvalidReceiptError(ShmqError, ValueError):
    """A receipt handle (extraInfo) that is not RocketMQ's format."""


@dataclass(frozen=True)
class Receipt:
    """One popped message's receipt (``ExtraInfoUtil``'s fields, in its order)."""

    start_offset: int  # the checkpoint's first queue offset
    pop_time: int  # ms
    invisible_time: int  # ms
    revive_qid: int
    retry_flag: str  # RETRY_NONE: the topic itself; RETRY_V1 / V2: its POP retry topic
    broker_name: str
    queue_id: int
    queue_offset: int
    commitlog_offset: int = -1  # the gRPC proxy's ninth field (-1: absent)

    @property
    def visible_at(self) -> int:
        """When the message becomes visible again unless acked (ms)."""
        return self.pop_time + self.invisible_time

    @property
    def is_order(self) -> bool:
        return self.revive_qid == ORDER_REVIVE_QID

    @property
    def extra_info(self) -> str:
        """The broker's eight fields (an ack's or a change's ``extraInfo``), without the
        gRPC proxy's CommitLog offset."""
        return replace(self, commitlog_offset=-1).encode()

    def is_expired(self, now_ms: int) -> bool:
        """Whether its invisible time ended (the proxy refuses such a handle)."""
        return self.visible_at <= now_ms

    def real_topic(self, topic: str, group: str) -> str:
        """The topic the message was popped from: ``topic``, or the group's POP retry
        topic of it."""
        if self.retry_flag == RETRY_NONE:
            return topic
        return pop_retry_topic(group, topic, v2=self.retry_flag == RETRY_V2)

    def encode(self) -> str:
        parts = [
            self.start_offset,
            self.pop_time,
            self.invisible_time,
            self.revive_qid,
            self.retry_flag,
            self.broker_name,
            self.queue_id,
            self.queue_offset,
        ]
        if self.commitlog_offset >= 0:
            parts.append(self.commitlog_offset)
        return " ".join(map(str, parts))

    def changed(self, pop_time: int, invisible_time: int) -> Receipt:
        """The receipt after CHANGE_MESSAGE_INVISIBLETIME answered ``pop_time`` and
        ``invisible_time``: a checkpoint of its own that starts at the message."""
        return replace(
            self, start_offset=self.queue_offset, pop_time=pop_time, invisible_time=invisible_time
        )


def parse_receipt(text: object) -> Receipt:
    """``text`` as a receipt; ``InvalidReceiptError`` names what is wrong."""
    if not isinstance(text, str) or not text:
        raise InvalidReceiptError("the receipt handle is empty")
    if len(text) > _MAX_TEXT:
        raise InvalidReceiptError("the receipt handle is too long to be one")
    parts = text.split(" ")
    if len(parts) not in (8, 9):
        raise InvalidReceiptError(f"the receipt handle has {len(parts)} fields, not 8 or 9")
    names = (
        "startOffset",
        "popTime",
        "invisibleTime",
        "reviveQid",
        "",
        "",
        "queueId",
        "queueOffset",
        "commitLogOffset",
    )
    numbers = {}
    for i in (0, 1, 2, 3, 6, 7, 8):
        if i >= len(parts):
            continue
        field = parts[i]
        if not (0 < len(field) <= 19 and field.isascii() and field.isdigit()):
            raise InvalidReceiptError(
                f"the receipt handle's {names[i]} {field[:32]!r} is not a non-negative number"
            )
        numbers[i] = int(field)
        if numbers[i] >= 1 << 63:
            raise InvalidReceiptError(f"the receipt handle's {names[i]} is out of range")
    if numbers[6] >= 1 << 31 or numbers[3] >= 1 << 31:
        raise InvalidReceiptError("the receipt handle's queueId or reviveQid is out of range")
    if parts[4] not in _RETRY_FLAGS:
        raise InvalidReceiptError(
            f"the receipt handle's retry flag {parts[4][:8]!r} is not 0, 1 or 2"
        )
    broker = parts[5]
    if not broker or len(broker) > _MAX_FIELD or not broker.isprintable():
        raise InvalidReceiptError("the receipt handle's broker name is not a name")
    return Receipt(
        numbers[0],
        numbers[1],
        numbers[2],
        numbers[3],
        parts[4],
        broker,
        numbers[6],
        numbers[7],
        numbers.get(8, -1),
    )


def pop_retry_topic(group: str, topic: str, v2: bool = False) -> str:
    """The group's POP retry topic of ``topic`` (``KeyBuilder.buildPopRetryTopic``): v1
    ``%RETRY%<group>_<topic>``, v2 ``%RETRY%<group>+<topic>``."""
    return f"%RETRY%{group}{'+' if v2 else '_'}{topic}"


# -- the response header's strings (``ExtraInfoUtil``) --------------------------------------


def start_offset_entry(retry_flag: str, queue_id: int, start: int) -> str:
    """One ``startOffsetInfo`` entry; entries are joined by ``;``."""
    return f"{retry_flag} {queue_id} {start}"


def msg_offset_entry(retry_flag: str, queue_id: int, offsets: list[int]) -> str:
    """One ``msgOffsetInfo`` entry; entries are joined by ``;``."""
    return f"{retry_flag} {queue_id} {','.join(map(str, offsets))}"


def order_count_entries(retry_flag: str, queue_id: int, counts: dict[int, int]) -> list[str]:
    """``orderCountInfo`` entries of one queue: each message's consumed count, then the
    queue's least (RocketMQ's compatibility entry)."""
    out = [f"{retry_flag} qo{queue_id}%{offset} {n}" for offset, n in counts.items()]
    out.append(f"{retry_flag} {queue_id} {min(counts.values(), default=0)}")
    return out


def parse_offset_info(text: str | None) -> dict[tuple[str, int], list[int]]:
    """``startOffsetInfo`` or ``msgOffsetInfo`` as ``{(retryFlag, queueId): offsets}``;
    ``InvalidReceiptError`` for anything that is not that format."""
    out: dict[tuple[str, int], list[int]] = {}
    if not text:
        return out
    for entry in text.split(";"):
        parts = entry.split(" ")
        if len(parts) != 3 or parts[0] not in _RETRY_FLAGS:
            raise InvalidReceiptError(
                f"offset info entry {entry[:64]!r} is not 'retryFlag queueId offsets'"
            )
        try:
            queue_id = int(parts[1])
            offsets = [int(o) for o in parts[2].split(",")]
        except ValueError:
            raise InvalidReceiptError(
                f"offset info entry {entry[:64]!r} has a bad number"
            ) from None
        out.setdefault((parts[0], queue_id), []).extend(offsets)
    return out
