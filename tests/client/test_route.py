"""Route parsing and the choice of the broker a queue is read from (RocketMQ's
``findBrokerAddressInSubscribe``)."""

from __future__ import annotations

from shmq.client.route import _parse_route


def route(**addrs: str) -> dict:
    return {
        "brokerDatas": [{"brokerName": "b", "brokerAddrs": addrs}],
        "queueDatas": [{"brokerName": "b", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}],
    }


def test_the_suggested_broker_else_the_master_else_a_slave():
    [both] = _parse_route(route(**{"0": "m:1", "1": "s:1"}))
    assert (both.address, both.master) == ("m:1", "m:1")
    assert (both.find(0), both.find(1)) == ("m:1", "s:1")
    assert both.find(7) == "m:1"  # not in the route: the master
    [slave] = _parse_route(route(**{"1": "s:1", "2": "s:2"}))
    assert (slave.address, slave.master) == ("s:1", "")
    assert (slave.find(0), slave.find(1), slave.find(2)) == ("s:1", "s:1", "s:2")
    [master] = _parse_route(route(**{"0": "m:1"}))
    assert master.find(1) == "m:1"
    assert _parse_route(route()) == []
