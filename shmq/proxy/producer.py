"""SendMessage, EndTransaction and RecallMessage (RocketMQ 5.3's ``SendMessageActivity``,
``EndTransactionActivity``, ``RecallMessageActivity`` and ``ProducerProcessor``): messages
go to the broker as a remoting SEND_MESSAGE_V2 (one) or SEND_BATCH_MESSAGE (several), with
the topic's name as their producer group, on a queue the proxy picks: by the consistent hash
of the message group for a single FIFO message, in turn otherwise.

Every method blocks on the broker; the service runs them on its worker threads.
"""

from __future__ import annotations

import itertools
import time

import numpy as np

from shmq.codec.batch_body import encode_batch_body
from shmq.errors import InvalidMessageIdError
from shmq.message import body_arrays, parse_offset_msg_id
from shmq.proxy.broker import BrokerClient, checked
from shmq.proxy.messages import Outgoing, message_type, outgoing
from shmq.proxy.proxy_config import ProxyConfig
from shmq.proxy.route import PERM_WRITE, topic_message_type
from shmq.proxy.status import OK, Code, ProxyError, overall, status
from shmq.proxy.transactions import TransactionTable
from shmq.proxy.v2 import definition_pb2 as pb
from shmq.proxy.v2 import service_pb2 as spb
from shmq.proxy.validation import validate_topic
from shmq.recall_handle import InvalidRecallHandleError, RecallHandle
from shmq.remoting.codes import RequestCode
from shmq.remoting.codes import ResponseCode as Rc

# MessageSysFlag's transaction types, END_TRANSACTION's commitOrRollback
TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE = 8, 12
_PERSISTENCE = {
    Rc.FLUSH_DISK_TIMEOUT: (Code.MASTER_PERSISTENCE_TIMEOUT, "FLUSH_DISK_TIMEOUT"),
    Rc.FLUSH_SLAVE_TIMEOUT: (Code.SLAVE_PERSISTENCE_TIMEOUT, "FLUSH_SLAVE_TIMEOUT"),
    Rc.SLAVE_NOT_AVAILABLE: (Code.HA_NOT_AVAILABLE, "SLAVE_NOT_AVAILABLE"),
}
_INT64_MASK = (1 << 64) - 1


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def consistent_hash(key: int, buckets: int) -> int:
    """Guava's ``Hashing.consistentHash(long, int)`` (its linear congruential generator)."""
    state = key & _INT64_MASK
    candidate = 0
    while True:
        state = (2862933555777941757 * state + 1) & _INT64_MASK
        next_double = ((state >> 33) + 1) / float(1 << 31)
        nxt = int((candidate + 1) / next_double)
        if 0 <= nxt < buckets:
            candidate = nxt
        else:
            return candidate


def validate_message_type(expected: str, actual: str) -> None:
    """RocketMQ's ``DefaultTopicMessageTypeValidator``: a message of type ``actual`` may
    go to a topic of type ``expected`` (or of any type, a MIXED topic)."""
    if expected != "MIXED" and actual != expected:
        raise ProxyError(
            Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            f"TopicMessageType validate failed, the expected type is {expected}, "
            f"but actual type is {actual}",
        )


class ProducerActivity:
    """The producer RPCs against one broker."""

    def __init__(self, broker: BrokerClient, cfg: ProxyConfig,
                 transactions: TransactionTable) -> None:  # fmt: skip
        self.broker = broker
        self.cfg = cfg
        self.transactions = transactions
        self._turn = itertools.count()

    def send_message(self, request: spb.SendMessageRequest, peer: str) -> spb.SendMessageResponse:
        if not request.messages:
            raise ProxyError(Code.MESSAGE_CORRUPTED, "no message to send")
        topic = request.messages[0].topic
        validate_topic(topic.name)
        messages = []
        for message in request.messages:
            if message.topic != topic:
                raise ProxyError(Code.MESSAGE_CORRUPTED, "topic in message is not same")
            messages.append(outgoing(message, topic.name, peer, self.cfg))
        config = self.broker.topic_config(topic.name)
        if self.cfg.enable_topic_message_type_check:
            expected = topic_message_type(config)
            for out in messages:
                validate_message_type(expected, message_type(out.properties))
        queue_id = self._select_queue(request, config)
        response = self._send(topic.name, queue_id, messages)
        return self._answer(topic.name, messages, response)

    def _select_queue(self, request: spb.SendMessageRequest, config: dict) -> int:
        writable = int(config.get("writeQueueNums", 0))
        if not int(config.get("perm", 0)) & PERM_WRITE or writable <= 0:
            raise ProxyError(
                Code.FORBIDDEN, f"topic {request.messages[0].topic.name} is not writable"
            )
        group = request.messages[0].system_properties.message_group
        if len(request.messages) == 1 and group:
            return consistent_hash(java_string_hash(group), writable)
        return next(self._turn) % writable

    def _send(self, topic: str, queue_id: int, messages: list[Outgoing]):
        fields = {"a": topic, "b": topic, "c": "TBW102", "d": 4, "e": queue_id,
                  "f": messages[0].sysflag, "g": time.time_ns() // 1_000_000, "h": 0,
                  "j": 0, "k": False}  # fmt: skip
        if len(messages) == 1:
            fields["i"] = messages[0].encoded_properties()
            fields["j"] = int(messages[0].properties.get("RECONSUME_TIME", "0") or 0)
            return self.broker.invoke(RequestCode.SEND_MESSAGE_V2, fields, messages[0].body)
        props = [m.encoded_properties().encode() for m in messages]
        data, offs = body_arrays([m.body for m in messages])
        props_data, props_offs = body_arrays(props)
        body = encode_batch_body(data, offs, props_data, props_offs,
                                 np.zeros(len(messages), dtype=np.int64))  # fmt: skip
        fields["m"] = True
        return self.broker.invoke(RequestCode.SEND_BATCH_MESSAGE, fields, body)

    def _answer(self, topic: str, messages: list[Outgoing], response) -> spb.SendMessageResponse:
        persistence = _PERSISTENCE.get(response.code)
        if persistence is not None:
            code, name = persistence
            entry_status = status(code, f"send message failed, sendStatus={name}")
        else:
            checked(response)
            entry_status = OK
        fields = response.ext_fields
        first_offset = int(fields.get("queueOffset", 0))
        offset_ids = (fields.get("msgId") or "").split(",")
        entries = []
        for i, out in enumerate(messages):
            entry = spb.SendResultEntry(status=entry_status)
            if entry_status.code == Code.OK:
                entry.message_id = out.message_id
                entry.transaction_id = out.message_id
                entry.offset = first_offset + i
                entry.recall_handle = fields.get("recallHandle", "")  # the broker's
                if out.properties.get("TRAN_MSG") == "true" and i < len(offset_ids):
                    self._note_half(topic, out, first_offset + i, offset_ids[i])
            entries.append(entry)
        return spb.SendMessageResponse(
            status=overall([e.status.code for e in entries], "send status is empty"),
            entries=entries,
        )

    def _note_half(self, topic: str, out: Outgoing, queue_offset: int, offset_id: str) -> None:
        try:
            _host, commit_log_offset = parse_offset_msg_id(offset_id)
        except InvalidMessageIdError:
            return  # the broker answered no offset id: EndTransaction will not find it
        self.transactions.note(topic, out.message_id, queue_offset, commit_log_offset,
                               out.message_id)  # fmt: skip

    def end_transaction(self, request: spb.EndTransactionRequest) -> spb.EndTransactionResponse:
        """END_TRANSACTION, oneway as RocketMQ's proxy sends it; UNSPECIFIED leaves the
        transaction to the broker's check-backs."""
        validate_topic(request.topic.name)
        if not request.transaction_id.strip():
            raise ProxyError(Code.INVALID_TRANSACTION_ID, "transaction id cannot be empty")
        kind = {pb.COMMIT: TRANSACTION_COMMIT_TYPE,
                pb.ROLLBACK: TRANSACTION_ROLLBACK_TYPE}.get(request.resolution)  # fmt: skip
        if kind is None:
            return spb.EndTransactionResponse(status=OK)
        data = self.transactions.take(request.topic.name, request.transaction_id)
        if data is None:
            raise ProxyError(
                Code.INVALID_TRANSACTION_ID,
                f"cannot found transaction data, id is {request.transaction_id}",
            )
        self.broker.send_oneway(RequestCode.END_TRANSACTION, {
            "producerGroup": data.producer_group,
            "tranStateTableOffset": data.tran_state_table_offset,
            "commitLogOffset": data.commit_log_offset,
            "commitOrRollback": kind,
            "fromTransactionCheck": request.source == pb.SOURCE_SERVER_CHECK,
            "msgId": request.message_id or data.message_id,
            "transactionId": request.transaction_id,
        })  # fmt: skip
        return spb.EndTransactionResponse(status=OK)

    def recall_message(self, request: spb.RecallMessageRequest) -> spb.RecallMessageResponse:
        """RECALL_MESSAGE to the broker the handle names (RocketMQ 5.3's
        ``ProducerProcessor.recallMessage``): the topic must take delay messages (with
        ``enableTopicMessageTypeCheck``) and the handle decode (else INTERNAL_SERVER_ERROR,
        as RocketMQ's proxy answers); the broker's refusal is mapped as any remoting code."""
        topic = request.topic.name
        validate_topic(topic)
        if self.cfg.enable_topic_message_type_check:
            validate_message_type(topic_message_type(self.broker.topic_config(topic)), "DELAY")
        try:
            handle = RecallHandle.decode(request.recall_handle)
        except InvalidRecallHandleError as exc:
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, str(exc)) from None
        response = checked(self.broker.invoke(RequestCode.RECALL_MESSAGE, {
            "topic": topic, "recallHandle": request.recall_handle,
            "bname": handle.broker_name}))  # fmt: skip
        return spb.RecallMessageResponse(status=OK, message_id=response.ext_fields.get("msgId", ""))
