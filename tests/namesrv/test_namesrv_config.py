"""GET_NAMESRV_CONFIG and UPDATE_NAMESRV_CONFIG (mqadmin getNamesrvConfig and
updateNamesrvConfig) with the independent wire client: the settings as properties text;
orderMessageEnable switched at run time (routes carry orderTopicConf at once); black-listed,
unknown and start-time keys and bad values refused, nothing changed."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest
import wire_client as wc
from hypothesis import given, settings
from hypothesis import strategies as st
from test_namesrv_admin_codes import register, serve

from shmq.errors import ConfigError
from shmq.java_properties import parse_properties
from shmq.namesrv import namesrv_config
from shmq.remoting.client import RemotingClient

UPDATE_NAMESRV_CONFIG, GET_NAMESRV_CONFIG, GET_ROUTEINFO_BY_TOPIC, PUT_KV_CONFIG = (
    318, 319, 105, 100)  # fmt: skip
NO_PERMISSION = 16


@pytest.fixture
def ns():
    server = serve()
    yield server
    server.stop()


def config(ns, encoding: int = wc.JSON) -> dict[str, str]:
    with wc.WireClient(ns.address, encoding) as c:
        resp = c.call(GET_NAMESRV_CONFIG, {})
    assert resp.code == wc.SUCCESS, resp
    return parse_properties(resp.body.decode())


def update(ns, text: str, encoding: int = wc.JSON) -> wc.Frame:
    with wc.WireClient(ns.address, encoding) as c:
        return c.call(UPDATE_NAMESRV_CONFIG, {}, text.encode())


@pytest.mark.parametrize("encoding", [wc.JSON, wc.ROCKETMQ])
def test_order_message_enable_switches_at_run_time(ns, encoding):
    assert config(ns, encoding) == {
        "listenPort": str(ns.port), "kvConfigPath": "", "orderMessageEnable": "false",
        "scanNotActiveBrokerInterval": "10000", "brokerChannelExpiredTime": "120000",
        "enableControllerInNamesrv": "false",
    }  # fmt: skip
    # the registration's connection stays open: closing it removes the broker
    with RemotingClient() as client, wc.WireClient(ns.address, encoding) as c:
        register(client, ns, "127.0.0.1:10911", "broker-a", topics=["NsOrdered"])
        conf = {"namespace": "ORDER_TOPIC_CONFIG", "key": "NsOrdered", "value": "broker-a:2"}
        assert c.call(PUT_KV_CONFIG, conf).code == wc.SUCCESS

        def order_conf():
            resp = c.call(GET_ROUTEINFO_BY_TOPIC, {"topic": "NsOrdered"})
            return wc.fastjson_loads(resp.body)["orderTopicConf"]

        assert order_conf() is None
        resp = update(ns, "orderMessageEnable=true\n", encoding)
        assert (resp.code, resp.remark) == (wc.SUCCESS, None), resp
        assert config(ns)["orderMessageEnable"] == "true"
        assert order_conf() == "broker-a:2"
        assert update(ns, "orderMessageEnable = FALSE", encoding).code == wc.SUCCESS
        assert order_conf() is None


@pytest.mark.parametrize(
    ("text", "code", "remark"),
    [
        ("kvConfigPath=/etc/passwd", NO_PERMISSION,
         "Can not update config in black list. (kvConfigPath)"),
        ("configStorePath=/tmp/x\norderMessageEnable=true", NO_PERMISSION, "black list"),
        ("orderMessageEnabled=true", wc.SYSTEM_ERROR,
         "unknown namesrv config key orderMessageEnabled"),
        ("listenPort=1", wc.SYSTEM_ERROR, "listenPort is read when the namesrv starts"),
        ("orderMessageEnable=yes", wc.SYSTEM_ERROR, "orderMessageEnable = 'yes' is not a valid"),
    ],
)  # fmt: skip
def test_refused_updates_change_nothing(ns, text, code, remark):
    before = config(ns)
    resp = update(ns, text)
    assert resp.code == code and remark in resp.remark, resp
    assert config(ns) == before


KEYS = ["orderMessageEnable", "listenPort", "kvConfigPath", "nope"]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60) | st.builds(lambda k, v: f"{k}={v}", st.sampled_from(KEYS),
                                        st.text(max_size=8)))  # fmt: skip
def test_any_namesrv_update_body_is_taken_or_refused(text):
    """UPDATE_NAMESRV_CONFIG's body, whatever it is: applied, black-listed, or a
    ConfigError naming the problem."""
    ns = SimpleNamespace(port=9876, kv_config=SimpleNamespace(path=None), controller=None,
                         order_message_enable=False, scan_interval_ms=10_000,
                         broker_expire_ms=120_000)  # fmt: skip
    with contextlib.suppress(ConfigError):
        namesrv_config.update(ns, text)
