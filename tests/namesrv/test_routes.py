"""RouteInfoManager: registration, routes, slaves, replacement, expiry, connection close."""

from __future__ import annotations

import logging

import pytest

from shmq.namesrv.routes import RouteInfoManager

A_MASTER = "127.0.0.1:10911"
A_SLAVE = "127.0.0.1:10921"
B_MASTER = "127.0.0.1:10811"


def topics(*names: str, queues: int = 4, perm: int = 6) -> dict:
    return {
        n: {
            "topicName": n,
            "readQueueNums": queues,
            "writeQueueNums": queues,
            "perm": perm,
            "topicSysFlag": 0,
            "order": False,
            "topicFilterType": "SINGLE_TAG",
        }
        for n in names
    }


def version(counter: int) -> dict:
    return {"counter": counter, "timestamp": 1_700_000_000_000 + counter}


def register(routes, addr, name, broker_id=0, table=None, ver=None, now=1000, conn=None, **kw):
    return routes.register_broker(
        kw.get("cluster", "DefaultCluster"),
        addr,
        name,
        broker_id,
        addr.replace(":109", ":119"),
        table,
        ver,
        connection_id=conn,
        now_ms=now,
    )


@pytest.fixture
def routes() -> RouteInfoManager:
    r = RouteInfoManager()
    register(r, A_MASTER, "broker-a", table=topics("T1", "T2"), ver=version(1), conn=1)
    register(r, B_MASTER, "broker-b", table=topics("T2", queues=8), ver=version(1), conn=2)
    return r


def test_route_has_rocketmq_shape(routes):
    assert routes.pick_topic_route("T2") == {
        "orderTopicConf": None,
        "queueDatas": [
            {"brokerName": "broker-a", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
             "topicSysFlag": 0},
            {"brokerName": "broker-b", "readQueueNums": 8, "writeQueueNums": 8, "perm": 6,
             "topicSysFlag": 0},
        ],
        "brokerDatas": [
            {"cluster": "DefaultCluster", "brokerName": "broker-a",
             "brokerAddrs": {"0": A_MASTER}},
            {"cluster": "DefaultCluster", "brokerName": "broker-b",
             "brokerAddrs": {"0": B_MASTER}},
        ],
        "filterServerTable": {},
    }  # fmt: skip
    assert [q["brokerName"] for q in routes.pick_topic_route("T1")["queueDatas"]] == ["broker-a"]
    assert routes.pick_topic_route("nope") is None
    assert routes.all_topics() == ["T1", "T2"]


def test_cluster_info_and_live_brokers(routes):
    register(routes, "127.0.0.1:20911", "broker-c", cluster="Other", table={})
    info = routes.cluster_info()
    assert info["clusterAddrTable"] == {
        "DefaultCluster": ["broker-a", "broker-b"],
        "Other": ["broker-c"],
    }
    assert info["brokerAddrTable"]["broker-c"]["cluster"] == "Other"
    live = routes.live_brokers()
    assert set(live) == {A_MASTER, B_MASTER, "127.0.0.1:20911"}
    assert live[A_MASTER] == {
        "lastUpdateTimestamp": 1000,
        "dataVersion": version(1),
        "haServerAddr": "127.0.0.1:11911",
        "connectionId": 1,
    }


def test_slave_registration(routes):
    result = register(routes, A_SLAVE, "broker-a", broker_id=1, table=topics("X"), ver=version(9))
    assert result == {"haServerAddr": "127.0.0.1:11911", "masterAddr": A_MASTER}
    assert "X" not in routes.all_topics()  # only a master contributes queue data
    route = routes.pick_topic_route("T1")
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": A_MASTER, "1": A_SLAVE}
    assert register(routes, A_MASTER, "broker-a", table=None) == {
        "haServerAddr": None,
        "masterAddr": None,
    }
    lonely = register(routes, "127.0.0.1:30921", "broker-z", broker_id=1, table={})
    assert lonely == {"haServerAddr": None, "masterAddr": None}  # no master yet
    assert routes.cluster_info()["brokerAddrTable"]["broker-z"]["brokerAddrs"] == {
        "1": "127.0.0.1:30921"
    }


def test_slave_promoted_to_master_keeps_one_entry(routes):
    register(routes, A_SLAVE, "broker-a", broker_id=1)
    register(routes, A_SLAVE, "broker-a", broker_id=0, table=topics("T1"), ver=version(5))
    addrs = routes.cluster_info()["brokerAddrTable"]["broker-a"]["brokerAddrs"]
    assert addrs == {"0": A_SLAVE}


def test_reregistration_replaces_topics(routes):
    register(routes, A_MASTER, "broker-a", table=topics("T2", "T3", perm=4), ver=version(2))
    assert routes.all_topics() == ["T2", "T3"]  # T1 had only broker-a
    assert routes.pick_topic_route("T1") is None
    assert routes.pick_topic_route("T3")["queueDatas"][0]["perm"] == 4
    assert len(routes.pick_topic_route("T2")["queueDatas"]) == 2

    register(routes, A_MASTER, "broker-a", table={}, ver=version(2), now=2000)  # same version
    assert routes.all_topics() == ["T2", "T3"]  # unchanged data version: table not reapplied
    assert routes.live_brokers()[A_MASTER]["lastUpdateTimestamp"] == 2000

    register(routes, A_MASTER, "broker-a", table={}, ver=version(3))
    assert routes.all_topics() == ["T2"]
    assert [q["brokerName"] for q in routes.pick_topic_route("T2")["queueDatas"]] == ["broker-b"]


def test_unregister(routes):
    register(routes, A_SLAVE, "broker-a", broker_id=1)
    routes.unregister_broker("DefaultCluster", A_MASTER, "broker-a", 0)
    assert routes.pick_topic_route("T1")["brokerDatas"][0]["brokerAddrs"] == {"1": A_SLAVE}
    routes.unregister_broker("DefaultCluster", A_SLAVE, "broker-a", 1)
    assert routes.pick_topic_route("T1") is None
    assert routes.all_topics() == ["T2"]
    assert routes.cluster_info()["clusterAddrTable"] == {"DefaultCluster": ["broker-b"]}
    assert set(routes.live_brokers()) == {B_MASTER}
    routes.unregister_broker("DefaultCluster", B_MASTER, "broker-b", 0)
    assert routes.all_topics() == []
    assert routes.cluster_info() == {"brokerAddrTable": {}, "clusterAddrTable": {}}


def test_unregister_of_a_stale_address_keeps_the_new_one(routes):
    register(routes, "127.0.0.1:10999", "broker-a", table=topics("T1"), ver=version(7))
    routes.unregister_broker("DefaultCluster", A_MASTER, "broker-a", 0)
    addrs = routes.pick_topic_route("T1")["brokerDatas"][0]["brokerAddrs"]
    assert addrs == {"0": "127.0.0.1:10999"}


def test_expiry_with_explicit_clock(routes, caplog):
    register(routes, B_MASTER, "broker-b", table=topics("T2", queues=8), ver=version(1), now=50_000)
    assert routes.scan_not_active_brokers(now_ms=1000 + 120_000) == []  # not yet: strictly after
    with caplog.at_level(logging.WARNING, logger="shmq.namesrv.routes"):
        expired = routes.scan_not_active_brokers(now_ms=1001 + 120_000)
    assert expired == [A_MASTER]
    assert any(A_MASTER in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)
    assert routes.all_topics() == ["T2"]
    assert routes.pick_topic_route("T1") is None
    assert "broker-a" not in routes.cluster_info()["brokerAddrTable"]
    assert routes.scan_not_active_brokers(now_ms=60_000, expire_ms=5_000) == [B_MASTER]
    assert routes.all_topics() == []


def test_connection_close_removes_its_brokers(routes):
    register(routes, A_SLAVE, "broker-a", broker_id=1, conn=3)
    assert routes.on_connection_closed(99) == []
    assert routes.on_connection_closed(1) == [A_MASTER]
    assert routes.pick_topic_route("T1")["brokerDatas"][0]["brokerAddrs"] == {"1": A_SLAVE}
    assert routes.on_connection_closed(3) == [A_SLAVE]
    assert routes.all_topics() == ["T2"]


def test_reregistration_over_a_new_connection_survives_the_old_close(routes):
    register(routes, A_MASTER, "broker-a", table=topics("T1", "T2"), ver=version(1), conn=7)
    assert routes.on_connection_closed(1) == []
    assert routes.all_topics() == ["T1", "T2"]


def test_delete_topic(routes):
    routes.delete_topic("T2")
    routes.delete_topic("missing")
    assert routes.all_topics() == ["T1"]


@pytest.mark.parametrize(
    ("table", "reason"),
    [
        ([], "not a map"),
        ({"T": 5}, "not a map"),
        ({"T": {"readQueueNums": "8"}}, "readQueueNums"),
        ({"T": {"perm": -1}}, "perm"),
        ({"T": {"topicName": ""}}, "topicName"),
    ],
)
def test_malformed_topic_config_changes_nothing(routes, table, reason):
    before = routes.cluster_info(), routes.all_topics()
    with pytest.raises(ValueError, match=reason):
        register(routes, "127.0.0.1:40911", "broker-new", table=table, ver=version(1))
    assert (routes.cluster_info(), routes.all_topics()) == before


def test_topic_config_defaults_are_rocketmq_s(routes):
    register(routes, "127.0.0.1:40911", "broker-d", table={"D": {}}, ver=version(1))
    assert routes.pick_topic_route("D")["queueDatas"] == [
        {"brokerName": "broker-d", "readQueueNums": 16, "writeQueueNums": 16, "perm": 6,
         "topicSysFlag": 0}
    ]  # fmt: skip
