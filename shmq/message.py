"""Message values and message ids, with RocketMQ's rules and limits (properties:
``shmq.properties``)."""

from __future__ import annotations

import base64
import itertools
import socket
import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from shmq.body_compression import COMPRESSED_FLAG, decompress, decompress_bodies
from shmq.errors import (
    BodyDecompressionError,
    InvalidMessageError,
    InvalidMessageIdError,
    InvalidTopicError,
    MessageTooLargeError,
)
from shmq.names import MAX_TOPIC_LENGTH, name_problem
from shmq.properties import (
    KEY_SEPARATOR,
    MAX_DELAY_LEVEL,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    build_properties,
    decode_properties,
)

_topic_cache: dict[str, bytes] = {}

# MessageConst's POP properties, set by the client on each message a POP returns: its
# receipt handle, and when it was first popped
PROPERTY_POP_CK = "POP_CK"
PROPERTY_FIRST_POP_TIME = "1ST_POP_TIME"


def validate_topic(topic: str) -> bytes:
    """The topic's bytes if it matches RocketMQ's ``^[%|a-zA-Z0-9_-]{1,127}$``."""
    cached = _topic_cache.get(topic)
    if cached is not None:
        return cached
    problem = name_problem("topic", topic, MAX_TOPIC_LENGTH)
    if problem:
        raise InvalidTopicError(problem)
    raw = topic.encode()
    if len(_topic_cache) < 100_000:
        _topic_cache[topic] = raw
    return raw


def validate_body(body: Any, max_message_size: int) -> None:
    if not isinstance(body, bytes | bytearray | memoryview):
        raise InvalidMessageError(f"body must be bytes, not {type(body).__name__}")
    n = len(body)
    if n == 0:
        raise MessageTooLargeError("body is empty: a message needs at least 1 byte")
    if n > max_message_size:
        raise MessageTooLargeError(f"body is {n} bytes, above maxMessageSize {max_message_size}")


def pack_host(host: str, port: int) -> int:
    """An IPv4 ``host:port`` as the signed int64 of its 8 stored bytes (ip 4 + port 4)."""
    raw = socket.inet_aton(host) + port.to_bytes(4, "big")
    return int.from_bytes(raw, "big", signed=True)


def host_text(raw: bytes) -> str:
    """Stored host bytes (4+4 or 16+4) as ``ip:port``."""
    if len(raw) == 8:
        return f"{socket.inet_ntoa(raw[:4])}:{int.from_bytes(raw[4:], 'big')}"
    return f"[{socket.inet_ntop(socket.AF_INET6, raw[:16])}]:{int.from_bytes(raw[16:], 'big')}"


def offset_msg_id(store_host: bytes, physical_offset: int) -> str:
    """RocketMQ's offset message id: store host bytes + 8-byte offset, upper-case hex."""
    return (store_host + physical_offset.to_bytes(8, "big", signed=True)).hex().upper()


def parse_offset_msg_id(msg_id: str) -> tuple[str, int]:
    """``(store host "ip:port", physical offset)`` of an offset message id."""
    if not isinstance(msg_id, str) or len(msg_id) not in (32, 56):
        raise InvalidMessageIdError(
            f"message id {msg_id!r} must be 32 (IPv4) or 56 (IPv6) hex digits"
        )
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise InvalidMessageIdError(f"message id {msg_id!r} is not hexadecimal") from None
    return host_text(raw[:-8]), int.from_bytes(raw[-8:], "big", signed=True)


class MessageBatch:
    """Consecutive messages of one queue as columns, without a ``MessageExt`` per message
    (what ``QueueReader.pull_bulk`` returns; the consume side of ``Producer.send_bulk``):
    ``bodies`` (uint8, back to back, a copy out of the store) with ``body_offsets`` (n + 1
    int64 boundaries), ``queue_offsets`` and ``store_timestamps`` (int64, ms). Compressed
    bodies come decompressed; ``errors`` maps the index of each one that did not decompress
    to its ``BodyDecompressionError`` (that body is left as stored; empty normally).

    Example::

        result = reader.pull_bulk(mq, offset, max_nums=4096)
        batch = result.batch
        print(len(batch), batch.body(0), batch.queue_offsets[-1])
        lengths = np.diff(batch.body_offsets)  # numpy all the way, no per-message object
    """

    __slots__ = ("bodies", "body_offsets", "errors", "queue_id", "queue_offsets",
                 "store_timestamps", "topic")  # fmt: skip

    def __init__(
        self,
        topic: str,
        queue_id: int,
        bodies: np.ndarray,
        body_offsets: np.ndarray,
        queue_offsets: np.ndarray,
        store_timestamps: np.ndarray,
        errors: dict[int, BodyDecompressionError] | None = None,
    ) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.bodies = bodies
        self.body_offsets = body_offsets
        self.queue_offsets = queue_offsets
        self.store_timestamps = store_timestamps
        self.errors = {} if errors is None else errors

    @classmethod
    def of_messages(cls, topic: str, queue_id: int, msgs: Sequence[MessageExt]) -> MessageBatch:
        """``msgs`` of one queue, decoded already (a TCP pop's, a filtered pull's), as one
        batch: their bodies copied once, the compressed ones decompressed as a pulled
        batch's are."""
        bodies = [m.stored_body for m in msgs]
        body_offs = np.zeros(len(bodies) + 1, dtype=np.int64)
        np.cumsum([len(b) for b in bodies], out=body_offs[1:])
        data, body_offs, errors = decompress_bodies(
            np.frombuffer(b"".join(bodies), dtype=np.uint8), body_offs,
            np.array([m.sysflag for m in msgs], np.int64), f"{topic}:{queue_id}",
        )  # fmt: skip
        return cls(topic, queue_id, data, body_offs,
                   np.array([m.queue_offset for m in msgs], np.int64),
                   np.array([m.store_timestamp for m in msgs], np.int64), errors)  # fmt: skip

    def __len__(self) -> int:
        return self.queue_offsets.shape[0]

    def body(self, i: int) -> bytes:
        return self.bodies[self.body_offsets[i] : self.body_offsets[i + 1]].tobytes()

    def __iter__(self):
        """The bodies, as ``bytes``."""
        data = self.bodies.tobytes()
        ends = self.body_offsets.tolist()
        return (data[a:b] for a, b in itertools.pairwise(ends))

    def __repr__(self) -> str:
        first = int(self.queue_offsets[0]) if len(self) else None
        return f"MessageBatch({self.topic}, queue {self.queue_id}, {len(self)} from {first})"


class MessageExt:
    """A stored message as read back from the CommitLog (RocketMQ's ``MessageExt``).

    A message read from the store keeps a copy of its record's bytes (shared by the messages
    of one pull) and decodes body, properties, times and hosts from them on first use, so
    reading many messages costs little more than one copy of their records. ``msg_id`` is
    the producer's unique key (``UNIQ_KEY``) when the message has one, else the offset
    message id, as RocketMQ clients show it.

    ``body`` is the body as its producer gave it: a body stored compressed (sysFlag
    COMPRESSED, ``shmq.body_compression``) is decompressed on first use, as RocketMQ's
    ``MessageDecoder`` does; one that does not decompress raises ``BodyDecompressionError``
    naming the message (a push consumer's listener that meets it fails that message only,
    which goes to retry). ``stored_body`` and ``sysflag`` are the record's own.

    Example, in a push consumer's listener::

        def on_message(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
            for msg in msgs:
                print(msg.topic, msg.queue_id, msg.queue_offset, msg.tags, msg.keys, msg.body)
            return ConsumeResult.CONSUME_SUCCESS
    """

    __slots__ = (
        "_at",  # where the record starts in _raw
        "_body",  # as stored
        "_head",  # None until decoded: (born ts, store ts, born host, store host, sysflag,
        #           flag, body crc, prepared transaction offset)
        "_plain",  # the decompressed body, once a compressed one was read
        "_properties",
        "_props_raw",
        "_raw",  # bytes holding the record (None for a message built from values)
        "_reconsume",
        "physical_offset",
        "queue_id",
        "queue_offset",
        "store_size",
        "topic",
    )

    def __init__(
        self,
        topic: str,
        queue_id: int,
        queue_offset: int,
        physical_offset: int,
        body: bytes,
        properties: bytes,
        born_timestamp: int,
        store_timestamp: int,
        born_host: bytes,
        store_host: bytes,
        sysflag: int = 0,
        flag: int = 0,
        body_crc: int = 0,
        store_size: int = 0,
        reconsume_times: int = 0,
        prepared_transaction_offset: int = 0,
    ) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.queue_offset = queue_offset
        self.physical_offset = physical_offset
        self.store_size = store_size
        self._raw = None
        self._at = 0
        self._body = body
        self._plain = None
        self._props_raw = properties
        self._properties: dict[str, str] | None = None
        self._head = (born_timestamp, store_timestamp, born_host, store_host, sysflag, flag,
                      body_crc, prepared_transaction_offset)  # fmt: skip
        self._reconsume = reconsume_times

    def _decode(self) -> tuple:
        """Decode the record's header, body and properties from its bytes (once)."""
        raw, at = self._raw, self._at
        # the usual record, both hosts IPv4, in one unpack (an IPv6 one is longer, so the
        # bytes are there either way; its hosts are read again below)
        (_, magic, crc, _, flag, _, _, sysflag, born_ts, born_host, store_ts, store_host,
         reconsume, prep_tx, body_len) = _RECORD_V4.unpack_from(raw, at)  # fmt: skip
        p = at + _RECORD_V4.size
        if sysflag & (_SYSFLAG_BORNHOST_V6 | _SYSFLAG_STOREHOST_V6):
            p = at + _RECORD_FIXED.size
            born_len = 20 if sysflag & _SYSFLAG_BORNHOST_V6 else 8
            born_host = raw[p : p + born_len]
            p += born_len
            (store_ts,) = _I64.unpack_from(raw, p)
            p += 8
            store_len = 20 if sysflag & _SYSFLAG_STOREHOST_V6 else 8
            store_host = raw[p : p + store_len]
            p += store_len
            reconsume, prep_tx, body_len = _RECORD_TAIL_FIXED.unpack_from(raw, p)
            p += _RECORD_TAIL_FIXED.size
        self._body = raw[p : p + body_len]
        p += body_len
        if magic == _MAGIC_V2:
            topic_len = int.from_bytes(raw[p : p + 2], "big")
            p += 2 + topic_len
        else:
            p += 1 + raw[p]
        props_len = int.from_bytes(raw[p : p + 2], "big")
        self._props_raw = raw[p + 2 : p + 2 + props_len]
        self._reconsume = reconsume
        head = self._head = (born_ts, store_ts, born_host, store_host, sysflag, flag, crc,
                             prep_tx)  # fmt: skip
        return head

    @property
    def body(self) -> bytes:
        if (self._head or self._decode())[4] & COMPRESSED_FLAG:
            return self._plain or self._decompressed()
        return self._body

    @property
    def stored_body(self) -> bytes:
        """The body as the record holds it (compressed when ``sysflag`` says so)."""
        if self._head is None:
            self._decode()
        return self._body

    def _decompressed(self) -> bytes:
        what = f"message {self.topic}:{self.queue_id}@{self.queue_offset}"
        self._plain = decompress(self._body, self._head[4], what)
        return self._plain

    @property
    def born_timestamp(self) -> int:
        return (self._head or self._decode())[0]

    @property
    def store_timestamp(self) -> int:
        return (self._head or self._decode())[1]

    @property
    def sysflag(self) -> int:
        return (self._head or self._decode())[4]

    @property
    def flag(self) -> int:
        return (self._head or self._decode())[5]

    @property
    def body_crc(self) -> int:
        return (self._head or self._decode())[6]

    @property
    def prepared_transaction_offset(self) -> int:
        return (self._head or self._decode())[7]

    @property
    def reconsume_times(self) -> int:
        if self._head is None:
            self._decode()
        return self._reconsume

    @reconsume_times.setter
    def reconsume_times(self, value: int) -> None:
        if self._head is None:
            self._decode()
        self._reconsume = value

    @property
    def properties(self) -> dict[str, str]:
        if self._properties is None:
            if self._head is None:
                self._decode()
            self._properties = decode_properties(self._props_raw)
        return self._properties

    @property
    def born_host(self) -> str:
        return host_text((self._head or self._decode())[2])

    @property
    def store_host(self) -> str:
        return host_text((self._head or self._decode())[3])

    @property
    def offset_msg_id(self) -> str:
        return offset_msg_id((self._head or self._decode())[3], self.physical_offset)

    @property
    def commit_log_offset(self) -> int:
        return self.physical_offset

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        value = self.properties.get(PROPERTY_KEYS)
        return [k for k in value.split(KEY_SEPARATOR) if k] if value else []

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(PROPERTY_UNIQ_KEY)

    @property
    def msg_id(self) -> str:
        return self.properties.get(PROPERTY_UNIQ_KEY) or self.offset_msg_id

    @property
    def receipt_handle(self) -> str | None:
        """The handle a ``SimpleConsumer`` acks the message with (RocketMQ's ``POP_CK``
        property); None for a message that was not popped."""
        return self.properties.get(PROPERTY_POP_CK)

    @receipt_handle.setter
    def receipt_handle(self, handle: str) -> None:
        self.properties[PROPERTY_POP_CK] = handle

    @property
    def delivery_attempt(self) -> int:
        """Which delivery of the message this is, 1 for the first (reconsumeTimes + 1)."""
        return self.reconsume_times + 1

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageExt):
            return NotImplemented
        fields = ("topic", "queue_id", "queue_offset", "physical_offset", "stored_body",
                  "properties")  # fmt: skip
        return all(getattr(self, n) == getattr(other, n) for n in fields) and (
            self.store_timestamp == other.store_timestamp
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        try:
            body = self.body
        except BodyDecompressionError:
            body = self.stored_body
        body = body if len(body) <= 32 else body[:29] + b"..."
        return (
            f"MessageExt(topic={self.topic!r}, queue_id={self.queue_id}, "
            f"queue_offset={self.queue_offset}, msg_id={self.msg_id!r}, tags={self.tags!r}, "
            f"keys={self.keys!r}, body={body!r})"
        )


def stored_message(
    raw: bytes, at: int, topic: str, queue_id: int, queue_offset: int, physical_offset: int,
    store_size: int,
) -> MessageExt:  # fmt: skip
    """The message whose record starts at ``raw[at]``, decoded when a field is read (the
    reader's path: one copy of a pull's records, one small object per message)."""
    msg = _new_message_ext(MessageExt)
    msg.topic = topic
    msg.queue_id = queue_id
    msg.queue_offset = queue_offset
    msg.physical_offset = physical_offset
    msg.store_size = store_size
    msg._raw = raw
    msg._at = at
    msg._head = None
    msg._plain = None
    msg._properties = None
    return msg


_new_message_ext = object.__new__
# a record's fixed fields up to the born host (TOTALSIZE .. BORNTIMESTAMP), and after the
# store host (RECONSUMETIMES, PREPARED_TRANSACTION_OFFSET, BODYLENGTH)
_RECORD_FIXED = struct.Struct(">iIiiiqqiq")
_RECORD_TAIL_FIXED = struct.Struct(">iqi")
_I64 = struct.Struct(">q")
# all of them with both hosts IPv4 (8 bytes each: address and port)
_RECORD_V4 = struct.Struct(">iIiiiqqiq8sq8siqi")
_MAGIC_V2 = 0xDAA320AB
_SYSFLAG_BORNHOST_V6 = 0x10
_SYSFLAG_STOREHOST_V6 = 0x20


def message_to_json(msg: MessageExt) -> dict:
    """A message as a JSON-ready dict (the body base64-encoded), for the control plane: the
    body as stored, with ``sysFlag`` saying whether it is compressed (the broker never
    decompresses; the admin client does, ``shmq.client.admin.message.queries``)."""
    return {
        "topic": msg.topic,
        "queueId": msg.queue_id,
        "queueOffset": msg.queue_offset,
        "commitLogOffset": msg.physical_offset,
        "msgId": msg.msg_id,
        "offsetMsgId": msg.offset_msg_id,
        "tags": msg.tags,
        "keys": msg.keys,
        "properties": msg.properties,
        "bornTimestamp": msg.born_timestamp,
        "storeTimestamp": msg.store_timestamp,
        "bornHost": msg.born_host,
        "storeHost": msg.store_host,
        "reconsumeTimes": msg.reconsume_times,
        "flag": msg.flag,
        "sysFlag": msg.sysflag,
        "body": base64.b64encode(msg.stored_body).decode(),
    }


class Message:
    """A message to send (RocketMQ's ``Message``).

    ``delay_level`` (RocketMQ's ``DELAY`` property, 0 = deliver at once) asks the broker to
    deliver the message after the level's delay: 1 → 1 s, 2 → 5 s, 3 → 10 s, 4 → 30 s,
    5 → 1 min, … 18 → 2 h (``messageDelayLevel``). ``deliver_time_ms`` (RocketMQ 5's timer
    message, ``TIMER_DELIVER_MS``) asks for delivery at that wall-clock time in ms, up to
    the broker's ``timerMaxDelaySec`` (3 days) ahead; a time already past delivers at once.

    Example::

        Message("Orders", b"order 42 paid", tags="Paid", keys=["order-42"])
        Message("Reminders", b"call back", delay_level=3)  # delivered after 10 s
        Message("Reminders", b"at noon", deliver_time_ms=noon_ms)

    ``transaction_id`` is set when a ``TransactionProducer`` sends the message in a
    transaction, before the local transaction runs (RocketMQ's ``getTransactionId``).
    """

    __slots__ = (
        "_delay_level",
        "_deliver_ms",
        "body",
        "flag",
        "keys",
        "properties",
        "tags",
        "topic",
        "transaction_id",
    )  # fmt: skip

    def __init__(
        self,
        topic: str,
        body: bytes | str,
        *,
        tags: str | None = None,
        keys: str | Iterable[str] = (),
        properties: Mapping[str, str] | None = None,
        flag: int = 0,
        delay_level: int = 0,
        deliver_time_ms: int = 0,
    ) -> None:
        if topic not in _topic_cache:
            validate_topic(topic)
        self.topic = topic
        if type(body) is not bytes:
            body = body.encode() if isinstance(body, str) else bytes(body)
        self.body = body
        self.tags = tags
        self.keys = [] if not keys else [keys] if isinstance(keys, str) else list(keys)
        self.properties = dict(properties) if properties else {}
        self.flag = flag
        self.transaction_id: str | None = None  # set by a TransactionProducer's send
        if delay_level == 0 and type(delay_level) is int:
            self._delay_level = 0
        else:
            self.delay_level = delay_level  # checked
        if deliver_time_ms == 0 and type(deliver_time_ms) is int:
            self._deliver_ms = 0
        else:
            self.deliver_time_ms = deliver_time_ms  # checked

    @property
    def delay_level(self) -> int:
        """The delay level (``DELAY`` property): 0 for none, else 1..18."""
        return self._delay_level

    @delay_level.setter
    def delay_level(self, level: int) -> None:
        if isinstance(level, bool) or not isinstance(level, int):
            raise InvalidMessageError(
                f"delay_level must be an int in 0..{MAX_DELAY_LEVEL}, not {type(level).__name__}"
            )
        if not 0 <= level <= MAX_DELAY_LEVEL:
            raise InvalidMessageError(
                f"delay_level {level} is out of range: 0 (none) or 1..{MAX_DELAY_LEVEL} "
                f"(maxDelayLevel)"
            )
        if level and getattr(self, "_deliver_ms", 0):
            raise InvalidMessageError("a message has a delay_level or a deliver_time_ms, not both")
        self._delay_level = level

    @property
    def deliver_time_ms(self) -> int:
        """The timer delivery time in ms since the epoch (``TIMER_DELIVER_MS``), 0 for none."""
        return self._deliver_ms

    @deliver_time_ms.setter
    def deliver_time_ms(self, ms: int) -> None:
        if isinstance(ms, bool) or not isinstance(ms, int):
            raise InvalidMessageError(f"deliver_time_ms must be an int, not {type(ms).__name__}")
        if ms < 0:
            raise InvalidMessageError(f"deliver_time_ms {ms} is negative")
        if ms and self._delay_level:
            raise InvalidMessageError("a message has a delay_level or a deliver_time_ms, not both")
        self._deliver_ms = ms

    def encoded_properties(self, uniq_key: str | None = None) -> bytes:
        system = {}
        if self._delay_level:
            system[PROPERTY_DELAY_TIME_LEVEL] = str(self._delay_level)
        if uniq_key:
            system[PROPERTY_UNIQ_KEY] = uniq_key
        return build_properties(self.tags, self.keys, self.properties, system=system or None)

    def __repr__(self) -> str:
        delay = f", delay_level={self._delay_level}" if self._delay_level else ""
        return (
            f"Message(topic={self.topic!r}, tags={self.tags!r}, keys={self.keys!r}{delay}, "
            f"body={self.body[:32]!r})"
        )


def body_arrays(
    bodies: Sequence[bytes] | tuple[np.ndarray, np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """Bodies as ``(uint8 data, int64 boundaries)``: from a list of bytes, or checked when
    already given as arrays (n + 1 boundaries)."""
    if isinstance(bodies, tuple) and len(bodies) == 2 and isinstance(bodies[0], np.ndarray):
        data, offsets = bodies
        if data.dtype != np.uint8 or data.ndim != 1:
            raise InvalidMessageError("bulk body data must be a 1-D uint8 array")
        offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        if (
            offsets.ndim != 1
            or offsets.shape[0] < 1
            or offsets[0] < 0
            or offsets[-1] > data.shape[0]
        ):
            raise InvalidMessageError(
                f"body offsets must be n+1 boundaries within the {data.shape[0]}-byte data"
            )
        return np.ascontiguousarray(data), offsets
    for i, body in enumerate(bodies):
        if not isinstance(body, bytes | bytearray | memoryview):
            raise InvalidMessageError(f"body {i} must be bytes, not {type(body).__name__}")
    data = np.frombuffer(b"".join(bodies), dtype=np.uint8)
    offsets = np.zeros(len(bodies) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, bodies), dtype=np.int64, count=len(bodies)), out=offsets[1:])
    return data, offsets
