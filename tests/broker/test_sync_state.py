"""A SYNC_MASTER's in-sync protocol in controller mode (``broker.sync_state``): the order of
its steps against the controller's answers, and what producers may count as durable."""

from __future__ import annotations

import numpy as np

from shmq.broker.sync_state import EXPAND_GAP, SyncState
from shmq.ipc import counters as cn

FALLBEHIND = 100 * EXPAND_GAP


class Wakes:
    """Records the durable offsets producers were woken with."""

    def __init__(self) -> None:
        self.offsets: list[int] = []

    def wake(self, durable: int) -> None:
        self.offsets.append(durable)


def words(write: int = 0, confirmed: int = 0, slaves: int = 0) -> np.ndarray:
    w = np.zeros(cn.SIZE // 8, dtype=np.int64)
    w[cn.CONTROLLER_MODE] = 1
    w[cn.WRITE_OFFSET], w[cn.CONFIRMED_OFFSET], w[cn.HA_SLAVES] = write, confirmed, slaves
    return w


def test_alone_only_after_the_controller_recorded_it_and_producers_are_woken():
    w, wakes = words(write=1000), Wakes()
    s = SyncState(w, wakes, False, FALLBEHIND)
    assert s.in_sync() == 0 and not w[cn.ACK_ALONE]
    assert cn.durable_offset(w, False, True) == 0  # a send waits for a slave's ack
    s.answered(0, alone=False)  # not recorded yet (an older answer): still no acks alone
    assert not w[cn.ACK_ALONE]
    s.answered(0, alone=True)
    assert w[cn.ACK_ALONE] == 1 and wakes.offsets == [1000]
    assert cn.durable_offset(w, False, True) == 1000


def test_a_slave_far_behind_leaves_the_master_alone_a_close_one_ends_it():
    w, wakes = words(write=10 * EXPAND_GAP, confirmed=0, slaves=1), Wakes()
    s = SyncState(w, wakes, False, FALLBEHIND)
    s.answered(0, alone=True)
    assert s.in_sync() == 0 and w[cn.ACK_ALONE] == 1  # catching up: still acks alone
    w[cn.CONFIRMED_OFFSET] = 10 * EXPAND_GAP - 100  # close: stop acking alone first
    assert s.in_sync() == 0 and not w[cn.ACK_ALONE]
    assert s.target == 10 * EXPAND_GAP and s.due() is False
    w[cn.WRITE_OFFSET] += 500  # sends now wait for the slave
    assert cn.durable_offset(w, False, True) == 10 * EXPAND_GAP - 100
    s.answered(0, alone=True)  # an answer while expanding does not restore acks alone
    assert not w[cn.ACK_ALONE]
    w[cn.CONFIRMED_OFFSET] = 10 * EXPAND_GAP  # the slave holds all that was acked alone
    assert s.due() and s.in_sync() == 1
    s.answered(1, alone=False)
    assert s.in_sync() == 1 and not s.due() and s.target == -1


def test_losing_the_slave_reports_none_and_acks_alone_once_recorded():
    w, wakes = words(write=500, confirmed=500, slaves=1), Wakes()
    s = SyncState(w, wakes, False, FALLBEHIND)
    s.answered(1, alone=False)
    w[cn.HA_SLAVES] = 0
    w[cn.WRITE_OFFSET] = 700
    assert s.due() and s.in_sync() == 0
    assert cn.durable_offset(w, False, True) == 500  # until the controller records it
    s.answered(0, alone=True)
    assert cn.durable_offset(w, False, True) == 700 and wakes.offsets == [700]


def test_a_slave_that_falls_too_far_behind_is_reported_out_of_sync():
    w, wakes = words(write=500, confirmed=500, slaves=1), Wakes()
    s = SyncState(w, wakes, False, FALLBEHIND)
    s.answered(1, alone=False)
    w[cn.WRITE_OFFSET] = 500 + FALLBEHIND  # connected, but as far behind as 4.9 allows
    assert s.due() and s.in_sync() == 0
    s.answered(0, alone=True)
    assert w[cn.ACK_ALONE] == 1


def test_the_slave_leaving_while_expanding_goes_back_to_alone():
    w, wakes = words(write=100, confirmed=50, slaves=1), Wakes()
    s = SyncState(w, wakes, True, FALLBEHIND)
    s.answered(0, alone=True)
    s.in_sync()  # close: expanding
    assert not w[cn.ACK_ALONE]
    w[cn.HA_SLAVES] = 0
    assert s.in_sync() == 0 and s.target == -1
    s.answered(0, alone=True)
    assert w[cn.ACK_ALONE] == 1
    assert cn.durable_offset(w, True, True) == 0  # SYNC_FLUSH still waits for the flush
