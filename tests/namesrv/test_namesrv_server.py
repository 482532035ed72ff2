"""NameServer over real sockets, and ``shmq namesrv`` as a real process."""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
from click.testing import CliRunner
from waiting import wait_for

from shmq.errors import ResponseError, ShmqError
from shmq.namesrv.server import NameServer
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode
from shmq_cli.namesrv import namesrv

TOPIC = {"readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "topicSysFlag": 0}


def register(client, ns, addr, name, broker_id=0, topics=(), counter=1, body=True):
    ext = {
        "brokerName": name,
        "brokerAddr": addr,
        "clusterName": "DefaultCluster",
        "brokerId": broker_id,
        "haServerAddr": addr.replace(":109", ":119"),
    }
    wrapper = {
        "topicConfigTable": {t: {"topicName": t, **TOPIC} for t in topics},
        "dataVersion": {"counter": counter, "timestamp": 1_700_000_000_000},
    }
    body_obj = {"topicConfigSerializeWrapper": wrapper} if body else None
    return client.invoke_json(ns.address, RequestCode.REGISTER_BROKER, ext, body_obj)


def route(client, ns, topic):
    return client.invoke_json(ns.address, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})[1]


@pytest.fixture
def ns():
    server = NameServer(port=0)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def clients():
    made: list[RemotingClient] = []

    def make() -> RemotingClient:
        made.append(RemotingClient(default_timeout=3.0))
        return made[-1]

    yield make
    for c in made:
        c.close()


def test_register_two_brokers_and_route(ns, clients):
    a, b, user = clients(), clients(), clients()
    resp, _ = register(a, ns, "127.0.0.1:10911", "broker-a", topics=["T", "OnlyA"])
    assert "masterAddr" not in resp.ext_fields
    register(b, ns, "127.0.0.1:10811", "broker-b", topics=["T"])

    data = route(user, ns, "T")
    assert [q["brokerName"] for q in data["queueDatas"]] == ["broker-a", "broker-b"]
    assert data["brokerDatas"][1] == {
        "cluster": "DefaultCluster",
        "brokerName": "broker-b",
        "brokerAddrs": {"0": "127.0.0.1:10811"},
    }
    assert data["orderTopicConf"] is None and data["filterServerTable"] == {}

    _, info = user.invoke_json(ns.address, RequestCode.GET_BROKER_CLUSTER_INFO)
    assert info["clusterAddrTable"] == {"DefaultCluster": ["broker-a", "broker-b"]}
    _, listed = user.invoke_json(ns.address, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    assert listed == {"topicList": ["OnlyA", "T"]}

    user.invoke_json(ns.address, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "OnlyA"})
    ext = {"clusterName": "DefaultCluster", "brokerAddr": "127.0.0.1:10811",
           "brokerName": "broker-b", "brokerId": 0}  # fmt: skip
    user.invoke_json(ns.address, RequestCode.UNREGISTER_BROKER, ext)
    assert [q["brokerName"] for q in route(user, ns, "T")["queueDatas"]] == ["broker-a"]
    assert ns.routes.all_topics() == ["T"]


def test_unknown_topic_is_topic_not_exist(ns, clients):
    with pytest.raises(ResponseError) as info:
        route(clients(), ns, "Nope")
    assert info.value.code == ResponseCode.TOPIC_NOT_EXIST
    assert info.value.remark == "No topic route info in name server for the topic: Nope"


def test_slave_gets_master_addresses_and_empty_body_means_no_topics(ns, clients):
    register(clients(), ns, "127.0.0.1:10911", "broker-a", topics=["T"])
    resp, _ = register(clients(), ns, "127.0.0.1:10921", "broker-a", broker_id=1, body=False)
    assert resp.ext_fields == {"haServerAddr": "127.0.0.1:11911", "masterAddr": "127.0.0.1:10911"}
    register(clients(), ns, "127.0.0.1:10711", "broker-c", body=False)
    assert ns.routes.all_topics() == ["T"]
    assert "broker-c" in ns.routes.cluster_info()["brokerAddrTable"]


@pytest.mark.parametrize(
    ("drop", "value", "field"),
    [
        ("brokerName", None, "brokerName"),
        ("haServerAddr", None, "haServerAddr"),
        ("brokerId", "zero", "brokerId"),
    ],
)
def test_bad_register_fields_are_system_error(ns, clients, drop, value, field):
    ext = {"brokerName": "b", "brokerAddr": "127.0.0.1:1", "clusterName": "C", "brokerId": 0,
           "haServerAddr": "127.0.0.1:2", drop: value}  # fmt: skip
    client = clients()
    with pytest.raises(ResponseError, match=field) as info:
        client.invoke_json(ns.address, RequestCode.REGISTER_BROKER, ext)
    assert info.value.code == ResponseCode.SYSTEM_ERROR
    assert ns.routes.cluster_info()["brokerAddrTable"] == {}


def test_bad_bodies_and_missing_topic_are_system_error(ns, clients):
    client = clients()
    ext = {"brokerName": "b", "brokerAddr": "127.0.0.1:1", "clusterName": "C", "brokerId": 0,
           "haServerAddr": "127.0.0.1:2"}  # fmt: skip
    for body, reason in [
        (b"{oops", "not JSON"),
        (b"[1]", "topicConfigSerializeWrapper"),
        (b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"perm":"x"}}}}', "perm"),
    ]:
        req = RemotingCommand.request(RequestCode.REGISTER_BROKER, ext, body)
        resp = client.invoke(ns.address, req)
        assert resp.code == ResponseCode.SYSTEM_ERROR and reason in resp.remark
    for code in (RequestCode.GET_ROUTEINFO_BY_TOPIC, RequestCode.DELETE_TOPIC_IN_NAMESRV):
        resp = client.invoke(ns.address, RemotingCommand.request(code))
        assert resp.code == ResponseCode.SYSTEM_ERROR and "topic" in resp.remark
    resp = client.invoke(ns.address, RemotingCommand.request(RequestCode.SEND_MESSAGE))
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


def test_connection_close_removes_broker(ns, clients):
    broker, user = clients(), clients()
    register(broker, ns, "127.0.0.1:10911", "broker-a", topics=["T"])
    assert route(user, ns, "T")["brokerDatas"]
    broker.close()
    wait_for(lambda: ns.routes.all_topics() == [], what="the closed broker's routes to go")


def test_silent_broker_expires():
    server = NameServer(port=0, scan_interval_ms=100, broker_expire_ms=300)
    server.start()
    try:
        with RemotingClient() as broker:  # stays connected: only expiry can remove it
            register(broker, server, "127.0.0.1:10911", "broker-a", topics=["T"])
            start = time.monotonic()
            time.sleep(0.15)  # a test of absence: not expired before broker_expire_ms
            assert server.routes.all_topics() == ["T"]
            wait_for(lambda: server.routes.all_topics() == [], timeout=2.0,
                     what="the silent broker to expire")  # fmt: skip
            assert 0.25 < time.monotonic() - start < 1.5
            register(broker, server, "127.0.0.1:10911", "broker-a", topics=["T"])  # comes back
            assert server.routes.all_topics() == ["T"]
    finally:
        server.stop()


def test_port_in_use_is_a_shmq_error(ns):
    result = CliRunner().invoke(namesrv, ["--port", str(ns.port)])
    assert result.exit_code != 0
    assert isinstance(result.exception, ShmqError)
    assert f"cannot listen on 127.0.0.1:{ns.port}" in str(result.exception)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cli_runs_serves_and_stops_on_sigterm():
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    code = "from shmq_cli.namesrv import namesrv; namesrv()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True).start()
        assert lines.get(timeout=10) == f"namesrv listening on 127.0.0.1:{port}\n"
        with RemotingClient() as client:
            _, info = client.invoke_json(f"127.0.0.1:{port}", RequestCode.GET_BROKER_CLUSTER_INFO)
        assert info == {"brokerAddrTable": {}, "clusterAddrTable": {}}
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0, proc.stderr.read()
        assert time.monotonic() - start < 5
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def test_bad_topic_names_get_an_error_and_the_connection_stays(ns):
    with RemotingClient() as client:
        for code in (RequestCode.GET_ROUTEINFO_BY_TOPIC, RequestCode.DELETE_TOPIC_IN_NAMESRV):
            for bad in ("../etc", "a b", "x" * 200):
                with pytest.raises(ResponseError, match="invalid") as err:
                    client.invoke_json(ns.address, code, {"topic": bad})
                assert err.value.code == ResponseCode.SYSTEM_ERROR
        with pytest.raises(ResponseError) as err:  # the same connection still answers
            route(client, ns, "NoSuchTopic")
        assert err.value.code == ResponseCode.TOPIC_NOT_EXIST
