"""A consumer's ``ConsumerRunningInfo``: what it answers when a broker passes it an admin's
GET_CONSUMER_RUNNING_INFO (``mqadmin consumerStatus``, ``shmq admin consumer-status``).

RocketMQ's body, in fastjson's dialect (``MessageQueue`` map keys are objects)::

    {"properties": {"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY", ...},
     "subscriptionSet": [SubscriptionData, ...],
     "mqTable": {MessageQueue: ProcessQueueInfo, ...},
     "statusTable": {}, "userConsumerInfo": {"consumed": "12", ...}, "jstack": "..."}

``ProcessQueueInfo`` has the queue's committed offset and what is pulled but not yet
consumed (count, size, offset range), its broker lock (orderly consumers) and the times of
its last pull and consume. shmq keeps no per-topic rates, so ``statusTable`` (RocketMQ's
per-topic TPS and RT) is empty and the consumer's counters go to ``userConsumerInfo``;
``jstack`` is a dump of this process's Python threads.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any

import shmq
from shmq.remoting.admin_bodies import queue_table

if TYPE_CHECKING:
    from shmq.client.consumer.base import ConsumerBase
    from shmq.client.consumer.process_queue import ProcessQueue
    from shmq.client.types import MessageQueue

MIB = 1 << 20


def running_info(consumer: ConsumerBase, jstack: bool) -> dict[str, Any]:
    """``consumer``'s ``ConsumerRunningInfo`` now (``jstack``: with a thread dump)."""
    properties = {
        "PROP_NAMESERVER_ADDR": consumer.namesrv,
        "PROP_CONSUME_TYPE": consumer.consume_type,
        "PROP_CLIENT_VERSION": f"shmq {shmq.__version__}",
        "PROP_CONSUMER_START_TIMESTAMP": str(consumer.started_ms),
        "consumerGroup": consumer.group,
        "messageModel": consumer.message_model.value,
        "consumeFromWhere": consumer.consume_from_where.value,
        **consumer._running_properties(),
    }
    with consumer._lock:
        queues = sorted(consumer._holdings())
        pqs = {mq: consumer._process_queue(mq) for mq in queues}
    rows = [(mq.topic, mq.broker_name, mq.queue_id, _queue_info(consumer, mq, pqs[mq]))
            for mq in queues]  # fmt: skip
    info = {
        "properties": properties,
        "subscriptionSet": [s.to_json() for s in consumer.subscriptions()],
        "mqTable": queue_table(rows),
        "statusTable": {},
        "userConsumerInfo": {k: str(v) for k, v in consumer.running_counters().items()},
    }
    if jstack:
        info["jstack"] = thread_dump()
    return info


def _queue_info(consumer: ConsumerBase, mq: MessageQueue, pq: ProcessQueue | None) -> dict:
    """RocketMQ's ``ProcessQueueInfo`` of ``mq`` (a pull consumer holds no process queue:
    only the committed offset is known)."""
    committed = consumer.offsets.read(mq) if consumer.offsets is not None else -1
    info = {
        "commitOffset": committed,
        "cachedMsgMinOffset": 0,
        "cachedMsgMaxOffset": 0,
        "cachedMsgCount": 0,
        "cachedMsgSizeInMiB": 0,
        "transactionMsgMinOffset": 0,
        "transactionMsgMaxOffset": 0,
        "transactionMsgCount": 0,
        "locked": False,
        "tryUnlockTimes": 0,
        "lastLockTimestamp": 0,
        "droped": False,
        "lastPullTimestamp": 0,
        "lastConsumeTimestamp": 0,
    }
    if pq is None:
        return info
    stats = pq.stats()
    if stats["msgCount"]:
        info["cachedMsgMinOffset"] = stats["commitOffset"]
        info["cachedMsgMaxOffset"] = stats["maxOffset"]
    info["cachedMsgCount"] = stats["msgCount"]
    info["cachedMsgSizeInMiB"] = stats["msgSize"] // MIB
    info["locked"] = pq.locked
    info["lastLockTimestamp"] = _wall_ms(pq.locked_at) if pq.locked else 0
    info["droped"] = pq.dropped
    info["lastPullTimestamp"] = _wall_ms(pq.last_pull)
    info["lastConsumeTimestamp"] = _wall_ms(pq.last_consume)
    return info


def _wall_ms(monotonic: float) -> int:
    """A ``time.monotonic()`` instant as epoch milliseconds."""
    return int((time.time() - (time.monotonic() - monotonic)) * 1000)


def thread_dump() -> str:
    """Every thread of this process with its stack (Java's ``jstack``, for Python)."""
    names = {t.ident: t.name for t in threading.enumerate()}
    parts = []
    for ident, frame in sys._current_frames().items():
        parts.append(f'"{names.get(ident, "?")}" ident={ident}\n')
        parts.extend("    " + line for line in traceback.format_stack(frame))
    return "".join(parts)
