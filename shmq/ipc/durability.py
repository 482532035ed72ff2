"""When a stored send may be answered SEND_OK: RocketMQ 4.9's flush and replication waits
(``CommitLog.handleDiskFlush`` / ``handleHA``), one rule for a producer's ring answers and
the broker's answers to sends over TCP.

A send ending at CommitLog offset ``end`` waits until it is flushed (SYNC_FLUSH) and
acknowledged by a slave (SYNC_MASTER), at most ``syncFlushTimeout``: FLUSH_DISK_TIMEOUT or
FLUSH_SLAVE_TIMEOUT then. A SYNC_MASTER without a slave in reach (none connected, or one
``haSlaveFallbehindMax`` or more behind) answers SLAVE_NOT_AVAILABLE at once, after the
flush. In controller mode there is no such check (RocketMQ 5): a send waits for the slave
until the controller has recorded that none is in sync (``ACK_ALONE``), then needs no
slave's ack. The result is the status's name, as RocketMQ's ``SendStatus`` spells it.
"""

from __future__ import annotations

import time

from shmq.ipc import counters as cn
from shmq.ipc.ring_appender import RingAppender

SEND_OK = "SEND_OK"
FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


def durability(
    ring: RingAppender, end: int, sync_flush: bool, sync_master: bool, fallbehind_max: int,
    timeout_s: float,
) -> str:  # fmt: skip
    """The status of a send ending at ``end`` (waiting as the broker promises); a failed
    flush raises ``SendError``."""
    words = ring.counters
    if cn.durable_offset(words, sync_flush, sync_master) >= end:
        return SEND_OK
    deadline = time.monotonic() + timeout_s
    if (
        sync_master
        and not words[cn.CONTROLLER_MODE]
        and not cn.slave_ok(words, end, fallbehind_max)
    ):
        if sync_flush and not ring.wait_durable(end, deadline, True, False):
            return FLUSH_DISK_TIMEOUT
        return SLAVE_NOT_AVAILABLE
    if ring.wait_durable(end, deadline, sync_flush, sync_master):
        return SEND_OK
    if sync_flush and int(words[cn.FLUSHED_OFFSET]) < end:
        return FLUSH_DISK_TIMEOUT
    return FLUSH_SLAVE_TIMEOUT
