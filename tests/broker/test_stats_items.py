"""VIEW_BROKER_STATS_DATA (mqadmin ``statsAll``): RocketMQ's StatsItem windows of a topic's
puts and a group's gets, from the counts the broker has (consume-queue growth, messages
read), counted from the broker's start; and the ``statsAll`` table built from them."""

from __future__ import annotations

import json

import wire_client as wc
from click.testing import CliRunner
from test_remoting_send import dispatched, send
from waiting import wait_for

from shmq.broker.stats.items import BrokerStatsItems
from shmq.client.admin.admin import Admin
from shmq_cli.main import cli

VIEW_BROKER_STATS_DATA = 315
ITEM = {"sum": int, "tps": float, "avgpt": float}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_counts_start_at_the_broker_start_and_windows_follow_rocketmq():
    clock = Clock()
    stats = BrokerStatsItems("C", clock)
    stats.observe({"Old": 40}, {("g", "Old"): 30})  # history: not counted
    assert stats.stats_data("TOPIC_PUT_NUMS", "Old") is None
    clock.now += 1
    stats.observe({"Old": 45, "New": 3}, {("g", "Old"): 32, ("h", "New"): 1})  # new: from 0
    assert stats.stats_data("TOPIC_PUT_NUMS", "New")["statsMinute"]["sum"] == 0  # no snapshot
    clock.now = 1010.0
    stats.observe({"Old": 45, "New": 3}, {("g", "Old"): 32})
    minute = {k: stats.stats_data("TOPIC_PUT_NUMS", k)["statsMinute"] for k in ("Old", "New")}
    assert minute == {"Old": {"sum": 5, "tps": 0.5, "avgpt": 0.0},
                      "New": {"sum": 3, "tps": 0.3, "avgpt": 0.0}}  # fmt: skip
    assert stats.stats_data("GROUP_GET_NUMS", "Old@g")["statsMinute"]["sum"] == 2
    assert stats.stats_data("GROUP_GET_NUMS", "New@h")["statsMinute"]["sum"] == 1
    assert stats.stats_data("BROKER_PUT_NUMS", "C")["statsMinute"]["sum"] == 8
    assert stats.stats_data("BROKER_GET_NUMS", "C")["statsMinute"]["sum"] == 3
    assert stats.stats_data("TOPIC_PUT_NUMS", "Old")["statsHour"]["sum"] == 0  # at +600 s
    for step in range(1, 9):  # 80 s more, a put every 10 s: the minute keeps 7 snapshots
        clock.now = 1010.0 + 10 * step
        stats.observe({"Old": 45 + step, "New": 3}, {("g", "Old"): 32})
    assert stats.stats_data("TOPIC_PUT_NUMS", "Old")["statsMinute"] == {
        "sum": 6, "tps": 0.1, "avgpt": 0.0}  # fmt: skip
    clock.now = 1000.0 + 600
    stats.observe({"Old": 60}, {})  # New deleted, g gone
    hour = stats.stats_data("TOPIC_PUT_NUMS", "Old")["statsHour"]
    assert hour == {"sum": 20, "tps": 20 / 600, "avgpt": 0.0}
    clock.now += 1
    stats.observe({"Old": 60, "New": 2}, {})  # created again: its queues start over
    clock.now = 1000.0 + 3600
    stats.observe({"Old": 60, "New": 2}, {})
    day = stats.stats_data("TOPIC_PUT_NUMS", "New")["statsDay"]
    assert day["sum"] == 5 and day["tps"] == 5 / 3600  # 3 before the delete, then 2


def stats_data(address: str, name: str, key: str) -> wc.Frame:
    with wc.WireClient(address) as c:
        return c.call(VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key})


def test_view_broker_stats_data_and_stats_all_over_the_wire(make_broker):
    broker, namesrv = make_broker(broker_cluster_name="StatsCluster")
    for i in range(6):
        assert send(broker, "StatsT", 0, {}, f"m{i}".encode()).code == wc.SUCCESS
    dispatched(broker, "StatsT", 0, 6)
    with wc.WireClient(broker.address) as c:  # a consumer reads 4, then commits them
        pulled = c.call(wc.PULL_MESSAGE, wc.pull_header("sg", "StatsT", 0, 0, max_nums=4))
        assert len(wc.pulled_records(pulled.body)) == 4
        update = c.call(wc.UPDATE_CONSUMER_OFFSET, wc.offset_header("sg", "StatsT", 0, 4))
        assert update.code == wc.SUCCESS

    def minute(name: str, key: str) -> dict | None:
        resp = stats_data(broker.address, name, key)
        if resp.code != wc.SUCCESS:
            return None
        data = json.loads(resp.body)
        assert set(data) == {"statsMinute", "statsHour", "statsDay"}
        for item in data.values():
            assert set(item) == set(ITEM) and all(type(item[k]) is t for k, t in ITEM.items())
        return data["statsMinute"] if data["statsMinute"]["sum"] else None

    def snapshot(name: str, key: str) -> dict:  # the 10 s snapshot
        return wait_for(lambda: minute(name, key), what=f"a minute of {name} {key}")

    puts = snapshot("TOPIC_PUT_NUMS", "StatsT")
    assert puts["sum"] == 6 and puts["tps"] > 0
    assert snapshot("GROUP_GET_NUMS", "StatsT@sg")["sum"] == 4
    assert snapshot("BROKER_PUT_NUMS", "StatsCluster")["sum"] >= 6

    missing = stats_data(broker.address, "TOPIC_PUT_NUMS", "NoSuchTopic")
    assert missing.code == wc.SYSTEM_ERROR
    assert missing.remark == "The stats <TOPIC_PUT_NUMS> <NoSuchTopic> not exist"
    with wc.WireClient(broker.address) as c:
        unnamed = c.call(VIEW_BROKER_STATS_DATA, {"statsKey": "StatsT"})
    assert unnamed.code == wc.SYSTEM_ERROR and "statsName" in unnamed.remark

    with Admin(namesrv) as admin:
        [row] = admin.stats_all("StatsT")
        assert admin.broker_stats_data(broker.address, "TOPIC_PUT_NUMS", "StatsT")["statsDay"]
    assert row["group"] == "sg" and row["accumulation"] == 2
    assert row["in_msgs_24h"] == 6 and row["out_msgs_24h"] == 4  # the minute's, the day young
    assert row["in_tps"] > 0 and row["out_tps"] > 0
    out = CliRunner().invoke(cli, ["admin", "stats-all", "-n", namesrv, "-t", "StatsT", "--json"])
    assert out.exit_code == 0, out.output
    [shown] = json.loads(out.output)
    stable = ("topic", "group", "accumulation", "in_msgs_24h", "out_msgs_24h")
    assert {k: shown[k] for k in stable} == {k: row[k] for k in stable}
