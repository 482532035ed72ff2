"""Ordered topics on the client side: the ``orderTopicConf`` parser (fuzzed), a producer's
publish queues built from it (RocketMQ's ``topicRouteData2TopicPublishInfo``), and the
``Admin`` calls served by the namesrvs (KV config, order confs, topics by cluster, write
perms), against real NameServers with registered (address-only) brokers."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from e2e_helpers import free_port
from shmq.client.admin.admin import Admin
from shmq.client.producer.producer import Producer
from shmq.client.producer.publish_info import PublishInfoTable
from shmq.client.route import MAX_ORDER_QUEUE_NUMS, RouteTable, parse_order_topic_conf
from shmq.client.types import MessageQueue
from shmq.errors import ClientError, ConfigError, RemotingConnectError
from shmq.message import Message
from shmq.namesrv.server import NameServer
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RequestCode

TOPIC = {"readQueueNums": 8, "writeQueueNums": 8, "perm": 6, "topicSysFlag": 0}


# -- the parser ---------------------------------------------------------------------------------


def test_parse_order_topic_conf():
    assert parse_order_topic_conf("broker-b:2;broker-a:3") == [("broker-b", 2), ("broker-a", 3)]
    assert parse_order_topic_conf("a:1;") == [("a", 1)]  # Java's split drops a trailing ";"
    assert parse_order_topic_conf(f"a:{MAX_ORDER_QUEUE_NUMS}") == [("a", MAX_ORDER_QUEUE_NUMS)]
    for bad, why in [
        ("", "entry ''"),
        ("a", "entry 'a'"),
        ("a:0", "1..1024"),
        ("a:1025", "1..1024"),
        ("a:-1", "entry 'a:-1'"),
        ("a:1;;b:1", "entry ''"),
        ("a:1:2", "entry 'a:1:2'"),
        (":4", "entry ':4'"),
        ("a:٤", "entry"),  # not an ASCII digit
        ("a:1;a:2", "names broker 'a' twice"),
    ]:
        with pytest.raises(ConfigError, match="orderTopicConf") as info:
            parse_order_topic_conf(bad)
        assert why in str(info.value)
    with pytest.raises(ConfigError, match="must be a str"):
        parse_order_topic_conf(4)  # type: ignore[arg-type]


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(max_size=40), st.text(alphabet="ab:;0123456789 -", max_size=40)))
def test_any_text_parses_or_is_a_config_error(text):
    try:
        entries = parse_order_topic_conf(text)
    except ConfigError as exc:
        assert repr(text) in str(exc)
        return
    assert entries and len({name for name, _ in entries}) == len(entries)
    assert all(1 <= n <= MAX_ORDER_QUEUE_NUMS for _, n in entries)


names = st.text(st.characters(blacklist_characters=":;", blacklist_categories=["Cs"]), min_size=1)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(names, st.integers(1, MAX_ORDER_QUEUE_NUMS), min_size=1, max_size=8))
def test_a_formatted_conf_parses_back(conf):
    text = ";".join(f"{name}:{n}" for name, n in conf.items())
    assert parse_order_topic_conf(text) == list(conf.items())


# -- routes and the producer's queues -----------------------------------------------------------


@pytest.fixture
def ns():
    server = NameServer(port=0, order_message_enable=True)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def brokers(ns):
    """broker-a and broker-b registered with ``ns`` (the connection stays open: closing it
    would remove them); both serve Ordered and Plain with 8 queues."""
    with RemotingClient(default_timeout=3.0) as client:
        for name, port in (("broker-a", 10911), ("broker-b", 10811)):
            ext = {"brokerName": name, "brokerAddr": f"127.0.0.1:{port}", "brokerId": 0,
                   "clusterName": "DefaultCluster", "haServerAddr": ""}  # fmt: skip
            table = {t: {"topicName": t, **TOPIC} for t in ("Ordered", "Plain")}
            body = {"topicConfigSerializeWrapper": {"topicConfigTable": table}}
            client.invoke_json(ns.address, RequestCode.REGISTER_BROKER, ext, body)
        yield client


def publish_queues(ns, topic: str) -> list[MessageQueue]:
    with RemotingClient() as client:
        infos = PublishInfoTable(RouteTable(ns.address, client), "g", 4, 30.0)
        try:
            return infos.fetch(topic).queues
        finally:
            infos.close()


def test_publish_queues_follow_the_order_conf(ns, brokers, caplog):
    with Admin(ns.address) as admin:
        admin.update_order_conf("Ordered", "broker-b:2;broker-a:3")
        admin.wipe_write_perm("broker-b")  # ordered queues stay; plain ones leave broker-b
    assert [(q.broker_name, q.queue_id) for q in publish_queues(ns, "Ordered")] == [
        ("broker-b", 0), ("broker-b", 1), ("broker-a", 0), ("broker-a", 1), ("broker-a", 2)
    ]  # fmt: skip
    assert {q.broker_name for q in publish_queues(ns, "Plain")} == {"broker-a"}

    ns.kv_config.put("ORDER_TOPIC_CONFIG", "Ordered", "broker-a:1;broker-gone:4")
    with caplog.at_level(logging.WARNING, "shmq.client.producer.publish_info"):
        assert publish_queues(ns, "Ordered") == [MessageQueue("Ordered", "broker-a", 0)]
    assert "broker-gone" in caplog.text and "left out" in caplog.text

    ns.kv_config.put("ORDER_TOPIC_CONFIG", "Ordered", "broker-a")  # admin checks; a raw put not
    with pytest.raises(ConfigError, match="the route of topic Ordered: orderTopicConf"):
        publish_queues(ns, "Ordered")


def test_a_producer_offers_its_selector_the_conf_queues(ns, brokers):
    ns.kv_config.put("ORDER_TOPIC_CONFIG", "Ordered", "broker-a:2")
    seen: list[list[MessageQueue]] = []

    def selector(queues, msg, arg):
        seen.append(queues)
        raise LookupError("seen enough")  # nothing is sent: no broker listens there

    producer = Producer("order-conf-p", ns.address)
    try:
        with pytest.raises(ClientError, match="selector failed"):
            producer.send(Message("Ordered", b"x"), selector=selector)
    finally:
        producer.close()
    assert seen == [
        [MessageQueue("Ordered", "broker-a", 0), MessageQueue("Ordered", "broker-a", 1)]
    ]


# -- Admin --------------------------------------------------------------------------------------


def test_admin_kv_config_and_order_confs(ns):
    other = NameServer(port=0)
    other.start()
    try:
        with Admin(f"{ns.address};{other.address}") as admin:
            admin.update_kv_config("app", "k", "v")
            assert ns.kv_config.get("app", "k") == other.kv_config.get("app", "k") == "v"
            assert admin.get_kv_config("app", "k") == "v"
            assert admin.get_kv_config("app", "nope") is None
            assert admin.kv_list("app") == {"k": "v"} and admin.kv_list("none") == {}
            admin.delete_kv_config("app", "k")
            assert other.kv_config.namespace("app") == {} and admin.kv_list("app") == {}

            with pytest.raises(ConfigError, match="orderTopicConf"):
                admin.update_order_conf("T", "broker-a:zero")
            assert admin.order_conf("T") is None
            admin.update_order_conf("T", "broker-a:4")
            assert admin.order_conf("T") == "broker-a:4"
            assert other.kv_config.get("ORDER_TOPIC_CONFIG", "T") == "broker-a:4"
            admin.delete_order_conf("T")
            assert admin.order_conf("T") is None
    finally:
        other.stop()


def test_admin_topics_by_cluster_and_write_perms(ns, brokers):
    with Admin(ns.address) as admin:
        assert admin.topics_by_cluster("DefaultCluster") == ["Ordered", "Plain"]
        assert admin.topics_by_cluster("Nope") == []
        assert admin.wipe_write_perm("broker-a") == {ns.address: 2}
        assert {q["perm"] for q in admin.topic_route("Plain")["queueDatas"]} == {4, 6}
        assert admin.add_write_perm("broker-a") == {ns.address: 2}
        assert {q["perm"] for q in admin.topic_route("Plain")["queueDatas"]} == {6}


def test_a_change_names_the_namesrv_that_did_not_take_it(ns, brokers):
    down = f"127.0.0.1:{free_port()}"
    with Admin(f"{ns.address};{down}", timeout=2.0) as admin:
        with pytest.raises(RemotingConnectError) as info:
            admin.wipe_write_perm("broker-a")
        assert f"namesrv {down}" in str(info.value)
        assert f"taken by: {ns.address}" in str(info.value)
        with pytest.raises(RemotingConnectError, match=f"namesrv {down}"):
            admin.update_kv_config("app", "k", "v")
    assert ns.kv_config.get("app", "k") == "v"
    assert {q["perm"] for q in ns.routes.pick_topic_route("Plain")["queueDatas"]} == {4, 6}
