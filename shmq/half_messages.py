"""The system topics and properties of transactional messages (RocketMQ 4.9's
``TransactionalMessageUtil`` and ``MessageConst``), shared by the producer that writes half
messages and the broker that commits, rolls back and checks them.

A half message is an ordinary record in ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0, invisible to
consumers because nobody subscribes there. Its properties name the real topic and queue
(``REAL_TOPIC`` / ``REAL_QID``), mark it (``TRAN_MSG=true``) and name the producer group
that can tell its outcome (``PGROUP``). Each outcome is an op record in
``RMQ_SYS_TRANS_OP_HALF_TOPIC`` (tag ``d``, body the half's queue offset in decimal ASCII,
4.9's format); a half checked too often is moved to ``TRANS_CHECK_MAX_TIME_TOPIC``.
"""

from __future__ import annotations

from shmq.names import CHECK_MAX_TIME_TOPIC as CHECK_MAX_TIME_TOPIC
from shmq.names import HALF_TOPIC as HALF_TOPIC
from shmq.names import OP_TOPIC as OP_TOPIC

SYS_TRANS_GROUP = "CID_RMQ_SYS_TRANS"  # whose offsets in consumerOffset.json track progress
HALF_QUEUE_ID = 0
OP_TAG = "d"  # TransactionalMessageUtil.REMOVETAG

REAL_TOPIC = "REAL_TOPIC"
REAL_QID = "REAL_QID"
TRAN_MSG = "TRAN_MSG"
PGROUP = "PGROUP"
CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
# the queue offset of the half message a re-appended copy stands for (MessageConst's
# TRANSACTION_PREPARED_QUEUE_OFFSET)
PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"

# 4.9 builds the op message with ``new Message(topic, "d", body)``: TAGS and WAIT=true, in
# the order of a 16-bucket Java HashMap (WAIT's bucket 13 before TAGS's 14)
OP_PROPERTIES = b"WAIT\x01true\x02TAGS\x01d\x02"

# EndTransactionRequestHeader.commitOrRollback (MessageSysFlag's transaction types)
TRANSACTION_NOT_TYPE = 0
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC


def half_properties(topic: str, queue_id: int, group: str) -> bytes:
    """What a half message for ``topic`` / ``queue_id`` of producer ``group`` adds to its
    user properties (what RocketMQ's producer and broker add between them)."""
    return (
        f"{TRAN_MSG}\x01true\x02{PGROUP}\x01{group}\x02"
        f"{REAL_TOPIC}\x01{topic}\x02{REAL_QID}\x01{queue_id}\x02"
    ).encode()
