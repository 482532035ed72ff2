"""fastjson's dialect (shmq.remoting.fastjson): object and bare number map keys, round trips,
RocketMQ's own texts, and the independent reader of the wire tests agreeing with it."""

from __future__ import annotations

import pytest
import wire_client as wc
from hypothesis import given
from hypothesis import strategies as st

from shmq.remoting import fastjson
from shmq.remoting.admin_bodies import queue_entries, queue_key, queue_table
from shmq.remoting.fastjson import ObjectKey

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
key_scalars = st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text()
object_keys = st.dictionaries(st.text(), key_scalars, min_size=1, max_size=4).map(ObjectKey.of)
# fastjson leaves null map values out, so a value in a map is never None
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(), inner.filter(lambda v: v is not None), max_size=4)
        | st.dictionaries(st.integers(0, 2**40), inner.filter(lambda v: v is not None), max_size=4)
        | st.dictionaries(object_keys, inner.filter(lambda v: v is not None), max_size=4)
    ),
    max_leaves=20,
)


@given(values)
def test_round_trip(value):
    assert fastjson.loads(fastjson.dumps(value), bare_int_keys=True) == value


@given(st.dictionaries(object_keys, st.integers(), max_size=5))
def test_the_wire_clients_reader_agrees(table):
    """An independent reader (mqadmin's view) reads what shmq writes."""
    read = wc.fastjson_loads(fastjson.dumps({"offsetTable": table}).encode())["offsetTable"]
    assert read == {tuple(sorted(k.as_dict().items())): v for k, v in table.items()}


def test_rocketmq_texts():
    stats = (
        '{"offsetTable":{{"brokerName":"broker-a","queueId":1,"topic":"T"}:'
        '{"lastUpdateTimestamp":1700000000000,"maxOffset":5,"minOffset":0}}}'
    )
    data = fastjson.loads(stats)
    assert queue_entries(data["offsetTable"]) == [
        {"topic": "T", "brokerName": "broker-a", "queueId": 1,
         "lastUpdateTimestamp": 1700000000000, "maxOffset": 5, "minOffset": 0}
    ]  # fmt: skip
    rows = [("T", "broker-a", 1, {"lastUpdateTimestamp": 1700000000000, "maxOffset": 5,
                                  "minOffset": 0})]  # fmt: skip
    assert fastjson.dumps({"offsetTable": queue_table(rows)}) == stats
    assert queue_key("T", "b", 0) == ObjectKey.of({"brokerName": "b", "queueId": 0, "topic": "T"})
    cluster = '{"brokerAddrTable":{"b":{"brokerAddrs":{0:"127.0.0.1:10911"}}}}'
    addrs = fastjson.loads(cluster)["brokerAddrTable"]["b"]["brokerAddrs"]
    assert addrs == {"0": "127.0.0.1:10911"}
    addrs = fastjson.loads(cluster, bare_int_keys=True)["brokerAddrTable"]["b"]["brokerAddrs"]
    assert addrs == {0: "127.0.0.1:10911"}
    assert fastjson.dumps({"a": None, "b": [None, 1.5], 2: True}) == '{"b":[null,1.5],2:true}'


@pytest.mark.parametrize("text", ["{0:}", "{1.5:1}", '{"a":1', "[1,]", "{true:1}", '{"a":1} x'])
def test_bad_texts_raise_value_error(text):
    with pytest.raises(ValueError):
        fastjson.loads(text)


def test_a_plain_map_is_not_a_queue_table():
    with pytest.raises(ValueError, match="MessageQueue map key"):
        queue_entries({"T": {"maxOffset": 1}})
