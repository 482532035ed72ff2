"""Queue locks for orderly consumers (RocketMQ's ``RebalanceLockManager``,
``LOCK_BATCH_MQ`` / ``UNLOCK_BATCH_MQ``).

An orderly consumer processes a queue only while it holds the queue's lock for its group.
A lock belongs to one client id; it lapses ``rebalanceLockMaxLiveTime`` (60 s) after its
last renewal (clients renew every 20 s), so a consumer that died without unlocking holds its
queues for at most that long. Locks live in the broker's memory only, as in RocketMQ: after
a broker restart every consumer locks again.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from shmq.names import MAX_GROUP_LENGTH, MAX_TOPIC_LENGTH, name_problem
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode, ResponseError
from shmq.remoting.server import Connection, RemotingServer

log = logging.getLogger(__name__)

MAX_QUEUES_PER_REQUEST = 4096

Queue = tuple[str, str, int]  # (topic, broker name, queue id)


class QueueLocks:
    """``{group: {queue: (client id, last renewal ms)}}``; thread-safe."""

    def __init__(self, max_live_ms: int = 60_000) -> None:
        self.max_live_ms = max_live_ms
        self._locks: dict[str, dict[Queue, tuple[str, int]]] = {}
        self._lock = threading.Lock()

    def lock(self, group: str, client_id: str, queues: list[Queue]) -> list[Queue]:
        """Lock (or renew) ``queues`` for ``client_id``; returns those it holds now: free
        ones, lapsed ones and its own."""
        now = _now_ms()
        held = []
        with self._lock:
            table = self._locks.setdefault(group, {})
            for q in queues:
                owner = table.get(q)
                if owner is None or owner[0] == client_id or now - owner[1] > self.max_live_ms:
                    if owner is not None and owner[0] != client_id:
                        log.info("queue %s of group %s: lock of %s lapsed, now %s's",
                                 q, group, owner[0], client_id)  # fmt: skip
                    table[q] = (client_id, now)
                    held.append(q)
        return held

    def unlock(self, group: str, client_id: str, queues: list[Queue]) -> None:
        """Release the locks ``client_id`` holds among ``queues`` (others' stay)."""
        with self._lock:
            table = self._locks.get(group, {})
            for q in queues:
                owner = table.get(q)
                if owner is not None and owner[0] == client_id:
                    del table[q]

    def owner(self, group: str, queue: Queue) -> str | None:
        """The client holding ``queue`` now (None when free or lapsed)."""
        with self._lock:
            owner = self._locks.get(group, {}).get(queue)
        if owner is None or _now_ms() - owner[1] > self.max_live_ms:
            return None
        return owner[0]

    # -- the control plane --------------------------------------------------------------

    def register(self, server: RemotingServer) -> None:
        server.register(RequestCode.LOCK_BATCH_MQ, self.handle_lock)
        server.register(RequestCode.UNLOCK_BATCH_MQ, self.handle_unlock)

    def handle_lock(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        group, client_id, queues = _batch(request)
        held = self.lock(group, client_id, queues)
        body = {"lockOKMQSet": [_queue_json(q) for q in held]}
        return RemotingCommand.response_to(request, body=RemotingCommand.body_json(body))

    def handle_unlock(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        group, client_id, queues = _batch(request)
        self.unlock(group, client_id, queues)
        return RemotingCommand.response_to(request)


def _batch(request: RemotingCommand) -> tuple[str, str, list[Queue]]:
    """RocketMQ's ``LockBatchRequestBody``: ``consumerGroup``, ``clientId``, ``mqSet``."""
    body = request.json_body()
    if not isinstance(body, dict):
        raise ResponseError(ResponseCode.SYSTEM_ERROR, "the body is not a LockBatchRequestBody")
    group, client_id, mq_set = body.get("consumerGroup"), body.get("clientId"), body.get("mqSet")
    problem = name_problem("group", group, MAX_GROUP_LENGTH)
    if problem:
        raise ResponseError(ResponseCode.SYSTEM_ERROR, problem)
    if not isinstance(client_id, str) or not client_id:
        raise ResponseError(ResponseCode.SYSTEM_ERROR, "the lock request has no clientId")
    if not isinstance(mq_set, list) or len(mq_set) > MAX_QUEUES_PER_REQUEST:
        raise ResponseError(
            ResponseCode.SYSTEM_ERROR,
            f"mqSet must be a list of at most {MAX_QUEUES_PER_REQUEST} message queues",
        )
    return group, client_id, [_queue(e) for e in mq_set]


def _queue(entry: Any) -> Queue:
    if not isinstance(entry, dict):
        raise ResponseError(ResponseCode.SYSTEM_ERROR, f"message queue {entry!r} is not an object")
    topic, broker, qid = entry.get("topic"), entry.get("brokerName"), entry.get("queueId")
    problem = name_problem("topic", topic, MAX_TOPIC_LENGTH)
    if problem or not isinstance(broker, str) or type(qid) is not int or not 0 <= qid < 65536:
        raise ResponseError(
            ResponseCode.SYSTEM_ERROR, problem or f"message queue {entry!r} is not valid"
        )
    return topic, broker, qid


def _queue_json(q: Queue) -> dict[str, Any]:
    return {"topic": q[0], "brokerName": q[1], "queueId": q[2]}


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000
