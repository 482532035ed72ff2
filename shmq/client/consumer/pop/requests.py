"""The requests of POP consumption (RocketMQ 5's remoting, ``MQClientAPIImpl``): POP_MESSAGE,
ACK_MESSAGE, BATCH_ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME, built from a receipt
handle (``receipt``) or, for a whole pop's messages, from its header.

BATCH_ACK_MESSAGE carries, per checkpoint (topic, retry flag, queue, start offset, revive
queue, pop time, invisible time), the acked offsets as a bit set over ``offset − start``
(Java's ``BitSet.toByteArray``: little-endian bit order, no trailing zero bytes, Base64 in
fastjson's JSON), so one request acks a pop of 32 messages in a few dozen bytes.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping

import numpy as np

from shmq.client.consumer.pop.receipt import AckKey
from shmq.pop_receipt import Receipt
from shmq.remoting.protocol import RemotingCommand, RequestCode

MAX_MSG_NUMS = 32  # PopMessageProcessor refuses more (INVALID_PARAMETER)
LOCAL_MAX_MSG_NUMS = 1024  # shmq's broker lets a local pop (no body) take this many
INIT_MODE_MIN, INIT_MODE_MAX = 0, 1  # ConsumeInitMode: a new group starts at the min / max


def pop_request(
    group: str, topic: str, expression: str, max_nums: int, invisible_ms: int, poll_ms: int,
    born_ms: int, init_mode: int, order: bool, local: bool, expression_type: str = "TAG",
) -> RemotingCommand:  # fmt: skip
    """POP_MESSAGE of every queue of ``topic`` (queueId −1) on one broker; ``local``: shmq's
    ``shmqLocal``, the broker answers without a body and the client reads the records
    from the store's files; ``expression_type``: TAG or SQL92 (the broker filters)."""
    fields = {"consumerGroup": group, "topic": topic, "queueId": -1, "maxMsgNums": max_nums,
              "invisibleTime": invisible_ms, "pollTime": poll_ms, "bornTime": born_ms,
              "initMode": init_mode, "expType": expression_type, "exp": expression,
              "order": order,
              "shmqLocal": True if local else None}  # fmt: skip
    return RemotingCommand.request(RequestCode.POP_MESSAGE, fields)


def ack_request(group: str, real_topic: str, handle: Receipt) -> RemotingCommand:
    """ACK_MESSAGE of one message (``real_topic``: the topic of its queue)."""
    fields = {"consumerGroup": group, "topic": real_topic, "queueId": handle.queue_id,
              "extraInfo": handle.encode(), "offset": handle.queue_offset}  # fmt: skip
    return RemotingCommand.request(RequestCode.ACK_MESSAGE, fields)


def change_invisible_request(
    group: str, real_topic: str, handle: Receipt, invisible_ms: int
) -> RemotingCommand:
    """CHANGE_MESSAGE_INVISIBLETIME of one message: visible again ``invisible_ms`` from
    now."""
    fields = {"consumerGroup": group, "topic": real_topic, "queueId": handle.queue_id,
              "extraInfo": handle.encode(), "offset": handle.queue_offset,
              "invisibleTime": invisible_ms}  # fmt: skip
    return RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, fields)


def bit_set(indices: Iterable[int] | np.ndarray) -> str:
    """Java's ``BitSet.toByteArray`` of ``indices``, Base64 (fastjson's ``byte[]``)."""
    picked = np.asarray(indices if isinstance(indices, np.ndarray) else list(indices),
                        dtype=np.int64)  # fmt: skip
    bits = np.zeros(int(picked.max()) + 1 if picked.size else 0, dtype=np.bool_)
    bits[picked] = True
    return base64.b64encode(np.packbits(bits, bitorder="little").tobytes()).decode()


def batch_ack_request(
    group: str, broker_name: str, acks: Mapping[AckKey, Iterable[int]]
) -> RemotingCommand:
    """BATCH_ACK_MESSAGE of the offsets of each checkpoint in ``acks`` (all on
    ``broker_name``)."""
    entries = []
    for (topic, flag, queue_id, start, revive, pop_time, invisible), offsets in acks.items():
        entries.append({"c": group, "t": topic, "r": flag, "so": start, "q": queue_id,
                        "rq": revive, "pt": pop_time, "it": invisible,
                        "b": bit_set(np.asarray(offsets, dtype=np.int64) - start)})  # fmt: skip
    body = RemotingCommand.body_json({"brokerName": broker_name, "acks": entries})
    return RemotingCommand.request(RequestCode.BATCH_ACK_MESSAGE, None, body)
