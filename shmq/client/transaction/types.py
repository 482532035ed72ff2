"""The value types of transactional messages (RocketMQ's ``LocalTransactionState``,
``TransactionListener`` and ``TransactionSendResult``)."""

from __future__ import annotations

import enum
from typing import Any, Protocol

from shmq.client.types import MessageQueue, SendResult
from shmq.message import Message, MessageExt


class LocalTransactionState(enum.Enum):
    """A local transaction's outcome: the half message is committed (delivered), rolled back
    (dropped), or left for the broker to check back later (RocketMQ's spelling, UNKNOW)."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"


class TransactionListener(Protocol):
    """What a ``TransactionProducer`` calls.

    ``execute_local_transaction(msg, arg)`` runs the local transaction once the half message
    is stored (``arg`` is what ``send_message_in_transaction`` was given;
    ``msg.transaction_id`` is set) and tells its outcome; an exception counts as UNKNOW.
    ``check_local_transaction(msg)`` is the broker asking, later, about a transaction whose
    outcome it never got (UNKNOW, or a producer that died): ``msg`` is the half message
    under its real topic and queue, ``msg.msg_id`` its transaction id. It may run in any
    producer of the group, so it must look the outcome up (in the database the local
    transaction wrote), not remember it; a transaction id the local transaction never saw
    (its producer died before running it) is best answered ROLLBACK.

    Example::

        class Payments:
            def execute_local_transaction(self, msg, arg):
                db.insert_payment(arg, tx_id=msg.transaction_id)
                return LocalTransactionState.COMMIT_MESSAGE

            def check_local_transaction(self, msg):
                paid = db.payment_exists(tx_id=msg.msg_id)
                return LocalTransactionState.COMMIT_MESSAGE if paid else (
                    LocalTransactionState.ROLLBACK_MESSAGE)
    """

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState: ...

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState: ...


class TransactionSendResult(SendResult):
    """A ``SendResult`` for the half message (its queue offset and offset msg id are the
    half's; ``message_queue`` is the real queue the message goes to once committed), with
    the ``transaction_id`` (the message's ``msg_id``) and the local transaction's state.

    Example::

        result = producer.send_message_in_transaction(Message("Payments", b"paid"), arg=42)
        if result.local_transaction_state is LocalTransactionState.COMMIT_MESSAGE:
            print("committed", result.transaction_id, result.message_queue)
    """

    __slots__ = ("local_transaction_state", "transaction_id")

    def __init__(
        self,
        result: SendResult,
        message_queue: MessageQueue,
        local_transaction_state: LocalTransactionState,
    ) -> None:
        super().__init__(result.send_status, result.msg_id, result.offset_msg_id, message_queue,
                         result.queue_offset)  # fmt: skip
        self.transaction_id = result.msg_id
        self.local_transaction_state = local_transaction_state

    def __repr__(self) -> str:
        return (
            f"TransactionSendResult(send_status={self.send_status}, msg_id={self.msg_id!r}, "
            f"local_transaction_state={self.local_transaction_state}, "
            f"message_queue={self.message_queue!r}, queue_offset={self.queue_offset})"
        )

    def to_json(self) -> dict:
        return {
            **super().to_json(),
            "transactionId": self.transaction_id,
            "localTransactionState": self.local_transaction_state.value,
        }
