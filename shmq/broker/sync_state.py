"""A SYNC_MASTER's in-sync slave in controller mode (RocketMQ 5's SyncStateSet with
allAckInSyncStateSet, for a master and its slave).

In controller mode a SYNC_MASTER answers SEND_OK once its slave acknowledged a send, as in
classic mode, but a master without a slave in sync does not answer SLAVE_NOT_AVAILABLE: it
tells the controller, and once the controller has recorded it (the group is "alone": no slave
may be elected, since it may lack what the master acknowledges now) it acknowledges sends
without a slave (``counters.ACK_ALONE``). A slave that connects and catches up ends that:

1. shrink: the slave's connection is gone, or it fell ``haSlaveFallbehindMax`` behind (4.9's
   ``isSlaveOK``); the next heartbeat reports 0 in-sync slaves; the controller persists
   "alone" and answers so; only then ``ACK_ALONE`` is set (and the producers waiting for a
   slave's ack are woken).
2. expand: a slave is connected and less than ``EXPAND_GAP`` behind; ``ACK_ALONE`` is cleared
   first, then the write offset ``target`` is noted; once the slave acknowledged ``target``
   it holds everything acknowledged alone, and the next heartbeat reports it in sync.

The order makes elections safe: the controller records "alone" before the master
acknowledges anything alone, and hears "in sync" only after the master stopped doing so
and the slave holds all of it. With several slaves, any one in sync counts (as 4.9's
SYNC_MASTER, where one slave's ack is enough).
"""

from __future__ import annotations

from shmq.broker.producer_wakeups import ProducerWakeups
from shmq.ipc import counters as cn
from shmq.ipc.segment import fence

EXPAND_GAP = 1 << 20  # a slave this close to the write offset stops the master acking alone


class SyncState:
    """The master's side of the protocol above; the supervisor calls ``in_sync`` to build
    each heartbeat and ``answered`` with the controller's answer."""

    def __init__(
        self, words, wakeups: ProducerWakeups, sync_flush: bool, fallbehind_max: int
    ) -> None:
        self.words = words
        self.wakeups = wakeups
        self.sync_flush = sync_flush
        self.fallbehind_max = fallbehind_max
        self.reported = -1  # in-sync slaves the controller last heard of (-1: nothing yet)
        self.target = -1  # expanding: the write offset the slave must acknowledge

    def in_sync(self) -> int:
        """In-sync slaves to report now (0 or 1), taking the expand step when it is due."""
        words = self.words
        confirmed = cn.load(words, cn.CONFIRMED_OFFSET)
        if not cn.load(words, cn.HA_SLAVES) or (
            cn.load(words, cn.WRITE_OFFSET) - confirmed >= self.fallbehind_max
        ):
            self.target = -1
            return 0
        if self.reported > 0:
            return 1
        if self.target < 0:
            if cn.load(words, cn.WRITE_OFFSET) - confirmed > EXPAND_GAP:
                return 0  # still catching up: the master goes on acknowledging alone
            cn.publish(words, cn.ACK_ALONE, 0)
            fence()  # no send is acknowledged alone past the target taken next
            self.target = cn.load(words, cn.WRITE_OFFSET)
        return 1 if confirmed >= self.target else 0

    def due(self) -> bool:
        """Whether the controller should hear a different count now (a report not to wait
        a heartbeat interval for)."""
        return self.in_sync() != self.reported

    def answered(self, reported: int, alone: bool) -> None:
        """The controller recorded ``reported`` in-sync slaves and answers ``alone``."""
        self.reported = reported
        if reported:
            self.target = -1
        if alone and not reported and self.target < 0 and not cn.load(self.words, cn.ACK_ALONE):
            cn.publish(self.words, cn.ACK_ALONE, 1)
            fence()
            self.wakeups.wake(cn.durable_offset(self.words, self.sync_flush, True))
