"""A SYNC_MASTER's sync state set in controller mode (``broker.sync_state``): the order of
its steps against the HA agent's table and the controller's answers, and what producers may
count as durable. The HA agent is played here by writing its rows and ``SET_APPLIED`` into
the table's words, and by computing CONFIRMED_OFFSET by its rule (``agent_confirms``)."""

from __future__ import annotations

import numpy as np

from shmq.broker.ha.sync_state import EXPAND_GAP, SyncState
from shmq.ipc import counters as cn
from shmq.ipc import ha_table as ht

FALLBEHIND = 100 * EXPAND_GAP
A, B = ("127.0.0.1", 40001), ("127.0.0.1", 40002)  # two slaves' HA connections
A_ADDR, B_ADDR = "127.0.0.1:40001", "127.0.0.1:40002"


class Wakes:
    """Records the durable offsets producers were woken with."""

    def __init__(self) -> None:
        self.offsets: list[int] = []

    def wake(self, durable: int) -> None:
        self.offsets.append(durable)


class Master:
    """Counters, an HA table and a SyncState over them."""

    def __init__(self, write: int = 0, sync_flush: bool = False) -> None:
        self.words = np.zeros(cn.SIZE // 8, dtype=np.int64)
        self.words[cn.CONTROLLER_MODE] = 1
        self.words[cn.WRITE_OFFSET] = write
        self.table = np.zeros(ht.SIZE // 8, dtype=np.int64)
        self.wakes = Wakes()
        self.state = SyncState(self.words, self.table, self.wakes, sync_flush, FALLBEHIND)
        self.conns: dict[int, tuple[tuple[str, int], int]] = {}  # id -> (address, ack)

    def connect(self, conn_id: int, addr: tuple[str, int], ack: int) -> None:
        self.conns[conn_id] = (addr, ack)
        self._rows()

    def ack(self, conn_id: int, offset: int) -> None:
        self.conns[conn_id] = (self.conns[conn_id][0], offset)
        self._rows()

    def disconnect(self, conn_id: int) -> None:
        del self.conns[conn_id]
        self._rows()

    def _rows(self) -> None:
        rows = [(cn.pack_address(*a), ack, 0, 0, c) for c, (a, ack) in self.conns.items()]
        ht.publish_rows(self.table, rows)

    def agent_confirms(self) -> int:
        """The HA agent's pass: take the published set, publish what its members acked."""
        version, mode, members = ht.read_set(self.table)
        self.table[ht.SET_APPLIED] = version
        assert mode == ht.ALL_MEMBERS
        acks = [ack for c, (_, ack) in self.conns.items() if c in members]
        if members and len(acks) == len(members):
            self.words[cn.CONFIRMED_OFFSET] = max(self.words[cn.CONFIRMED_OFFSET], min(acks))
        return int(self.words[cn.CONFIRMED_OFFSET])

    def durable(self) -> int:
        return cn.durable_offset(self.words, False, True)

    def members(self) -> frozenset[int]:
        return ht.read_set(self.table)[2]


def test_alone_only_after_the_controller_recorded_it_and_producers_are_woken():
    m = Master(write=1000)
    report = m.state.report()
    assert report.addrs == () and not m.words[cn.ACK_ALONE]
    assert m.durable() == 0  # a send waits for a slave's ack
    m.state.answered(report, alone=False)  # not recorded yet (an older answer)
    assert not m.words[cn.ACK_ALONE]
    m.state.answered(report, alone=True)
    assert m.words[cn.ACK_ALONE] == 1 and m.wakes.offsets == [1000]
    assert m.durable() == 1000


def test_a_slave_joins_once_counted_and_reports_once_it_holds_what_was_acked_alone():
    m = Master(write=10 * EXPAND_GAP)
    m.state.answered(m.state.report(), alone=True)
    m.connect(1, A, 0)  # far behind: the master goes on acking alone
    assert m.state.report().addrs == () and m.members() == frozenset()
    m.ack(1, 10 * EXPAND_GAP - 100)  # close: it joins the set the agent counts
    assert m.state.report().addrs == () and m.members() == {1}
    assert m.words[cn.ACK_ALONE] == 1  # until the agent counts with it
    m.agent_confirms()
    assert m.state.report().addrs == () and not m.words[cn.ACK_ALONE]
    assert m.state.members[1] == 10 * EXPAND_GAP  # its target: the write offset then
    m.words[cn.WRITE_OFFSET] += 500  # sends now wait for the slave
    assert m.agent_confirms() == m.durable() == 10 * EXPAND_GAP - 100
    m.state.answered(m.state.report(), alone=True)  # while joining: acks alone stay off
    assert not m.words[cn.ACK_ALONE]
    m.ack(1, 10 * EXPAND_GAP)  # holds all that was acknowledged alone
    assert m.state.due()
    report = m.state.report()
    assert report.addrs == (A_ADDR,)
    m.state.answered(report, alone=False)
    assert not m.state.due()


def test_losing_the_member_reports_it_gone_and_acks_alone_once_recorded():
    m = Master(write=500)
    m.state.answered(m.state.report(), alone=True)
    m.connect(1, A, 500)
    m.state.report()
    m.agent_confirms()
    report = m.state.report()
    m.state.answered(report, alone=False)
    assert report.addrs == (A_ADDR,)
    m.disconnect(1)
    m.words[cn.WRITE_OFFSET] = 700
    assert m.state.due()
    report = m.state.report()
    assert report.addrs == () and report.dropping == {1}
    assert m.members() == {1}  # still counted (nothing acked) until the controller records
    assert m.durable() == 500
    m.state.answered(report, alone=True)
    assert m.members() == frozenset() and m.durable() == 700 and m.wakes.offsets[-1] == 700


def test_a_member_that_falls_too_far_behind_is_reported_out():
    m = Master(write=500)
    m.connect(1, A, 500)
    m.state.report()
    m.agent_confirms()
    m.state.answered(m.state.report(), alone=False)
    m.words[cn.WRITE_OFFSET] = 500 + FALLBEHIND  # connected, but as far behind as 4.9 allows
    report = m.state.report()
    assert report.addrs == () and report.dropping == {1}
    m.state.answered(report, alone=True)
    assert m.words[cn.ACK_ALONE] == 1


def test_with_two_members_every_ack_counts_and_the_slow_one_leaves_first():
    """allAckInSyncStateSet: a send is acknowledged once both members acked it; a member
    that stops acknowledging holds sends back until the controller recorded it gone."""
    m = Master(write=1000)
    m.connect(1, A, 1000)
    m.connect(2, B, 1000)
    m.state.report()
    m.agent_confirms()
    report = m.state.report()
    assert report.addrs == (A_ADDR, B_ADDR) and m.members() == {1, 2}
    m.state.answered(report, alone=False)
    m.words[cn.WRITE_OFFSET] = 2000
    m.ack(1, 2000)
    assert m.agent_confirms() == 1000  # B has not acked: nothing past 1000 is durable
    m.ack(2, 1500)
    assert m.agent_confirms() == 1500
    m.disconnect(2)  # B is gone with 1500
    assert m.agent_confirms() == 1500  # a member missing: nothing more is acknowledged
    report = m.state.report()
    assert report.addrs == (A_ADDR,) and report.dropping == {2}
    m.state.answered(report, alone=False)
    assert m.members() == {1} and m.agent_confirms() == 2000  # A alone now counts
    assert not m.words[cn.ACK_ALONE]


def test_a_reconnected_slave_is_another_connection_and_joins_again():
    """A slave's new connection (the HA agent restarted, or the slave reconnected) has a new
    id: the old one leaves the set, the new one must reach its own target first."""
    m = Master(write=800)
    m.connect(1, A, 800)
    m.state.report()
    m.agent_confirms()
    m.state.answered(m.state.report(), alone=False)
    m.disconnect(1)
    m.connect(2, A, 600)  # the same address, behind
    report = m.state.report()
    assert report.addrs == () and report.dropping == {1} and m.members() == {1, 2}
    m.state.answered(report, alone=True)  # not alone: the new connection is joining
    assert m.members() == {2} and not m.words[cn.ACK_ALONE]
    m.agent_confirms()
    assert m.state.report().addrs == ()
    m.ack(2, 800)
    assert m.state.report().addrs == (A_ADDR,)


def test_the_slave_leaving_while_joining_goes_back_to_alone():
    m = Master(write=100, sync_flush=True)
    m.state.answered(m.state.report(), alone=True)
    m.connect(1, A, 50)
    m.state.report()
    m.agent_confirms()
    m.state.report()  # its target taken: acks alone stop
    assert not m.words[cn.ACK_ALONE]
    m.disconnect(1)
    report = m.state.report()
    assert report.dropping == {1}
    m.state.answered(report, alone=True)
    assert m.words[cn.ACK_ALONE] == 1
    assert cn.durable_offset(m.words, True, True) == 0  # SYNC_FLUSH still waits for the flush
