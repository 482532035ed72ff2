"""The namesrv's Prometheus endpoint: brokers and topics it routes, its request latency and
the controller's view, scraped over HTTP from a real NameServer; off by default."""

from __future__ import annotations

import socket

import pytest
from metrics_scrape import Samples, sample, scrape_endpoint

from shmq.errors import ConfigError
from shmq.namesrv.server import NameServer
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RequestCode

M, S1 = "10.0.0.1:10911", "10.0.0.2:10911"


def scrape(ns: NameServer) -> Samples:
    return scrape_endpoint(ns.metrics_address)


def value(samples: Samples, name: str, **labels: str) -> float:
    found = sample(samples, name, **labels)
    return 0.0 if found is None else found


def register(client: RemotingClient, ns: NameServer, addr: str, broker_id: int):
    fields = {"brokerName": "broker-a", "brokerAddr": addr, "clusterName": "C",
              "brokerId": broker_id, "haServerAddr": ""}  # fmt: skip
    wrapper = {"topicConfigTable": {"T1": {"topicName": "T1", "readQueueNums": 2,
                                           "writeQueueNums": 2, "perm": 6}},
               "dataVersion": {"timestamp": 1, "counter": 1}}  # fmt: skip
    body = {"topicConfigSerializeWrapper": wrapper}
    return client.invoke_json(ns.address, RequestCode.REGISTER_BROKER, fields, body)


def test_brokers_topics_and_request_latency_are_exported():
    ns = NameServer(port=0, metrics_port=0)
    ns.start()
    try:
        with RemotingClient() as client:
            register(client, ns, M, 0)
            register(client, ns, S1, 1)
            client.invoke_json(ns.address, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T1"})
            samples = scrape(ns)  # while connected: a closed connection unregisters
            node = {"node_type": "namesrv", "node_id": ns.address}
            assert value(samples, "shmq_namesrv_brokers", cluster="C", role="master", **node) == 1
            assert value(samples, "shmq_namesrv_brokers", cluster="C", role="slave") == 1
            assert value(samples, "shmq_namesrv_topics") >= 1
            registered = {"request_code": "register_broker", "response_code": "success"}
            assert value(samples, "rocketmq_rpc_latency_count", **registered) == 2
            routed = {"request_code": "get_routeinfo_by_topic", "response_code": "success"}
            assert value(samples, "rocketmq_rpc_latency_bucket", le="+Inf", **routed) == 1
            assert value(samples, "shmq_controller_epoch") == 0  # no controller: no group
    finally:
        ns.stop()


def test_the_controllers_groups_are_exported():
    ns = NameServer(port=0, enable_controller=True, metrics_port=0)
    ns.start()
    try:
        ns.controller.heartbeat("broker-a", M, role="ASYNC_MASTER", broker_id=0, epoch=0,
                                max_offset=0)  # fmt: skip
        samples = scrape(ns)
        assert value(samples, "shmq_controller_epoch", broker_name="broker-a") == 1
        assert value(samples, "shmq_controller_has_master", broker_name="broker-a") == 1
    finally:
        ns.stop()


def test_off_by_default_and_a_taken_port_is_a_clear_error():
    ns = NameServer(port=0)
    ns.start()
    try:
        assert ns.metrics_address == ""
    finally:
        ns.stop()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = NameServer(port=0, metrics_port=taken.getsockname()[1])
        with pytest.raises(ConfigError, match="for the namesrv's metrics"):
            busy.start()
        busy.stop()
