"""A producer's send requests as RocketMQ frames, and the broker's answers as results.

Requests are SEND_MESSAGE_V2 (one message) and SEND_BATCH_MESSAGE (many), with the header
``SendMessageRequestHeaderV2`` (fields ``a`` .. ``m``) as RocketMQ's Java client fills it,
in the binary ROCKETMQ header encoding: per topic a ``SendTemplate`` keeps the encoded
fields that never change (group, topic, default topic and its queue count, unit mode), so
a message costs one ``struct`` call and a join of a few byte strings, not a JSON encoding.

Answers map as RocketMQ's client maps them (``processSendResponse``): SUCCESS is SEND_OK,
FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT and SLAVE_NOT_AVAILABLE are results with that
status (the message is stored), any other code is an error, worth another attempt for the
codes in RocketMQ's ``retryResponseCodes``.
"""

from __future__ import annotations

import struct

import numpy as np

from shmq.client.producer.records import Delayed, Half, Retried
from shmq.client.route import BrokerQueues
from shmq.client.types import MessageQueue, SendResult, SendStatus
from shmq.codec import record as rec
from shmq.codec.msg_ids import split_offset_ids
from shmq.codec.record_pack import topic_head
from shmq.errors import (
    AttemptError,
    RemotingError,
    RemotingTimeoutError,
    SendError,
    SendTimeoutError,
    ShmqError,
)
from shmq.remoting.codes import response_name
from shmq.remoting.protocol import FLAG_ONEWAY, LanguageCode, RequestCode, ResponseCode
from shmq.remoting.security.credentials import Credentials
from shmq.remoting.security.signature import ACCESS_KEY, SIGNATURE

# A batch response lists every offset message id (33 bytes each) in its header, which the
# remoting layer bounds (``MAX_HEADER_SIZE``), so a request carries at most this many
# messages; 4,096 keeps the fixed cost of a request (headers, answers, a writer wake-up)
# below a tenth of a microsecond a message.
CHUNK_MESSAGES = 4096
MAX_BATCH_BODY = 4 * 1024 * 1024  # the broker's default maxMessageSize bounds a batch body
Rc = ResponseCode
STATUSES = {
    Rc.SUCCESS: SendStatus.SEND_OK,
    Rc.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    Rc.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    Rc.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}
# DefaultMQProducer.retryResponseCodes
RETRY_CODES = frozenset(
    {Rc.TOPIC_NOT_EXIST, Rc.SERVICE_NOT_AVAILABLE, Rc.SYSTEM_ERROR, Rc.NO_PERMISSION, 204, 205}
)
# frame length, header mark, code, language, version, opaque, flag, remark length, ext length
_FRAME = struct.Struct(">iihBhiiii")
_OPAQUE, _OPAQUE_AT = struct.Struct(">i"), 13
_SIGNATURE_LEN = 28  # Base64 of HMAC-SHA1's 20 bytes


def _field(key: bytes, value: bytes) -> bytes:
    return len(key).to_bytes(2, "big") + key + len(value).to_bytes(4, "big") + value


def _fields(ext: bytes | memoryview) -> dict[str, str]:
    """The extFields of a binary ext block as the broker reads them (an empty key or
    value is null there, so it is left out): what a signature covers."""
    fields, p, end = {}, 0, len(ext)
    while p < end:
        n = int.from_bytes(ext[p : p + 2], "big")
        key, p = bytes(ext[p + 2 : p + 2 + n]), p + 2 + n
        n = int.from_bytes(ext[p : p + 4], "big")
        value, p = bytes(ext[p + 4 : p + 4 + n]), p + 4 + n
        if key and value:
            fields[key.decode()] = value.decode()
    return fields


def _num(key: bytes, value: int) -> bytes:
    return _field(key, b"%d" % value)


def _head(ext: bytes, body_size: int, code: int, opaque: int, oneway: bool) -> bytes:
    """A frame's fixed part: lengths, code, language, version, opaque, flag, no remark."""
    header_len = 21 + len(ext)
    return _FRAME.pack(4 + header_len + body_size, 1 << 24 | header_len, code,
                       LanguageCode.PYTHON, 0, opaque, FLAG_ONEWAY if oneway else 0, 0,
                       len(ext))  # fmt: skip


_SINGLE_CODES = {False: RequestCode.SEND_MESSAGE_V2, True: RequestCode.SEND_REPLY_MESSAGE_V2}


class SendTemplate:
    """The constant parts of one topic's send requests, and the frame of each request;
    with ``credentials``, each request is signed (``AccessKey`` and ``Signature`` end its
    extFields)."""

    __slots__ = ("credentials", "head_len", "post", "post_batch", "pre", "topic")

    def __init__(
        self,
        group: str,
        topic: str,
        default_topic_queue_nums: int,
        credentials: Credentials | None = None,
    ) -> None:
        self.credentials = credentials
        self.topic = topic
        self.head_len = len(topic_head(topic.encode())[0]) + 2  # ring tail: head, length
        self.pre = (
            _field(b"a", group.encode())
            + _field(b"b", topic.encode())
            + _field(b"c", b"TBW102")
            + _num(b"d", default_topic_queue_nums)
        )
        self.post = _field(b"k", b"false") + _field(b"m", b"false")
        self.post_batch = _field(b"k", b"false") + _field(b"m", b"true")

    def frame(
        self, opaque: int, queue_id: int, sysflag: int, born_ms: int, flag: int, props: bytes,
        body: bytes, *, reconsume: int = 0, max_reconsume: int | None = None,
        batch: bool = False, oneway: bool = False, reply: bool = False,
    ) -> bytes:  # fmt: skip
        """The whole request frame (length prefix included)."""
        ext = self._ext(queue_id, sysflag, born_ms, flag, props, reconsume, max_reconsume,
                        batch)  # fmt: skip
        if self.credentials is not None:
            ext = self._signed(ext, body)
        code = RequestCode.SEND_BATCH_MESSAGE if batch else _SINGLE_CODES[reply]
        return b"".join((_head(ext, len(body), code, opaque, oneway), ext, body))

    def batch_frame(
        self, queue_id: int, born_ms: int, body_size: int, sysflag: int = 0
    ) -> tuple[np.ndarray, int]:
        """A SEND_BATCH_MESSAGE frame with room for a body of ``body_size`` bytes, to be
        encoded in place (no copy of the body into a frame), and where the body starts;
        ``sign_batch`` signs it once the body is written, ``set_opaque`` gives it its
        opaque before each write. ``sysflag``: every message's (a compressed bulk's)."""
        ext = self._ext(queue_id, sysflag, born_ms, 0, b"", 0, None, True)
        if self.credentials is not None:  # a Signature's room, filled by sign_batch
            ext += self._access_key() + _field(SIGNATURE.encode(), b"=" * _SIGNATURE_LEN)
        body_at = _FRAME.size + len(ext)
        frame = np.empty(body_at + body_size, dtype=np.uint8)
        frame[: _FRAME.size] = np.frombuffer(
            _head(ext, body_size, RequestCode.SEND_BATCH_MESSAGE, 0, False), dtype=np.uint8
        )
        frame[_FRAME.size : body_at] = np.frombuffer(ext, dtype=np.uint8)
        return frame, body_at

    def sign_batch(self, frame: np.ndarray, body_at: int) -> None:
        """Write the signature of a ``batch_frame`` whose body is in place (nothing
        without credentials)."""
        if self.credentials is not None:
            fields = _fields(frame[_FRAME.size : body_at].data)  # Signature's is not signed
            signature = self.credentials.signature(fields, frame[body_at:].data)
            frame[body_at - _SIGNATURE_LEN : body_at] = np.frombuffer(signature.encode(), np.uint8)

    @staticmethod
    def set_opaque(frame: np.ndarray, opaque: int) -> None:
        _OPAQUE.pack_into(frame, _OPAQUE_AT, opaque)

    def _access_key(self) -> bytes:
        assert self.credentials is not None
        return _field(ACCESS_KEY.encode(), self.credentials.access_key.encode())

    def _signed(self, ext: bytes, body: bytes) -> bytes:
        """``ext`` with the request's ``AccessKey`` and ``Signature``."""
        assert self.credentials is not None
        ext += self._access_key()
        signature = self.credentials.signature(_fields(ext), body)
        return ext + _field(SIGNATURE.encode(), signature.encode())

    def _ext(
        self, queue_id: int, sysflag: int, born_ms: int, flag: int, props: bytes,
        reconsume: int, max_reconsume: int | None, batch: bool,
    ) -> bytes:  # fmt: skip
        """The header's extFields, in the binary ROCKETMQ encoding."""
        return b"".join((
            self.pre, _num(b"e", queue_id), _num(b"f", sysflag), _num(b"g", born_ms),
            _num(b"h", flag), _field(b"i", props), _num(b"j", reconsume),
            b"" if max_reconsume is None else _num(b"l", max_reconsume),
            self.post_batch if batch else self.post,
        ))  # fmt: skip

    def one_frame(
        self, opaque: int, mq: MessageQueue, one: tuple, oneway: bool = False, reply: bool = False
    ) -> bytes:
        """The SEND_MESSAGE_V2 (SEND_REPLY_MESSAGE_V2 for a ``reply``) of a
        ``send_records.one_record``: its properties as the ring record has them; a delayed,
        half or retried message asks the broker with RocketMQ's properties (``DELAY``,
        ``TIMER_DELIVER_MS``, ``TRAN_MSG``, ``PGROUP``) to place it, as the ring path places
        it itself. A compressed body's sysFlag bits go in the header's sysFlag."""
        _, _, _, flag, born_ms, body, tail, sysflag, _ = one
        if one[0] is not None:
            return self.frame(opaque, mq.queue_id, sysflag, born_ms, flag, tail[self.head_len :],
                              body, oneway=oneway, reply=reply)  # fmt: skip
        if isinstance(tail, Half):
            props = tail.props + b"TRAN_MSG\x01true\x02PGROUP\x01" + tail.group.encode() + b"\x02"
            return self.frame(opaque, mq.queue_id, sysflag | rec.SYSFLAG_TRANSACTION_PREPARED,
                              born_ms, flag, props, body, oneway=oneway)  # fmt: skip
        if isinstance(tail, Retried):
            props = tail.props + (b"DELAY\x01%d\x02" % tail.level if tail.level > 0 else b"")
            return self.frame(opaque, mq.queue_id, sysflag, born_ms, flag, props, body,
                              reconsume=tail.reconsume, max_reconsume=tail.max_times,
                              oneway=oneway)  # fmt: skip
        assert isinstance(tail, Delayed)
        if tail.level:
            props = tail.props + b"DELAY\x01%d\x02" % tail.level
        else:
            props = tail.props + b"TIMER_DELIVER_MS\x01%d\x02" % tail.deliver_ms
        return self.frame(opaque, mq.queue_id, sysflag, born_ms, flag, props, body,
                          oneway=oneway)  # fmt: skip


def failure(code: int, remark: str | None, mq: MessageQueue, broker: str) -> AttemptError:
    """The error of a send the broker did not store (retryable as RocketMQ retries it)."""
    return AttemptError(
        f"broker {broker} rejected the send to {mq.topic}: {remark or response_name(code)} "
        f"({response_name(code)})",
        retryable=code in RETRY_CODES,
    )


def result(
    status: SendStatus, msg_id: str, mq: MessageQueue, ext: dict[str, str], placed: bool
) -> SendResult:
    """The ``SendResult`` of a stored single message from the response's header."""
    offset_id = ext["msgId"]
    qid = int(ext["queueId"])
    if qid != mq.queue_id and not placed:
        mq = MessageQueue(mq.topic, mq.broker_name, qid)
    if offset_id == "0":  # a reply its requester took and the broker did not store
        return SendResult(status, msg_id, offset_id, mq, int(ext["queueOffset"]))
    host, phys = bytes.fromhex(offset_id[:16]), int(offset_id[16:32], 16)
    return SendResult.answered(status, msg_id, mq, int(ext["queueOffset"]), host, phys)


def batch_results(
    status: SendStatus, mq: MessageQueue, ext: dict[str, str], msg_ids: list[bytes]
) -> list[SendResult]:
    """The ``SendResult`` of each message of a stored batch, in the batch's order: its own
    unique key (``msg_ids``), offset message id (the ``msgId`` list) and queue offset (the
    batch's ``queueOffset`` plus its index); ``ValueError`` when the ids do not match."""
    host, phys = split_offset_ids(ext["msgId"])
    if phys.shape[0] != len(msg_ids):
        raise ValueError(f"{phys.shape[0]} offset message ids for a batch of {len(msg_ids)}")
    base = int(ext["queueOffset"])
    answered = SendResult.answered
    return [answered(status, msg_id.decode(), mq, base + i, host, p)
            for i, (msg_id, p) in enumerate(zip(msg_ids, phys.tolist(), strict=True))]  # fmt: skip


def timeout_error(broker: BrokerQueues, mq: MessageQueue, send_timeout: float) -> SendTimeoutError:
    return SendTimeoutError(
        f"broker {broker.broker_name} ({broker.address}) did not answer the send to "
        f"{mq.topic} within send_timeout {send_timeout:g} s"
    )


def send_error(exc: BaseException, broker: BrokerQueues | None, mq: MessageQueue) -> ShmqError:
    """A transport failure as the send path's errors: a timeout is a ``SendTimeoutError``,
    a lost connection a retryable ``AttemptError``."""
    if isinstance(exc, RemotingTimeoutError):
        where = f"broker {broker.broker_name} ({broker.address})" if broker else "the broker"
        return SendTimeoutError(f"{where} did not answer the send to {mq.topic} in time: {exc}")
    if isinstance(exc, RemotingError):
        return AttemptError(f"send to {mq} failed: {exc}", retryable=True)
    if isinstance(exc, ShmqError):
        return exc
    return SendError(f"send to {mq} failed: {exc!r}")
