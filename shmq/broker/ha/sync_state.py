"""A SYNC_MASTER's sync state set in controller mode (RocketMQ 5's SyncStateSet with
allAckInSyncStateSet): which slave connections must acknowledge a send before it is
answered SEND_OK, kept in step with the controller, which elects a new master only from the
slaves it recorded in the set.

The HA agent counts the acks of the set's members only (``ha_table``'s ``ALL_MEMBERS``:
the smallest ack of the members, none while a member is not connected), so every member
holds every acknowledged send. A master whose set is empty does not answer
SLAVE_NOT_AVAILABLE: once the controller has recorded the set empty (the group is "alone":
no slave may be elected, since it may lack what the master acknowledges now) it
acknowledges sends without a slave (``counters.ACK_ALONE``).

The set changes in an order that keeps every member the controller recorded holding every
acknowledged send:

1. shrink: a member's connection is gone, or it fell ``haSlaveFallbehindMax`` behind
   (4.9's ``isSlaveOK``); the next heartbeat reports the set without it, and only once the
   controller recorded that does it leave the set the HA agent counts (with the last one,
   ``ACK_ALONE`` is set and the producers waiting for a slave's ack are woken).
2. expand: a connection less than ``EXPAND_GAP`` behind joins the set the HA agent counts;
   once the agent counts with it (``SET_APPLIED``), ``ACK_ALONE`` is cleared and the write
   offset taken as the member's target: every send acknowledged before, alone or not, lies
   below it, and every later one waits for the member. Once the member acknowledged its
   target, the next heartbeat reports it.

The controller learns which broker a reported connection belongs to from the slaves' own
heartbeats (their HA connection's address, ``counters.HA_CLIENT_ADDR``). With several
slaves every member must acknowledge: a slow member holds sends back until it is reported
out of the set, as in RocketMQ 5.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from shmq.broker.agents.producer_wakeups import ProducerWakeups
from shmq.ipc import counters as cn
from shmq.ipc import ha_table as ht
from shmq.ipc.segment import fence

EXPAND_GAP = 1 << 20  # a slave this close to the write offset joins the set
PENDING = -2  # a joining member the HA agent may not count yet
VERIFIED = -1  # a member that acknowledged its target


@dataclass(frozen=True)
class Report:
    """What one heartbeat tells the controller: the HA addresses of the verified members,
    and the members it leaves out because they are gone or too far behind."""

    addrs: tuple[str, ...]
    dropping: frozenset[int] = frozenset()


class SyncState:
    """The master's side of the protocol above; the supervisor calls ``report`` to build
    each heartbeat and ``answered`` with the controller's answer to it (from the register
    thread, while its main loop asks ``due``: a lock orders them)."""

    def __init__(
        self, words, table, wakeups: ProducerWakeups, sync_flush: bool, fallbehind_max: int
    ) -> None:
        self.words = words
        self.table = table
        self.wakeups = wakeups
        self.sync_flush = sync_flush
        self.fallbehind_max = fallbehind_max
        self.members: dict[int, int] = {}  # connection id -> target, PENDING or VERIFIED
        self._addrs: dict[int, str] = {}
        self.reported: tuple[str, ...] | None = None  # last recorded by the controller
        self._version = ht.publish_set(table, ht.ALL_MEMBERS, ())
        self._lock = threading.Lock()

    def report(self) -> Report:
        """The set to report now, taking the expand steps that are due."""
        with self._lock:
            rows = {row[ht.CONN_ID]: row for row in ht.read_rows(self.table)}
            write = cn.load(self.words, cn.WRITE_OFFSET)

            def lag(conn_id: int) -> int | None:
                row = rows.get(conn_id)
                ack = -1 if row is None else row[ht.ACK_OFFSET]
                return None if ack < 0 else write - ack

            dropping = frozenset(
                c for c in self.members if (gap := lag(c)) is None or gap >= self.fallbehind_max
            )
            joining = [c for c in rows if c not in self.members and (g := lag(c)) is not None
                       and g <= EXPAND_GAP]  # fmt: skip
            if joining and len(self.members) + len(joining) <= ht.MAX_SLAVES:
                for conn_id in joining:
                    self.members[conn_id] = PENDING
                    self._addrs[conn_id] = cn.unpack_address(rows[conn_id][ht.ADDR])
                self._publish()
            if PENDING in self.members.values() and self.table[ht.SET_APPLIED] >= self._version:
                if cn.load(self.words, cn.ACK_ALONE):
                    cn.publish(self.words, cn.ACK_ALONE, 0)
                    fence()  # no send is acknowledged alone past the target taken next
                target = cn.load(self.words, cn.WRITE_OFFSET)
                for conn_id, state in self.members.items():
                    if state == PENDING:
                        self.members[conn_id] = target
            addrs = []
            for conn_id, state in self.members.items():
                if conn_id in dropping:
                    continue
                if state >= 0 and rows[conn_id][ht.ACK_OFFSET] >= state:
                    self.members[conn_id] = state = VERIFIED
                if state == VERIFIED:
                    addrs.append(self._addrs[conn_id])
            return Report(tuple(sorted(addrs)), dropping)

    def due(self) -> bool:
        """Whether the controller should hear a different set now (a report not to wait a
        heartbeat interval for)."""
        return self.report().addrs != self.reported

    def answered(self, report: Report, alone: bool) -> None:
        """The controller recorded ``report`` and answers ``alone`` (no member recorded)."""
        with self._lock:
            self.reported = report.addrs
            left = [c for c in report.dropping if c in self.members]
            for conn_id in left:
                del self.members[conn_id]
                del self._addrs[conn_id]
            if left:
                self._publish()
            if alone and not self.members and not cn.load(self.words, cn.ACK_ALONE):
                cn.publish(self.words, cn.ACK_ALONE, 1)
                fence()
                self.wakeups.wake(cn.durable_offset(self.words, self.sync_flush, True))

    def _publish(self) -> None:
        self._version = ht.publish_set(self.table, ht.ALL_MEMBERS, tuple(self.members))
