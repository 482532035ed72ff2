"""Delay levels (RocketMQ's ``messageDelayLevel``) and the schedule topic they live in.

A message sent with delay level ``n`` is stored in ``SCHEDULE_TOPIC_XXXX`` queue ``n - 1``
with its real topic and queue id in the ``REAL_TOPIC`` / ``REAL_QID`` properties; the
consume-queue tag slot of such a record holds its delivery time (store time + the level's
delay), which is what the schedule agent waits for.
"""

from __future__ import annotations

import numpy as np

from shmq.errors import ConfigError

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
MAX_LEVELS = 64


def parse_delay_levels(text: str) -> np.ndarray:
    """``"1s 5s 10s"`` → the levels' delays in ms (level ``i + 1`` at index ``i``), as
    RocketMQ's ``parseDelayLevel``: tokens split on spaces, the last character the unit
    (s, m, h, d), the rest a whole number; ``ConfigError`` naming a bad token."""
    tokens = text.split()
    if not tokens:
        raise ConfigError("messageDelayLevel is empty: it needs at least one level like '1s'")
    if len(tokens) > MAX_LEVELS:
        raise ConfigError(f"messageDelayLevel has {len(tokens)} levels, above {MAX_LEVELS}")
    delays = np.empty(len(tokens), dtype=np.int64)
    for i, token in enumerate(tokens):
        unit, number = _UNIT_MS.get(token[-1]), token[:-1]
        if unit is None or not number.isdigit() or int(number) <= 0:
            raise ConfigError(
                f"messageDelayLevel token {token!r} (level {i + 1}) is not a positive whole "
                "number followed by s, m, h or d"
            )
        delays[i] = int(number) * unit
    return delays


def schedule_properties(topic: str, queue_id: int, level: int, levels: int) -> tuple[int, bytes]:
    """Where a message for ``topic`` / ``queue_id`` with delay ``level`` is stored instead:
    ``(schedule queue id, the properties to append)`` (``REAL_TOPIC``, ``REAL_QID`` and the
    level, capped at the last one as RocketMQ caps rather than refuses)."""
    level = min(level, levels)
    props = f"REAL_TOPIC\x01{topic}\x02REAL_QID\x01{queue_id}\x02DELAY\x01{level}\x02"
    return level - 1, props.encode()
