"""The controller's election rule and epoch bookkeeping, in memory and over the namesrv."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shmq.errors import ConfigError, EpochNotReadyError, ResponseError
from shmq.namesrv.controller import Controller
from shmq.namesrv.server import NameServer
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RequestCode, ResponseCode

M, S1, S2 = "10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911"
T = 1_000  # the heartbeat timeout used here, ms


def beat(c: Controller, addr: str, role: str = "SLAVE", *, now: int, **kw):
    fields = {"broker_id": 0 if role != "SLAVE" else 1, "epoch": 0, "max_offset": 0, **kw}
    return c.heartbeat("broker-a", addr, role=role, now_ms=now, **fields)


def test_the_first_master_bootstraps_epoch_one_and_slaves_follow_it():
    c = Controller(T)
    assert beat(c, S1, now=0).master_addr == ""  # no master yet: a slave waits
    d = beat(c, M, "SYNC_MASTER", max_offset=500, now=0)
    assert (d.role, d.broker_id, d.epoch) == ("MASTER", 0, 1)
    d = beat(c, S1, now=10)
    assert (d.role, d.broker_id, d.epoch, d.master_addr, d.truncate_offset) == (
        "SLAVE", 1, 1, M, -1,
    )  # fmt: skip
    assert c.sync_state()["broker-a"]["epochs"] == [[1, 500, M]]


def test_silence_elects_the_slave_with_the_highest_offset_old_master_truncates():
    """An ASYNC group: every live slave within the gap is electable."""
    c = Controller(T)
    beat(c, M, "ASYNC_MASTER", now=0)
    beat(c, M, "ASYNC_MASTER", epoch=1, max_offset=9000, now=500)
    beat(c, S1, broker_id=1, epoch=1, max_offset=8000, now=1000)
    beat(c, S2, broker_id=2, epoch=1, max_offset=9000, now=1000)
    assert c.scan(now_ms=1400) == []  # within the timeout
    assert c.scan(now_ms=1501) == [("broker-a", S2)]
    assert c.scan(now_ms=1502) == []  # one election per silence
    # the new master learns it from its next heartbeat (still as a slave), then reports
    d = beat(c, S2, broker_id=2, epoch=1, max_offset=9000, now=1600)
    assert (d.role, d.broker_id, d.epoch) == ("MASTER", 0, 2)
    # the old master comes back before the epoch's start is known: it must wait
    with pytest.raises(EpochNotReadyError):
        beat(c, M, "ASYNC_MASTER", epoch=1, max_offset=9100, now=1700)
    beat(c, S2, "ASYNC_MASTER", epoch=2, max_offset=9050, epoch_start=9000, now=1800)
    d = beat(c, M, "ASYNC_MASTER", epoch=1, max_offset=9100, now=1900)
    assert (d.role, d.master_addr, d.epoch, d.truncate_offset) == ("SLAVE", S2, 2, 9000)
    assert d.broker_id not in (0, 1)  # a free slave id, not the master's nor S1's
    # once it holds epoch 2 it truncates nothing
    assert beat(c, M, epoch=2, broker_id=d.broker_id, now=2000).truncate_offset == -1
    assert c.sync_state()["broker-a"]["epochs"] == [[1, 0, M], [2, 9000, S2]]


def test_no_election_without_an_in_sync_slave_and_the_old_master_keeps_its_data():
    c = Controller(T, max_gap_not_in_sync=100)
    beat(c, M, "ASYNC_MASTER", now=0)
    beat(c, M, "ASYNC_MASTER", epoch=1, max_offset=5000, now=0)
    beat(c, S1, epoch=1, max_offset=4000, now=0)  # 1000 behind: not in sync
    beat(c, S2, epoch=0, max_offset=5000, now=0)  # not at the current epoch
    assert c.scan(now_ms=T + 1) == [("broker-a", "")]
    d = beat(c, M, "ASYNC_MASTER", epoch=1, max_offset=5000, now=T + 5)
    assert (d.role, d.epoch, d.truncate_offset) == ("MASTER", 1, -1)  # its epoch goes on
    assert c.sync_state()["broker-a"]["epochs"] == [[1, 0, M]]


def test_a_dead_slave_is_not_elected():
    c = Controller(T)
    beat(c, M, "ASYNC_MASTER", now=0)
    beat(c, M, "ASYNC_MASTER", epoch=1, now=900)
    beat(c, S1, epoch=1, now=0)  # silent since 0
    assert c.scan(now_ms=1901) == [("broker-a", "")]


@pytest.mark.parametrize(
    "kw, problem",
    [
        ({"role": "LEADER"}, "brokerRole"),
        ({"epoch": -1}, "epoch"),
        ({"epoch": "1"}, "epoch"),
        ({"max_offset": -5}, "maxOffset"),
        ({"epoch": 7}, "ahead of the controller"),
        ({"broker_id": -1}, "brokerId"),
    ],
)
def test_bad_reports_are_refused(kw, problem):
    c = Controller(T)
    beat(c, M, "SYNC_MASTER", now=0)
    fields = {"role": "SLAVE", "broker_id": 1, "epoch": 1, "max_offset": 0, **kw}
    with pytest.raises(ValueError, match=problem):
        c.heartbeat("broker-a", S1, now_ms=0, **fields)


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1 << 40), st.booleans()),
                min_size=1, max_size=6))  # fmt: skip
def test_the_elected_slave_has_the_highest_offset_among_those_in_sync(slaves):
    gap = 1 << 30
    c = Controller(T, max_gap_not_in_sync=gap)
    beat(c, M, "ASYNC_MASTER", now=0)
    beat(c, M, "ASYNC_MASTER", epoch=1, max_offset=1 << 40, now=0)
    eligible = {}
    for i, (epoch_lag, offset, alive) in enumerate(slaves, start=1):
        epoch = 1 if epoch_lag == 0 else 0
        addr = f"10.0.1.{i}:10911"
        beat(c, addr, broker_id=i, epoch=epoch, max_offset=offset, now=T if alive else 0)
        if epoch == 1 and alive and (1 << 40) - offset <= gap:
            eligible[addr] = (offset, -i)
    [(name, winner)] = c.scan(now_ms=T + 1)
    if not eligible:
        assert winner == ""
        return
    assert eligible[winner] == max(eligible.values())
    assert c.sync_state()[name]["epoch"] == 2


def register(client, ns, addr, **ext):
    fields = {"brokerName": "broker-a", "brokerAddr": addr, "clusterName": "C",
              "brokerId": 0, "haServerAddr": "", "brokerRole": "SYNC_MASTER", "epoch": 0,
              "maxOffset": 0, **ext}  # fmt: skip
    return client.invoke_json(ns.address, RequestCode.REGISTER_BROKER, fields, None)


def test_namesrv_answers_controller_fields_and_refuses_bogus_reports():
    ns = NameServer(port=0, enable_controller=True, controller_heartbeat_timeout_ms=T)
    ns.start()
    try:
        with RemotingClient() as client:
            response, _ = register(client, ns, M)
            assert response.ext_fields["controllerRole"] == "MASTER"
            assert response.ext_fields["controllerEpoch"] == "1"
            for bad in ({"epoch": "x"}, {"epoch": 99}, {"brokerRole": "KING"}, {"maxOffset": -1}):
                with pytest.raises(ResponseError) as refused:
                    register(client, ns, S1, brokerId=1, **bad)
                assert refused.value.code == ResponseCode.SYSTEM_ERROR
            _, state = client.invoke_json(ns.address, RequestCode.CONTROLLER_GET_SYNC_STATE_DATA)
            assert state["broker-a"]["masterAddr"] == M
    finally:
        ns.stop()
    plain = NameServer(port=0)
    plain.start()
    try:
        with RemotingClient() as client, pytest.raises(ResponseError, match="no controller"):
            register(client, plain, M)
    finally:
        plain.stop()


def test_a_restarted_controller_keeps_masters_and_epochs_so_the_old_master_follows(tmp_path):
    c = Controller(T, store_path=str(tmp_path))
    beat(c, M, "ASYNC_MASTER", max_offset=500, now=0)
    beat(c, M, "ASYNC_MASTER", epoch=1, max_offset=9000, now=500)
    beat(c, S1, epoch=1, max_offset=9000, now=1000)
    assert c.scan(now_ms=1501) == [("broker-a", S1)]
    beat(c, S1, "ASYNC_MASTER", epoch=2, max_offset=9100, epoch_start=9000, now=1600)
    restarted = Controller(T, store_path=str(tmp_path))
    epochs = [[1, 500, M], [2, 9000, S1]]
    assert restarted.sync_state()["broker-a"]["epochs"] == epochs
    assert restarted.sync_state()["broker-a"]["masterAddr"] == S1
    # the old master reports first after the restart: it follows, truncated, never leads
    d = beat(restarted, M, "ASYNC_MASTER", epoch=1, max_offset=9500, now=2000)
    assert (d.role, d.master_addr, d.epoch, d.truncate_offset) == ("SLAVE", S1, 2, 9000)
    d = beat(restarted, S1, "ASYNC_MASTER", epoch=2, max_offset=9200, now=2100)
    assert (d.role, d.epoch) == ("MASTER", 2)


def test_a_master_that_never_reports_after_a_controller_restart_is_replaced(tmp_path):
    c = Controller(T, store_path=str(tmp_path))
    beat(c, M, "ASYNC_MASTER", max_offset=0, now=0)
    restarted = Controller(T, store_path=str(tmp_path))
    now = time.time_ns() // 1_000_000
    beat(restarted, S1, epoch=1, max_offset=700, now=now)
    assert restarted.scan(now_ms=now) == []  # the master may still report
    beat(restarted, S1, epoch=1, max_offset=700, now=now + 2 * T)
    assert restarted.scan(now_ms=now + 2 * T) == [("broker-a", S1)]
    assert restarted.sync_state()["broker-a"]["epochs"][-1][1:] == [-1, S1]


def test_an_unreadable_controller_state_stops_the_start(tmp_path):
    for name in ("controller.json", "controller.json.bak"):
        (tmp_path / name).write_text('{"groups": {"broker-a": {"epochs": 7}}}')
    with pytest.raises(ConfigError, match="not a controller state"):
        Controller(T, store_path=str(tmp_path))


H1, H2 = "10.0.0.2:40001", "10.0.0.3:40002"  # the slaves' HA connections


def test_a_sync_master_acknowledging_alone_makes_no_slave_electable():
    """RocketMQ 5's SyncStateSet: a SYNC master that reports an empty set is recorded alone
    (the answer says so, and only then may it acknowledge without a slave); while it is, a
    live slave is not elected, since it may lack those sends."""
    c = Controller(T)
    beat(c, M, "SYNC_MASTER", now=0)
    d = beat(c, M, "SYNC_MASTER", epoch=1, max_offset=5000, sync_state_set=(), now=500)
    assert (d.role, d.master_role, d.alone) == ("MASTER", "SYNC_MASTER", True)
    beat(c, S1, epoch=1, max_offset=5000, ha_client_addr=H1, now=1000)
    assert c.scan(now_ms=1501) == [("broker-a", "")]
    # the master comes back at its own epoch, its slave caught up and is in its set
    d = beat(c, M, "SYNC_MASTER", epoch=1, max_offset=5000, sync_state_set=(H1,), now=1600)
    assert (d.role, d.epoch, d.alone) == ("MASTER", 1, False)
    assert c.sync_state()["broker-a"]["syncStateSet"] == [S1]
    beat(c, S1, epoch=1, max_offset=5000, ha_client_addr=H1, now=2000)
    assert c.scan(now_ms=2601) == [("broker-a", S1)]
    # the elected slave learns it is master of a SYNC group, alone until a slave syncs
    d = beat(c, S1, epoch=1, max_offset=5000, now=2700)
    assert (d.role, d.epoch, d.master_role, d.alone) == ("MASTER", 2, "SYNC_MASTER", True)
    assert d.to_ext()["controllerAlone"] == "true"


def test_a_sync_group_elects_only_a_slave_of_the_recorded_set():
    """The double failure a count of in-sync slaves cannot tell apart: S2 is alive, at the
    epoch and ahead of S1 as far as its max offset goes, but not in the set the master's
    sends waited for, so it may lack acknowledged sends; only S1 is electable, and with S1
    dead too, nobody is."""
    c = Controller(T)
    beat(c, M, "SYNC_MASTER", now=0)
    beat(c, S1, broker_id=1, epoch=1, max_offset=9000, ha_client_addr=H1, now=0)
    beat(c, S2, broker_id=2, epoch=1, max_offset=9500, ha_client_addr=H2, now=0)
    d = beat(c, M, "SYNC_MASTER", epoch=1, max_offset=9900, sync_state_set=(H1,), now=100)
    assert not d.alone and c.sync_state()["broker-a"]["syncStateSet"] == [S1]
    beat(c, S1, broker_id=1, epoch=1, max_offset=9000, ha_client_addr=H1, now=1000)
    beat(c, S2, broker_id=2, epoch=1, max_offset=9500, ha_client_addr=H2, now=1000)
    assert c.scan(now_ms=1101) == [("broker-a", S1)]

    c = Controller(T)
    beat(c, M, "SYNC_MASTER", now=0)
    beat(c, S1, broker_id=1, epoch=1, max_offset=9000, ha_client_addr=H1, now=0)
    beat(c, M, "SYNC_MASTER", epoch=1, max_offset=9900, sync_state_set=(H1,), now=100)
    beat(c, S2, broker_id=2, epoch=1, max_offset=9500, ha_client_addr=H2, now=1000)
    assert c.scan(now_ms=1101) == [("broker-a", "")]  # S1 silent since 0: no election


def test_a_member_is_recorded_once_its_slave_reported_the_connection():
    c = Controller(T)
    beat(c, M, "SYNC_MASTER", now=0)
    d = beat(c, M, "SYNC_MASTER", epoch=1, sync_state_set=(H2,), now=0)
    assert d.alone and c.sync_state()["broker-a"]["syncStateSet"] == []  # not named yet
    beat(c, S2, broker_id=2, epoch=1, ha_client_addr=H2, now=10)
    assert not beat(c, M, "SYNC_MASTER", epoch=1, sync_state_set=(H2,), now=20).alone
    assert c.sync_state()["broker-a"]["syncStateSet"] == [S2]


def test_a_connection_address_belongs_to_the_slave_that_claimed_it_last():
    c = Controller(T)
    beat(c, M, "SYNC_MASTER", now=0)
    beat(c, S1, broker_id=1, epoch=1, ha_client_addr=H1, now=0)
    beat(c, S2, broker_id=2, epoch=1, ha_client_addr=H1, now=10)  # S1 reconnected elsewhere
    beat(c, M, "SYNC_MASTER", epoch=1, sync_state_set=(H1,), now=20)
    state = c.sync_state()["broker-a"]
    assert state["syncStateSet"] == [S2] and state["replicas"][S1]["ha_client_addr"] == ""


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 1 << 40), st.booleans()),
                min_size=1, max_size=6))  # fmt: skip
def test_a_sync_group_elects_the_highest_offset_among_live_members(slaves):
    c = Controller(T)
    beat(c, M, "SYNC_MASTER", now=0)
    members, eligible = [], {}
    for i, (member, offset, _) in enumerate(slaves, start=1):
        addr, ha = f"10.0.1.{i}:10911", f"10.0.1.{i}:40000"
        beat(c, addr, broker_id=i, epoch=1, max_offset=offset, ha_client_addr=ha, now=0)
        if member:
            members.append(ha)
    beat(c, M, "SYNC_MASTER", epoch=1, max_offset=1 << 40, sync_state_set=tuple(members), now=0)
    for i, (member, offset, alive) in enumerate(slaves, start=1):
        addr, ha = f"10.0.1.{i}:10911", f"10.0.1.{i}:40000"
        if alive:
            beat(c, addr, broker_id=i, epoch=1, max_offset=offset, ha_client_addr=ha, now=T)
            if member:
                eligible[addr] = (offset, -i)
    [(_, winner)] = c.scan(now_ms=T + 1)
    assert (winner == "") == (not eligible)
    if eligible:
        assert eligible[winner] == max(eligible.values())


def test_an_async_group_ignores_sync_state_sets():
    c = Controller(T)
    beat(c, M, "ASYNC_MASTER", now=0)
    d = beat(c, M, "ASYNC_MASTER", epoch=1, max_offset=10, sync_state_set=(), now=500)
    assert (d.master_role, d.alone) == ("ASYNC_MASTER", False)
    beat(c, S1, epoch=1, max_offset=10, now=1000)
    assert c.scan(now_ms=1501) == [("broker-a", S1)]
    assert beat(c, S1, epoch=1, max_offset=10, now=1600).alone is False


def test_a_restarted_controller_keeps_a_groups_sync_state_set(tmp_path):
    c = Controller(T, store_path=str(tmp_path))
    beat(c, M, "SYNC_MASTER", now=0)
    beat(c, S1, broker_id=1, epoch=1, ha_client_addr=H1, now=0)
    beat(c, M, "SYNC_MASTER", epoch=1, sync_state_set=(H1,), now=0)
    restarted = Controller(T, store_path=str(tmp_path))
    state = restarted.sync_state()["broker-a"]
    assert (state["masterRole"], state["alone"], state["syncStateSet"]) == (
        "SYNC_MASTER", False, [S1],
    )  # fmt: skip
    now = time.time_ns() // 1_000_000  # the restart counts as the master's last sign
    beat(restarted, S2, broker_id=2, epoch=1, now=now + 2 * T)
    beat(restarted, S1, broker_id=1, epoch=1, now=now + 2 * T)
    assert restarted.scan(now_ms=now + 2 * T) == [("broker-a", S1)]
    # an empty set is kept as well: no slave electable
    c = Controller(T, store_path=str(tmp_path / "alone"))
    beat(c, M, "SYNC_MASTER", now=0)
    beat(c, M, "SYNC_MASTER", epoch=1, sync_state_set=(), now=0)
    restarted = Controller(T, store_path=str(tmp_path / "alone"))
    assert restarted.sync_state()["broker-a"]["alone"]
    beat(restarted, S1, epoch=1, now=now + 2 * T)
    assert restarted.scan(now_ms=now + 2 * T) == [("broker-a", "")]


@pytest.mark.parametrize(
    "kw, problem",
    [
        ({"sync_state_set": ("10.0.0.2",)}, "not an HA connection address"),
        ({"sync_state_set": ("10.0.0.2:0",)}, "not an HA connection address"),
        ({"sync_state_set": ("a.b.c.d:1",)}, "not an HA connection address"),
        ({"sync_state_set": tuple(f"10.0.0.{i}:1" for i in range(17))}, "more than 16"),
        ({"ha_client_addr": "10.0.0.2:99999"}, "not an HA connection address"),
    ],
)
def test_malformed_sync_reports_are_refused(kw, problem):
    c = Controller(T)
    with pytest.raises(ValueError, match=problem):
        beat(c, M, "SYNC_MASTER", now=0, **kw)


def test_a_sync_group_without_a_master_elects_a_member_once_it_is_back():
    c = Controller(T)
    beat(c, M, "SYNC_MASTER", now=0)
    beat(c, S1, broker_id=1, epoch=1, ha_client_addr=H1, now=0)
    beat(c, M, "SYNC_MASTER", epoch=1, max_offset=900, sync_state_set=(H1,), now=0)
    beat(c, S2, broker_id=2, epoch=1, now=T)  # alive, but not in the set
    assert c.scan(now_ms=T + 1) == [("broker-a", "")]  # S1 silent too: nobody
    assert c.scan(now_ms=T + 2) == []
    beat(c, S1, broker_id=1, epoch=1, max_offset=900, now=2 * T)  # back
    assert c.scan(now_ms=2 * T + 1) == [("broker-a", S1)]
    assert c.sync_state()["broker-a"]["epochs"][-1][::2] == [2, S1]


@given(st.lists(st.text(max_size=30), max_size=20), st.text(max_size=30))
def test_any_sync_report_is_recorded_or_refused_with_a_value_error(members, ha_client):
    """What a broker may put in ``syncStateSet`` and ``haClientAddr``: either addresses
    the controller records, or a ``ValueError`` (the namesrv's SYSTEM_ERROR) naming them."""
    c = Controller(T)
    try:
        beat(c, S1, broker_id=1, ha_client_addr=ha_client, now=0)
        beat(c, M, "SYNC_MASTER", sync_state_set=tuple(members), now=0)
    except ValueError as exc:
        assert "HA connection address" in str(exc) or "more than 16" in str(exc)
        return
    recorded = c.sync_state()["broker-a"]["syncStateSet"]
    assert recorded == ([S1] if ha_client and ha_client in members else [])


def test_a_slave_elected_but_silent_before_it_led_takes_its_epoch_when_back():
    """The election happened within the elected slave's last heartbeat timeout, but it died
    too: its epoch has no start, no member is left to elect, and when it comes back (as a
    slave, by its conf) it leads the epoch it was elected for instead of waiting forever
    for that epoch's start."""
    c = Controller(T)
    beat(c, M, "SYNC_MASTER", now=0)
    beat(c, S1, broker_id=1, epoch=1, max_offset=900, ha_client_addr=H1, now=0)
    beat(c, M, "SYNC_MASTER", epoch=1, max_offset=900, sync_state_set=(H1,), now=0)
    beat(c, S1, broker_id=1, epoch=1, max_offset=900, ha_client_addr=H1, now=T)
    assert c.scan(now_ms=T + 1) == [("broker-a", S1)]  # S1 still counts as alive
    assert c.scan(now_ms=2 * T + 2) == [("broker-a", "")]  # it never reported as master
    d = beat(c, S1, broker_id=1, epoch=1, max_offset=900, now=3 * T)
    assert (d.role, d.epoch, d.truncate_offset) == ("MASTER", 2, -1)
    beat(c, S1, "SYNC_MASTER", epoch=2, max_offset=900, epoch_start=900, now=3 * T + 10)
    assert c.sync_state()["broker-a"]["epochs"][-1] == [2, 900, S1]


def test_an_admin_elects_a_designated_in_sync_slave_and_the_old_master_follows():
    """mqadmin electMaster -b ID: an in-sync slave becomes master at a new epoch while the
    old master is alive; its next heartbeat makes it a slave. An out-of-sync or unknown
    replica is refused, naming why; designating the master changes nothing."""
    c = Controller(T)
    beat(c, M, "ASYNC_MASTER", max_offset=100, now=0)
    beat(c, M, "ASYNC_MASTER", epoch=1, max_offset=900, now=10)
    beat(c, S1, broker_id=1, epoch=1, max_offset=900, now=20)
    beat(c, S2, broker_id=2, epoch=0, max_offset=0, now=20)  # not at the group's epoch
    assert c.elect("broker-a", 0, now_ms=30) == (M, 1)
    with pytest.raises(ValueError, match="not in sync"):
        c.elect("broker-a", 2, now_ms=30)
    with pytest.raises(ValueError, match="no replica with broker id 7"):
        c.elect("broker-a", 7, now_ms=30)
    with pytest.raises(ValueError, match="unknown to the controller"):
        c.elect("broker-b", 1, now_ms=30)
    assert c.elect("broker-a", 1, now_ms=30) == (S1, 2)
    d = beat(c, S1, broker_id=1, epoch=1, max_offset=900, now=40)
    assert (d.role, d.epoch) == ("MASTER", 2)
    beat(c, S1, "ASYNC_MASTER", epoch=2, max_offset=900, epoch_start=900, now=50)
    d = beat(c, M, "ASYNC_MASTER", epoch=1, max_offset=950, now=60)
    assert (d.role, d.master_addr, d.epoch, d.truncate_offset) == ("SLAVE", S1, 2, 900)


def test_an_admin_cleans_dead_replicas_and_living_ones_only_when_asked():
    c = Controller(T)
    beat(c, M, "ASYNC_MASTER", now=0)
    beat(c, S1, broker_id=1, epoch=1, now=0)
    beat(c, S2, broker_id=2, epoch=1, now=5_000)
    with pytest.raises(ValueError, match="is alive"):
        c.clean("broker-a", {2}, now_ms=5_100)
    with pytest.raises(ValueError, match="elect another first"):
        c.clean("broker-a", {0}, clean_living=True, now_ms=5_100)
    assert c.clean("broker-a", {1}, now_ms=5_100) == [S1]  # silent since 0: dead
    assert c.clean("broker-a", {2}, clean_living=True, now_ms=5_100) == [S2]
    assert set(c.sync_state()["broker-a"]["replicas"]) == {M}
    with pytest.raises(ValueError, match=r"has replicas \[0\], not all of \[5\]"):
        c.clean("broker-a", {5}, now_ms=9_000)
    assert c.clean("broker-a", None, now_ms=9_000) == [M]  # the whole group, all dead
    assert c.sync_state() == {}


def test_the_namesrv_serves_the_controller_admin_requests():
    ns = NameServer(port=0, enable_controller=True, controller_heartbeat_timeout_ms=T)
    ns.start()
    try:
        with RemotingClient() as client:
            register(client, ns, M)
            meta, _ = client.invoke_json(ns.address, RequestCode.CONTROLLER_GET_METADATA_INFO)
            assert meta.ext_fields["controllerLeaderAddress"] == ns.address
            assert meta.ext_fields["isLeader"] == "true"
            fields = {"clusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": 0,
                      "designateElect": True}  # fmt: skip
            elected, members = client.invoke_json(
                ns.address, RequestCode.CONTROLLER_ELECT_MASTER, fields
            )
            assert (elected.ext_fields["masterAddress"], elected.ext_fields["masterEpoch"]) == (
                M, "1")  # fmt: skip
            assert members["brokerAddrs"] == {"0": M}
            with pytest.raises(ResponseError) as refused:
                client.invoke_json(ns.address, RequestCode.CONTROLLER_ELECT_MASTER,
                                   {**fields, "brokerId": 3})  # fmt: skip
            assert refused.value.code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
            with pytest.raises(ResponseError) as refused:
                client.invoke_json(ns.address, RequestCode.CLEAN_BROKER_DATA,
                                   {"brokerName": "broker-a"})  # fmt: skip
            assert refused.value.code == ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
            assert "is alive" in refused.value.remark
    finally:
        ns.stop()
