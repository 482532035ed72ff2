"""The NameServer's route admin codes: a route's orderTopicConf (from the KV config's
ORDER_TOPIC_CONFIG namespace, with orderMessageEnable), GET_TOPICS_BY_CLUSTER,
GET_SYSTEM_TOPIC_LIST_FROM_NS, the unit-topic lists, QUERY_DATA_VERSION and
WIPE/ADD_WRITE_PERM_OF_BROKER, on the route tables and over real sockets."""

from __future__ import annotations

import json

import pytest
import wire_client as wc

from shmq.namesrv.routes import RouteInfoManager
from shmq.namesrv.server import NameServer
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode

TOPIC = {"readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "topicSysFlag": 0}


def data_version(counter: int) -> dict[str, int]:
    return {"counter": counter, "timestamp": 1_700_000_000_000}


def register(client, ns, addr, name, cluster="DefaultCluster", topics=(), counter=1, flags=None):
    ext = {"brokerName": name, "brokerAddr": addr, "clusterName": cluster, "brokerId": 0,
           "haServerAddr": addr}  # fmt: skip
    flags = flags or {}
    wrapper = {
        "topicConfigTable": {
            t: {"topicName": t, **TOPIC, "topicSysFlag": flags.get(t, 0)} for t in topics
        },
        "dataVersion": data_version(counter),
    }
    client.invoke_json(
        ns.address, RequestCode.REGISTER_BROKER, ext, {"topicConfigSerializeWrapper": wrapper}
    )


def perms(client, ns, topic) -> dict[str, int]:
    _, data = client.invoke_json(ns.address, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    return {q["brokerName"]: q["perm"] for q in data["queueDatas"]}


@pytest.fixture
def client():
    with RemotingClient(default_timeout=3.0) as c:  # also the brokers' registration link
        yield c


def serve(**kw) -> NameServer:
    server = NameServer(port=0, **kw)
    server.start()
    return server


@pytest.fixture
def ns():
    server = serve(order_message_enable=True)
    yield server
    server.stop()


def test_order_topic_conf_comes_with_the_route_when_enabled(ns, client):
    register(client, ns, "127.0.0.1:10911", "broker-a", topics=["Ordered", "Plain"])
    conf = {"namespace": "ORDER_TOPIC_CONFIG", "key": "Ordered", "value": "broker-a:2"}
    client.invoke_json(ns.address, RequestCode.PUT_KV_CONFIG, conf)
    get = RequestCode.GET_ROUTEINFO_BY_TOPIC
    assert client.invoke_json(ns.address, get, {"topic": "Ordered"})[1]["orderTopicConf"] == (
        "broker-a:2"
    )
    assert client.invoke_json(ns.address, get, {"topic": "Plain"})[1]["orderTopicConf"] is None

    disabled = serve()  # RocketMQ's default: orderMessageEnable=false
    try:
        register(client, disabled, "127.0.0.1:10911", "broker-a", topics=["Ordered"])
        client.invoke_json(disabled.address, RequestCode.PUT_KV_CONFIG, conf)
        route = client.invoke_json(disabled.address, get, {"topic": "Ordered"})[1]
        assert route["orderTopicConf"] is None
    finally:
        disabled.stop()


def test_topics_by_cluster(ns, client):
    register(client, ns, "127.0.0.1:10911", "broker-a", topics=["Both", "A"])
    register(client, ns, "127.0.0.1:10811", "broker-b", topics=["Both", "B"])
    register(client, ns, "127.0.0.1:10711", "broker-x", cluster="Other", topics=["X", "Both"])
    code = RequestCode.GET_TOPICS_BY_CLUSTER
    by_cluster = {c: client.invoke_json(ns.address, code, {"cluster": c})[1]
                  for c in ("DefaultCluster", "Other", "Nope")}  # fmt: skip
    assert by_cluster == {
        "DefaultCluster": {"topicList": ["A", "B", "Both"]},
        "Other": {"topicList": ["Both", "X"]},
        "Nope": {"topicList": []},  # RocketMQ answers an empty list too
    }
    resp = client.invoke(ns.address, RemotingCommand.request(code))
    assert resp.code == ResponseCode.SYSTEM_ERROR and "<cluster>" in resp.remark


def test_system_topics_are_the_cluster_and_broker_names(ns, client):
    code = RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS
    assert client.invoke_json(ns.address, code)[1] == {"topicList": [], "brokerAddr": None}
    register(client, ns, "127.0.0.1:10911", "broker-a", topics=["A"])
    register(client, ns, "127.0.0.1:10711", "broker-x", cluster="Other", topics=["X"])
    assert client.invoke_json(ns.address, code)[1] == {
        "topicList": ["DefaultCluster", "Other", "broker-a", "broker-x"],
        "brokerAddr": "127.0.0.1:10911",  # one broker to ask for its own system topics
    }


def test_wipe_and_add_write_perm(ns, client):
    register(client, ns, "127.0.0.1:10911", "broker-a", topics=["T", "OnlyA"])
    register(client, ns, "127.0.0.1:10811", "broker-b", topics=["T"])
    resp, _ = client.invoke_json(ns.address, RequestCode.WIPE_WRITE_PERM_OF_BROKER,
                                 {"brokerName": "broker-a"})  # fmt: skip
    assert resp.ext_fields == {"wipeTopicCount": "2"}
    assert perms(client, ns, "T") == {"broker-a": 4, "broker-b": 6}
    assert perms(client, ns, "OnlyA") == {"broker-a": 4}

    # the periodic re-registration (same dataVersion) keeps the perm wiped, as RocketMQ's
    register(client, ns, "127.0.0.1:10911", "broker-a", topics=["T", "OnlyA"])
    assert perms(client, ns, "T")["broker-a"] == 4
    resp, _ = client.invoke_json(ns.address, RequestCode.ADD_WRITE_PERM_OF_BROKER,
                                 {"brokerName": "broker-a"})  # fmt: skip
    assert resp.ext_fields == {"addTopicCount": "2"}
    assert perms(client, ns, "T") == {"broker-a": 6, "broker-b": 6}

    client.invoke_json(
        ns.address, RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-b"}
    )
    register(client, ns, "127.0.0.1:10811", "broker-b", topics=["T"], counter=2)  # a topic change
    assert perms(client, ns, "T")["broker-b"] == 6  # the broker's own perm is back

    resp, _ = client.invoke_json(ns.address, RequestCode.WIPE_WRITE_PERM_OF_BROKER,
                                 {"brokerName": "broker-z"})  # fmt: skip
    assert resp.ext_fields == {"wipeTopicCount": "0"}
    resp = client.invoke(ns.address, RemotingCommand.request(RequestCode.ADD_WRITE_PERM_OF_BROKER))
    assert resp.code == ResponseCode.SYSTEM_ERROR and "<brokerName>" in resp.remark


def test_perm_bits_follow_rocketmq():
    routes = RouteInfoManager()
    table = {
        "T": {"topicName": "T", **TOPIC, "perm": 7},
        "R": {"topicName": "R", **TOPIC, "perm": 4},
    }
    routes.register_broker("C", "127.0.0.1:1", "b", 0, "", table, None)
    assert routes.wipe_write_perm("b") == 2  # clears WRITE only: 7 → 5, 4 stays 4
    assert [routes.pick_topic_route(t)["queueDatas"][0]["perm"] for t in "TR"] == [5, 4]
    assert routes.add_write_perm("b") == 2  # sets READ|WRITE, dropping INHERIT
    assert [routes.pick_topic_route(t)["queueDatas"][0]["perm"] for t in "TR"] == [6, 6]
    assert routes.topics_by_cluster("C") == ["R", "T"] and routes.topics_by_cluster("D") == []


@pytest.mark.parametrize("encoding", [wc.JSON, wc.ROCKETMQ])
def test_wire_client_reads_the_count_header(ns, client, encoding):
    register(client, ns, "127.0.0.1:10911", "broker-a", topics=["T"])
    with wc.WireClient(ns.address, encoding) as c:
        wiped = c.call(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
        assert (wiped.code, wiped.ext) == (wc.SUCCESS, {"wipeTopicCount": "1"})
        added = c.call(RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
        assert (added.code, added.ext) == (wc.SUCCESS, {"addTopicCount": "1"})
        topics = c.call(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "DefaultCluster"})
        assert wc.fastjson_loads(topics.body) == {"topicList": ["T"]}


def test_unit_topic_lists_follow_the_topic_sys_flag(ns, client):
    # TopicSysFlag: FLAG_UNIT 0x1, FLAG_UNIT_SUB 0x2
    flags = {"Unit": 1, "UnitSub": 2, "Both": 3}
    register(client, ns, "127.0.0.1:10911", "broker-a", topics=["Plain", *flags], flags=flags)
    lists = {code: client.invoke_json(ns.address, code, {})[1]["topicList"]
             for code in (RequestCode.GET_UNIT_TOPIC_LIST, RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST,
                          RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST)}  # fmt: skip
    assert lists == {
        RequestCode.GET_UNIT_TOPIC_LIST: ["Both", "Unit"],
        RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: ["Both", "UnitSub"],
        RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: ["UnitSub"],
    }


@pytest.mark.parametrize("encoding", [wc.JSON, wc.ROCKETMQ])
def test_query_data_version_tells_a_broker_whether_to_register(ns, client, encoding):
    addr = "127.0.0.1:10911"
    ext = {"brokerName": "broker-a", "brokerAddr": addr, "clusterName": "DefaultCluster",
           "brokerId": "0"}  # fmt: skip
    with wc.WireClient(ns.address, encoding) as c:
        unknown = c.call(RequestCode.QUERY_DATA_VERSION, ext, body=b'{"counter":1}')
        assert (unknown.code, unknown.ext, unknown.body) == (wc.SUCCESS, {"changed": "true"}, b"")

        register(client, ns, addr, "broker-a", topics=["T"], counter=4)
        before = ns.routes.live_brokers()[addr]["lastUpdateTimestamp"]
        ns.routes._broker_live[addr].last_update_timestamp = before - 60_000  # an old heartbeat
        same = c.call(RequestCode.QUERY_DATA_VERSION, ext,
                      body=json.dumps(data_version(4)).encode())  # fmt: skip
        assert (same.code, same.ext) == (wc.SUCCESS, {"changed": "false"})
        assert wc.fastjson_loads(same.body) == data_version(4)
        # the query renews the broker's heartbeat, as a registration does
        assert ns.routes.live_brokers()[addr]["lastUpdateTimestamp"] >= before

        newer = c.call(RequestCode.QUERY_DATA_VERSION, ext,
                       body=json.dumps(data_version(5)).encode())  # fmt: skip
        assert (newer.code, newer.ext) == (wc.SUCCESS, {"changed": "true"})
        assert wc.fastjson_loads(newer.body) == data_version(4)

        bad = c.call(RequestCode.QUERY_DATA_VERSION, ext, body=b"[1]")
        assert bad.code == wc.SYSTEM_ERROR and "DataVersion" in bad.remark
