"""The NameServer's KV config (RocketMQ's KVConfigManager): the table and its file, and
PUT/GET/DELETE_KV_CONFIG and GET_KVLIST_BY_NAMESPACE over the wire, with RocketMQ's codes and
remarks, checked with shmq's client and with the independent ``wire_client`` in both header
encodings."""

from __future__ import annotations

import json
import os

import pytest
import wire_client as wc

from shmq.errors import ConfigError, ResponseError
from shmq.namesrv.kv_config import KVConfigManager
from shmq.namesrv.server import NameServer
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode

PUT, GET = RequestCode.PUT_KV_CONFIG, RequestCode.GET_KV_CONFIG
DELETE, LIST = RequestCode.DELETE_KV_CONFIG, RequestCode.GET_KVLIST_BY_NAMESPACE


@pytest.fixture
def kv_path(tmp_path):
    return str(tmp_path / "namesrv" / "kvConfig.json")


@pytest.fixture
def ns(kv_path):
    server = NameServer(port=0, kv_config_path=kv_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def client():
    with RemotingClient(default_timeout=3.0) as c:
        yield c


def call(client, ns, code, **fields) -> RemotingCommand:
    return client.invoke(ns.address, RemotingCommand.request(code, fields))


# -- the table and its file ---------------------------------------------------------------------


def test_table_in_memory_without_a_path():
    kv = KVConfigManager()
    assert kv.get("ns", "k") is None and kv.namespace("ns") is None
    kv.put("ns", "k", "v")
    kv.put("ns", "k", "v2")
    assert kv.get("ns", "k") == "v2" and kv.namespace("ns") == {"k": "v2"}
    kv.delete("ns", "k")
    kv.delete("other", "k")  # nothing there: no error, as in RocketMQ
    assert kv.get("ns", "k") is None
    assert kv.namespace("ns") == {}  # RocketMQ keeps the emptied namespace


def test_file_is_rocketmqs_wrapper_written_atomically_and_reloaded(kv_path):
    kv = KVConfigManager(kv_path)
    assert not os.path.exists(kv_path)  # nothing written until something changes
    kv.put("ORDER_TOPIC_CONFIG", "T", "broker-a:4")
    kv.put("app", "ä", "ü")
    with open(kv_path, encoding="utf-8") as f:
        text = f.read()
    assert text == '{"configTable":{"ORDER_TOPIC_CONFIG":{"T":"broker-a:4"},"app":{"ä":"ü"}}}'
    with open(kv_path + ".bak", encoding="utf-8") as f:  # the content before the last write
        assert json.load(f) == {"configTable": {"ORDER_TOPIC_CONFIG": {"T": "broker-a:4"}}}
    assert sorted(os.listdir(os.path.dirname(kv_path))) == ["kvConfig.json", "kvConfig.json.bak"]
    again = KVConfigManager(kv_path)
    assert again.get("app", "ä") == "ü" and again.namespace("ORDER_TOPIC_CONFIG") == {
        "T": "broker-a:4"
    }


@pytest.mark.parametrize(
    "text",
    ["{oops", "[1]", '{"configTable":[]}', '{"configTable":{"ns":"x"}}',
     '{"configTable":{"ns":{"k":1}}}'],
)  # fmt: skip
def test_a_corrupt_file_is_an_error_naming_it(kv_path, text):
    os.makedirs(os.path.dirname(kv_path))
    with open(kv_path, "w") as f:
        f.write(text)
    with pytest.raises(ConfigError, match=r"kvConfig\.json") as info:
        NameServer(port=0, kv_config_path=kv_path)
    assert kv_path in str(info.value)


def test_a_corrupt_file_falls_back_to_its_bak(kv_path):
    kv = KVConfigManager(kv_path)
    kv.put("ns", "k", "1")
    kv.put("ns", "k", "2")
    with open(kv_path, "w") as f:
        f.write("{torn")
    assert KVConfigManager(kv_path).get("ns", "k") == "1"


def test_a_write_that_fails_changes_nothing(kv_path, client):
    os.makedirs(kv_path + ".tmp")  # a directory where the temporary file goes: writes fail
    server = NameServer(port=0, kv_config_path=kv_path)
    server.start()
    try:
        resp = call(client, server, PUT, namespace="ns", key="k", value="v")
        assert resp.code == ResponseCode.SYSTEM_ERROR
        assert f"KV config not changed: cannot write {kv_path}" in resp.remark
        assert server.kv_config.get("ns", "k") is None and not os.path.exists(kv_path)
    finally:
        server.stop()


def test_the_table_is_bounded(kv_path, client, monkeypatch):
    """Any client may put: past MAX_ENTRIES keys or MAX_CHARS characters a put fails
    naming the bound and changes nothing; shorter values, deletes and puts after a delete
    still work."""
    from shmq.namesrv import kv_config

    monkeypatch.setattr(kv_config, "MAX_ENTRIES", 3)
    monkeypatch.setattr(kv_config, "MAX_CHARS", 40)
    kv = KVConfigManager(kv_path)
    for k in ("k1", "k2", "k3"):
        kv.put("ns", k, "v")
    with pytest.raises(ConfigError, match=r"KV config full: .* 4 keys .*at most 3"):
        kv.put("ns", "k4", "v")
    with pytest.raises(ConfigError, match=r"KV config full: .*at most 3 and 40"):
        kv.put("ns", "k1", "x" * 40)
    assert kv.namespace("ns") == {"k1": "v", "k2": "v", "k3": "v"}
    assert KVConfigManager(kv_path).namespace("ns") == {"k1": "v", "k2": "v", "k3": "v"}
    kv.put("ns", "k1", "")  # no longer: allowed
    kv.delete("ns", "k2")
    kv.put("other", "k4", "v")
    server = NameServer(port=0, kv_config_path=kv_path)
    server.start()
    try:
        resp = call(client, server, PUT, namespace="ns", key="k5", value="v")
        assert resp.code == ResponseCode.SYSTEM_ERROR and "KV config full" in resp.remark
        assert call(client, server, GET, namespace="ns", key="k5").code == (
            ResponseCode.QUERY_NOT_FOUND
        )
    finally:
        server.stop()


# -- over the wire ------------------------------------------------------------------------------


def test_put_get_list_delete(ns, client):
    assert call(client, ns, PUT, namespace="app", key="k1", value="v1").code == ResponseCode.SUCCESS
    call(client, ns, PUT, namespace="app", key="k2", value="")
    got = call(client, ns, GET, namespace="app", key="k1")
    assert (got.code, got.ext_fields) == (ResponseCode.SUCCESS, {"value": "v1"})
    listed = call(client, ns, LIST, namespace="app")
    assert listed.json_body() == {"table": {"k1": "v1", "k2": ""}}
    assert call(client, ns, DELETE, namespace="app", key="k1").code == ResponseCode.SUCCESS
    assert call(client, ns, LIST, namespace="app").json_body() == {"table": {"k2": ""}}
    call(client, ns, DELETE, namespace="app", key="k2")
    assert call(client, ns, LIST, namespace="app").json_body() == {"table": {}}


def test_missing_key_and_namespace_are_query_not_found_with_rocketmqs_remarks(ns, client):
    missing = call(client, ns, GET, namespace="app", key="nope")
    assert missing.code == ResponseCode.QUERY_NOT_FOUND
    assert missing.remark == "No config item, Namespace: app Key: nope"
    empty = call(client, ns, LIST, namespace="nothing")
    assert (empty.code, empty.remark) == (
        ResponseCode.QUERY_NOT_FOUND, "No config item, Namespace: nothing"
    )  # fmt: skip


@pytest.mark.parametrize(
    ("code", "fields", "missing"),
    [
        (PUT, {"namespace": "n", "key": "k"}, "value"),
        (PUT, {"key": "k", "value": "v"}, "namespace"),
        (GET, {"namespace": "n"}, "key"),
        (DELETE, {"key": "k"}, "namespace"),
        (LIST, {}, "namespace"),
    ],
)
def test_a_missing_header_field_is_system_error_naming_it(ns, client, code, fields, missing):
    resp = client.invoke(ns.address, RemotingCommand.request(code, fields))
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert f"the custom field <{missing}> is null" in resp.remark
    assert ns.kv_config.namespace("n") is None


def test_entries_survive_a_namesrv_restart(kv_path, client):
    first = NameServer(port=0, kv_config_path=kv_path)
    first.start()
    try:
        call(client, first, PUT, namespace="app", key="k", value="kept")
        call(client, first, PUT, namespace="app", key="gone", value="x")
        call(client, first, DELETE, namespace="app", key="gone")
    finally:
        first.stop()
    second = NameServer(port=0, kv_config_path=kv_path)
    second.start()
    try:
        with pytest.raises(ResponseError):  # invoke_json: an error code raises
            client.invoke_json(second.address, GET, {"namespace": "app", "key": "gone"})
        resp, _ = client.invoke_json(second.address, GET, {"namespace": "app", "key": "k"})
        assert resp.ext_fields["value"] == "kept"
    finally:
        second.stop()


@pytest.mark.parametrize("encoding", [wc.JSON, wc.ROCKETMQ])
def test_wire_client_in_both_header_encodings(ns, encoding):
    with wc.WireClient(ns.address, encoding) as c:
        put = c.call(PUT, {"namespace": "wire", "key": "k", "value": "välue"})
        assert (put.code, put.serialize) == (wc.SUCCESS, encoding)
        got = c.call(GET, {"namespace": "wire", "key": "k"})
        assert (got.code, got.ext) == (wc.SUCCESS, {"value": "välue"})
        listed = c.call(LIST, {"namespace": "wire"})
        assert json.loads(listed.body) == {"table": {"k": "välue"}}
        missing = c.call(GET, {"namespace": "wire", "key": "x"})
        assert (missing.code, missing.remark) == (22, "No config item, Namespace: wire Key: x")
        bad = c.call(PUT, {"namespace": "wire", "key": "k"})
        assert bad.code == wc.SYSTEM_ERROR and "<value>" in bad.remark
        assert c.call(DELETE, {"namespace": "wire", "key": "k"}).code == wc.SUCCESS
