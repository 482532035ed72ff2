"""The broker's rates and day totals (``broker.rates``): windows, a counter moving back,
local midnight, a group's first gets; and a broker's consumeTps and putTps over the wire
once its counters move."""

from __future__ import annotations

import datetime

import pytest
import wire_client as wc
from test_remoting_send import dispatched, send
from waiting import wait_for

from shmq.broker.stats import rates as rt

GET_BROKER_RUNTIME_INFO, GET_CONSUME_STATS = 28, 208


def test_rate_over_its_windows():
    rate = rt.Rate(horizon_s=600)
    assert rate.tps(10, 0.0) == 0.0  # no sample
    for t in range(0, 121):
        rate.sample(float(t), 10 * t if t <= 100 else 1000)  # 10/s, then idle for 20 s
    assert rate.tps(10, 120.0) == 0.0
    assert rate.tps(60, 120.0) == pytest.approx(400 / 60)
    assert rate.tps(600, 120.0) == pytest.approx(1000 / 120)  # the history it has
    rate.sample(121.0, 500)  # moved back (a reset): no negative rate
    assert rate.tps(1, 121.0) == 0.0
    rate.sample(800.0, 500)
    assert rate.tps(600, 800.0) == 0.0  # the horizon dropped the old samples


def test_day_totals_turn_over_at_local_midnight():
    days = rt.DayTotals(today=100)
    days.sample(100, 50)
    assert (days.today_morning, days.yesterday_morning) == (0, 0)  # started today
    days.sample(101, 70)
    assert (days.today_morning, days.yesterday_morning) == (70, 0)
    days.sample(102, 90)
    assert (days.today_morning, days.yesterday_morning) == (90, 70)
    days.sample(105, 95)  # days without a sample: nothing known of yesterday's morning
    assert (days.today_morning, days.yesterday_morning) == (95, 0)
    wall = datetime.datetime(2026, 12, 31, 23, 59, 59).timestamp()
    assert rt.local_day(wall + 2) == rt.local_day(wall) + 1  # across a year too


def test_broker_rates_count_gets():
    """A group's gets count from 0, the first ones too: a group that read 60,000 messages
    since the last sample shows them at once (they were lost when a new key's first sample
    was its start)."""
    clock = [1000.0]
    rates = rt.BrokerRates(clock=lambda: clock[0])
    for second in range(1, 11):
        clock[0] = 1000.0 + second
        rates.sample(100 * second, {("g", "T"): 10 * second, ("h", "T"): 7})
    assert rates.consume_tps("g", "T") == pytest.approx(10.0)
    assert rates.consume_tps("h", "T") == pytest.approx(7 / 10)  # 7 in its first second
    assert rates.consume_tps("x", "T") == 0.0
    assert rates.put_tps() == "100.00 100.00 100.00"
    assert rates.get_tps() == "10.70 10.70 10.70"
    clock[0] += 1
    rates.sample(1000, {("g", "T"): 100, ("h", "T"): 7, ("c", "T"): 60_000})
    assert rates.consume_tps("c", "T") == pytest.approx(60_000)


def test_a_brokers_rates_over_the_wire(shared_broker):
    broker, _ = shared_broker
    for i in range(5):
        assert send(broker, "AdmRates", 0, {}, f"m{i}".encode()).code == wc.SUCCESS
    with wc.WireClient(broker.address) as c:

        def table() -> dict:
            resp = c.call(GET_BROKER_RUNTIME_INFO, {})
            return wc.fastjson_loads(resp.body)["table"]

        wait_for(lambda: float(table()["putTps"].split(" ")[2]) > 0, what="putTps")
        dispatched(broker, "AdmRates", 0, 5)
        pulled = c.call(wc.PULL_MESSAGE, wc.pull_header("adm-rates-g", "AdmRates", 0, 0))
        assert len(wc.pulled_records(pulled.body)) == 5  # a consumer reading, then committing
        header = wc.offset_header("adm-rates-g", "AdmRates", 0, 5)
        assert c.call(wc.UPDATE_CONSUMER_OFFSET, header).code == wc.SUCCESS

        def consume_tps() -> float:
            resp = c.call(GET_CONSUME_STATS, {"consumerGroup": "adm-rates-g"})
            return wc.fastjson_loads(resp.body)["consumeTps"]

        wait_for(lambda: consume_tps() > 0, what="adm-rates-g's consumeTps")
        assert int(table()["msgGetTotalTodayNow"]) >= 5
        wait_for(lambda: float(table()["getTransferedTps"].split(" ")[2]) > 0,
                 what="getTransferedTps")  # fmt: skip


def test_what_comes_before_the_first_sample_counts():
    """The counters start at 0 with the broker: messages put before the housekeeping's
    first sample show in the rate (before, a burst that came first never did)."""
    clock = [50.0]
    rates = rt.BrokerRates(clock=lambda: clock[0])
    clock[0] = 52.0
    rates.sample(10, {})
    assert rates.put_tps() == "5.00 5.00 5.00"
