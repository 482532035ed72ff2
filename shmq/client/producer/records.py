"""How a producer turns messages into ring records.

A single message becomes one record written by one ``struct.pack_into``
(``codec.record_pack``): per topic, the encoded topic and a prepared tail for messages whose
only property is the unique key are kept (``TopicRecords``), so a plain message costs a few
byte concatenations. Batches of one topic are laid out as arrays for the numba encoder
(``RecordBatch``). Every message gets a unique key (RocketMQ's ``MessageClientIDSetter``:
host, pid, a random part, milliseconds and a counter, 32 hex digits), its ``msg_id``.
"""

from __future__ import annotations

import itertools
import os
import random
import socket
import time
from collections.abc import Sequence

import numpy as np

from shmq.body_compression import COMPRESSED_FLAG, COMPRESSION_TYPE_MASK
from shmq.codec import record as rec
from shmq.codec.record_pack import record_struct, topic_head
from shmq.delay_topics import (
    SCHEDULE_TOPIC,
    TIMER_TOPIC,
    delayed_placement,
    schedule_properties,
)
from shmq.errors import InvalidPropertyError
from shmq.half_messages import HALF_QUEUE_ID, HALF_TOPIC, half_properties
from shmq.message import Message, MessageExt
from shmq.names import RETRY_GROUP_TOPIC_PREFIX, dlq_topic
from shmq.properties import MAX_PROPERTIES_LENGTH, PROPERTY_UNIQ_KEY, build_properties

_HEX4 = tuple(f"{i:04X}".encode() for i in range(1 << 16))
_UNIQ_NAME = PROPERTY_UNIQ_KEY.encode() + b"\x01"
UNIQ_KEY_LENGTH = 32
_UNIQ_PROPS_LENGTH = len(_UNIQ_NAME) + UNIQ_KEY_LENGTH + 1


class UniqKeys:
    """Unique message keys: a per-producer prefix (host, pid, random), milliseconds, and a
    16-bit counter."""

    def __init__(self) -> None:
        try:
            ip = socket.inet_aton(socket.gethostbyname(socket.gethostname()))
        except OSError:
            ip = socket.inet_aton("127.0.0.1")
        self.prefix = f"{ip.hex().upper()}{os.getpid() & 0xFFFF:04X}{random.getrandbits(32):08X}"
        self._raw_prefix = self.prefix.encode()
        self._counter = itertools.count()
        self._ms = -1
        self._head = b""

    def key(self, now_ms: int) -> bytes:
        """The next key, as the ASCII bytes stored in the ``UNIQ_KEY`` property."""
        if now_ms != self._ms:
            self._ms = now_ms
            self._head = self._raw_prefix + b"%08X" % (now_ms & 0xFFFFFFFF)
        return self._head + _HEX4[next(self._counter) & 0xFFFF]

    def keys(self, n: int) -> list[str]:
        now_ms = time.time_ns() // 1_000_000
        return [self.key(now_ms).decode() for _ in range(n)]


class TopicRecords:
    """What every record of one topic shares: the encoded topic, the magic, and the tail of
    a message whose only property is its unique key (all but the key itself)."""

    __slots__ = ("head", "magic", "raw", "topic", "uniq_tail")

    def __init__(self, topic: str, raw: bytes) -> None:
        self.topic = topic
        self.raw = raw
        self.head, self.magic = topic_head(raw)
        self.uniq_tail = self.head + _UNIQ_PROPS_LENGTH.to_bytes(2, "big") + _UNIQ_NAME

    def tail(self, msg: Message, uniq: bytes) -> bytes:
        """``TOPICLENGTH TOPIC PROPERTIESLENGTH PROPERTIES`` of ``msg`` with key ``uniq``."""
        if msg.tags is None and not msg.keys and not msg.properties and type(msg) is Message:
            return self.uniq_tail + uniq + b"\x02"
        return self.head + _with_length(_checked(_user_props(msg, uniq)))


def _user_props(msg: Message, uniq: bytes) -> bytes:
    """The properties of ``msg``: its own, the system ones shmq gave it (a request's or
    a reply's, ``request_reply``), its unique key."""
    system = getattr(msg, "system_properties", None)
    props = build_properties(msg.tags, msg.keys, msg.properties, system=system)
    return props + _UNIQ_NAME + uniq + b"\x02"


def _with_length(props: bytes) -> bytes:
    return len(props).to_bytes(2, "big") + props


def _checked(props: bytes) -> bytes:
    if len(props) > MAX_PROPERTIES_LENGTH:
        raise InvalidPropertyError(
            f"properties are {len(props)} bytes encoded, above the limit {MAX_PROPERTIES_LENGTH}",
            status="PROPERTIES_SIZE_EXCEEDED",
        )
    return props


class Delayed:
    """A delayed message before its queue is chosen: stored in the schedule topic's queue
    for its level, or in the timer topic, with its real topic and queue in its properties
    (``placed``)."""

    __slots__ = ("deliver_ms", "level", "props", "topic")

    def __init__(self, topic: str, msg: Message, uniq: bytes) -> None:
        self.topic = topic
        self.level = msg._delay_level
        self.deliver_ms = msg._deliver_ms
        self.props = _user_props(msg, uniq)


class Half:
    """A transaction's half message before its queue is chosen: stored in the half topic's
    queue 0, with its real topic and queue and its producer group in its properties
    (``placed``), as RocketMQ's broker stores it."""

    __slots__ = ("group", "props", "topic")

    def __init__(self, topic: str, msg: Message, uniq: bytes, group: str) -> None:
        self.topic = topic
        self.group = group
        self.props = _user_props(msg, uniq)


class Retried:
    """A consumed message that its consumer sends to the group's retry topic itself, when
    the broker did not take it back (RocketMQ's ``sendMessageBack`` fallback through the
    client's inner producer), before its queue is chosen (``placed``). Stored as RocketMQ's
    broker stores a send to a retry topic (``handleRetryAndDLQ``): delayed by its level
    with ``reconsume`` in RECONSUMETIMES, or, once ``reconsume`` reaches ``max_times``, in
    the group's DLQ at once."""

    __slots__ = ("dead_letter_topic", "level", "max_times", "props", "reconsume", "topic")

    def __init__(self, topic: str, props: bytes, level: int, reconsume: int, max_times: int):
        self.topic = topic
        self.dead_letter_topic = dlq_topic(topic[len(RETRY_GROUP_TOPIC_PREFIX) :])
        self.props = props
        self.level = level
        self.reconsume = reconsume
        self.max_times = max_times


_RETRY_DROPPED = frozenset(("REAL_TOPIC", "REAL_QID", "DELAY", "TRAN_MSG", "RECONSUME_TIME",
                            "MAX_RECONSUME_TIMES", "TIMER_DELIVER_MS", "TIMER_OUT_MS"))  # fmt: skip


def retried_record(msg: MessageExt, group_retry_topic: str, level: int, max_times: int) -> tuple:
    """``one_record`` of consumed ``msg`` resent to ``group_retry_topic`` (its properties
    kept, unique key included, with ``RETRY_TOPIC`` and ``ORIGIN_MESSAGE_ID`` added, one
    more reconsume counted, born now): RocketMQ's client builds the same message. Its body
    goes as stored, compressed or not, with the compression bits of its sysFlag (a body
    that does not decompress is retried as it is)."""
    props = {k: v for k, v in msg.properties.items() if k not in _RETRY_DROPPED}
    props.setdefault("RETRY_TOPIC", msg.topic)
    props.setdefault("ORIGIN_MESSAGE_ID", msg.msg_id)
    raw = _checked("".join(f"{k}\x01{v}\x02" for k, v in props.items()).encode())
    uniq = props.get(PROPERTY_UNIQ_KEY, msg.msg_id).encode()
    retried = Retried(group_retry_topic, raw, level, msg.reconsume_times + 1, max_times)
    sysflag = msg.sysflag & _COMPRESSION_BITS
    return (None, 0, 0, msg.flag, time.time_ns() // 1_000_000, msg.stored_body, retried,
            sysflag, uniq)  # fmt: skip


_COMPRESSION_BITS = COMPRESSED_FLAG | COMPRESSION_TYPE_MASK
_HEADS = {t: topic_head(t.encode()) for t in (SCHEDULE_TOPIC, TIMER_TOPIC)}
_HALF_HEAD = topic_head(HALF_TOPIC.encode())


def one_record(
    topic: TopicRecords, msg: Message, body: bytes, uniq_keys: UniqKeys, sysflag: int = 0
) -> tuple:
    """One message encoded for the ring, kept for every attempt (a retry sends the same
    record, with the same unique key): ``(record struct, size, magic, flag, born time,
    body, tail, sysflag, msg id)`` (a tuple: this runs once per message). ``sysflag``: the
    compression bits of a compressed ``body`` (``body_compression``), else 0."""
    now_ms = time.time_ns() // 1_000_000
    uniq = uniq_keys.key(now_ms)
    if msg._delay_level or msg._deliver_ms:  # made once the queue is known (``placed``)
        return (None, 0, 0, msg.flag, now_ms, body, Delayed(topic.topic, msg, uniq), sysflag,
                uniq)  # fmt: skip
    tail = topic.tail(msg, uniq)
    n, t = len(body), len(tail)
    return (record_struct(n, t), rec.HEADER_BODY_START + n + t, topic.magic, msg.flag, now_ms,
            body, tail, sysflag, uniq)  # fmt: skip


def half_record(one: tuple, msg: Message, group: str) -> tuple:
    """``one_record`` of ``msg`` as the half message of a transaction of ``group`` (same
    unique key), made once its queue is known (``placed``)."""
    _, _, _, flag, born_ts, body, _, sysflag, uniq = one
    return None, 0, 0, flag, born_ts, body, Half(msg.topic, msg, uniq, group), sysflag, uniq


def placed(one: tuple, queue_id: int, levels: int, max_delay_ms: int) -> tuple[tuple, int, int]:
    """A ``one_record`` whose record depends on its queue (delayed, a half message, or a
    retried one) for ``queue_id`` of its topic: the record to append (in the schedule,
    timer, half or dead-letter topic, as RocketMQ's broker stores it), the queue id there
    and its RECONSUMETIMES. A timer message whose time has passed is an ordinary one; one
    beyond ``max_delay_ms`` from now is refused (``InvalidMessageError``)."""
    _, _, _, flag, born_ts, body, delayed, sysflag, uniq = one
    reconsume = 0
    if isinstance(delayed, Retried):
        reconsume = delayed.reconsume
        if reconsume >= delayed.max_times:
            qid, extra = 0, b""
            head, magic = topic_head(delayed.dead_letter_topic.encode())
        else:
            qid, extra = schedule_properties(delayed.topic, queue_id, delayed.level, levels)
            head, magic = _HEADS[SCHEDULE_TOPIC]
    elif isinstance(delayed, Half):
        qid, extra = HALF_QUEUE_ID, half_properties(delayed.topic, queue_id, delayed.group)
        head, magic = _HALF_HEAD
    else:
        target, qid, extra = delayed_placement(
            delayed.topic, queue_id, delayed.level, delayed.deliver_ms, levels, max_delay_ms,
            time.time_ns() // 1_000_000,
        )  # fmt: skip
        head, magic = _HEADS.get(target) or topic_head(target.encode())
    tail = head + _with_length(_checked(delayed.props + extra))
    n, t = len(body), len(tail)
    return (record_struct(n, t), rec.HEADER_BODY_START + n + t, magic, flag, born_ts,
            body, tail, sysflag, uniq), qid, reconsume  # fmt: skip


# the fields of ``one_record``'s tuple that are read by name
ONE_SIZE, ONE_FLAG, ONE_BORN, ONE_BODY, ONE_TAIL, ONE_SYSFLAG, ONE_MSG_ID = 1, 3, 4, 5, 6, 7, 8


def laid_out(parts: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """``parts`` back to back as uint8 and their n + 1 boundaries, as ``encode_batch`` and
    ``encode_batch_body`` take them."""
    offs = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, parts), np.int64, len(parts)), out=offs[1:])
    return np.frombuffer(b"".join(parts), dtype=np.uint8), offs


class RecordBatch:
    """Records of one topic as the arrays ``encode_batch`` takes (unique keys included),
    encoded once per attempt: all but the per-attempt fields (queue id, born time, host)."""

    __slots__ = ("bodies", "body_offs", "flags", "n", "props", "props_offs", "sysflag",
                 "topic", "topic_raw", "uniq")  # fmt: skip

    def __init__(self, topic: str, raw: bytes, messages: Sequence[Message], uniq: list[str]):
        self.topic = topic
        self.topic_raw = np.frombuffer(raw, dtype=np.uint8)
        self.uniq = uniq
        n = self.n = len(messages)
        props = [m.encoded_properties(u) for m, u in zip(messages, uniq, strict=True)]
        self.props, self.props_offs = laid_out(props)
        self.bodies, self.body_offs = laid_out([m.body for m in messages])
        self.flags = np.fromiter((m.flag for m in messages), np.int64, n)
        self.sysflag = 0  # RocketMQ never compresses a batch

    @classmethod
    def bulk(cls, topic: str, raw: bytes, data: np.ndarray, offsets: np.ndarray,
             props: bytes, sysflag: int = 0) -> RecordBatch:  # fmt: skip
        """Bodies sharing one properties string, without unique keys (``send_bulk``), and
        one ``sysflag`` (the compression bits when every body is compressed)."""
        self = cls.__new__(cls)
        self.topic = topic
        self.topic_raw = np.frombuffer(raw, dtype=np.uint8)
        self.uniq = []
        self.n = offsets.shape[0] - 1
        self.bodies, self.body_offs = data, offsets
        self.props = np.frombuffer(props, dtype=np.uint8)
        self.props_offs = np.array([0, len(props)], dtype=np.int64)
        self.flags = 0
        self.sysflag = sysflag
        return self

    def fields(self, queue_id: int, born_host: int, start: int = 0, end: int = -1) -> np.ndarray:
        """The per-attempt header fields of records ``start .. end - 1`` (all by default)."""
        end = self.n if end < 0 else end
        fields = np.zeros(end - start, dtype=rec.ENCODE_ROW)
        fields["queue_id"] = queue_id
        fields["flag"] = self.flags if np.isscalar(self.flags) else self.flags[start:end]
        fields["sysflag"] = self.sysflag
        fields["born_ts"] = time.time_ns() // 1_000_000
        fields["born_host"] = born_host
        return fields
