"""The system topics delayed messages live in until their delivery time.

A message sent with delay level ``n`` is stored in ``SCHEDULE_TOPIC_XXXX`` queue ``n - 1``
with its real topic and queue id in the ``REAL_TOPIC`` / ``REAL_QID`` properties; the
consume-queue tag slot of such a record holds its delivery time (store time + the level's
delay, ``messageDelayLevel``), which is what the schedule agent waits for. A timer message
(RocketMQ 5: any delivery time, ``TIMER_DELIVER_MS``) is stored in ``rmq_sys_wheel_timer``
queue 0 the same way, its delivery time in ``TIMER_OUT_MS``. A recall (RocketMQ 5.3) stores
a delete marker there for the same time: a timer message with ``TIMER_DEL_UNIQKEY``, which
names the message to drop by its real topic and unique key (``delete_key``).
"""

from __future__ import annotations

from shmq.errors import InvalidMessageError
from shmq.names import SCHEDULE_TOPIC as SCHEDULE_TOPIC
from shmq.names import TIMER_TOPIC as TIMER_TOPIC


def schedule_properties(topic: str, queue_id: int, level: int, levels: int) -> tuple[int, bytes]:
    """Where a message for ``topic`` / ``queue_id`` with delay ``level`` is stored instead:
    ``(schedule queue id, the properties to append)`` (``REAL_TOPIC``, ``REAL_QID`` and the
    level, capped at the last one as RocketMQ caps rather than refuses)."""
    level = min(level, levels)
    props = f"REAL_TOPIC\x01{topic}\x02REAL_QID\x01{queue_id}\x02DELAY\x01{level}\x02"
    return level - 1, props.encode()


def timer_properties(topic: str, queue_id: int, deliver_ms: int) -> bytes:
    """The properties a timer message for ``topic`` / ``queue_id`` gets in the timer topic."""
    return (
        f"REAL_TOPIC\x01{topic}\x02REAL_QID\x01{queue_id}\x02"
        f"TIMER_OUT_MS\x01{deliver_ms}\x02TIMER_DELIVER_MS\x01{deliver_ms}\x02"
    ).encode()


def delete_key(topic: str, uniq_key: str) -> str:
    """RocketMQ's ``buildDeleteKey``: a message known by its real topic and unique key, as
    a query by key knows it; a delete marker's ``TIMER_DEL_UNIQKEY``."""
    return f"{topic}+{uniq_key}"


def timer_delete_properties(topic: str, uniq_key: str, deliver_ms: int) -> bytes:
    """The properties of the delete marker that recalls ``topic``'s timer message
    ``uniq_key`` due at ``deliver_ms``: a timer message of its own for the same time (so
    the same wheel slot), queue 0 of the topic as RocketMQ's ``RecallMessageProcessor``
    writes it, ``UNIQ_KEY`` the recalled message's (RocketMQ's response names it)."""
    marker = f"TIMER_DEL_UNIQKEY\x01{delete_key(topic, uniq_key)}\x02UNIQ_KEY\x01{uniq_key}\x02"
    return timer_properties(topic, 0, deliver_ms) + marker.encode()


def delayed_placement(
    topic: str, queue_id: int, level: int, deliver_ms: int, levels: int, max_delay_ms: int,
    now_ms: int,
) -> tuple[str, int, bytes]:  # fmt: skip
    """Where a message for ``topic`` / ``queue_id`` with delay ``level`` (or, without one,
    delivery time ``deliver_ms``) is stored: ``(topic, queue id, properties to append)``.
    One rule for the producer's rings and the broker's TCP sends: a level goes to the
    schedule topic; a delivery time still ahead to the timer topic, one that has passed is
    an ordinary message that keeps ``TIMER_DELIVER_MS``; one beyond ``max_delay_ms`` from
    ``now_ms`` is refused (``InvalidMessageError``)."""
    if level:
        qid, extra = schedule_properties(topic, queue_id, level, levels)
        return SCHEDULE_TOPIC, qid, extra
    ahead = deliver_ms - now_ms
    if ahead > max_delay_ms:
        raise InvalidMessageError(
            f"deliver_time_ms {deliver_ms} is {ahead / 1000:.0f} s ahead, beyond "
            f"the broker's timerMaxDelaySec {max_delay_ms // 1000}"
        )
    if ahead > 0:
        return TIMER_TOPIC, 0, timer_properties(topic, queue_id, deliver_ms)
    return topic, queue_id, f"TIMER_DELIVER_MS\x01{deliver_ms}\x02".encode()
