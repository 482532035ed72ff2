"""UPDATE_BROKER_CONFIG (mqadmin updateBrokerConfig) over the wire, written with the
independent wire client: live keys act at once (brokerPermission reaches the namesrv's
routes), the others are written into the broker's config file, refused keys change
nothing; and the in-place edit of properties and TOML files, fuzzed."""

from __future__ import annotations

import contextlib
import os
import string
import tomllib

import pytest
import wire_client as wc
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_remoting_send import send, until

from shmq.broker.config.broker_config import load_broker_config
from shmq.broker.config.updates import _edit_properties, _edit_toml
from shmq.errors import ConfigError
from shmq.java_properties import parse_properties

UPDATE_BROKER_CONFIG, GET_BROKER_CONFIG, GET_ROUTEINFO_BY_TOPIC = 25, 26, 105
NO_PERMISSION = 16

CONF = """# the test's broker
brokerClusterName = DefaultCluster
flushConsumerOffsetInterval=5000
"""


def update(broker, text: str, encoding: int = wc.JSON) -> wc.Frame:
    with wc.WireClient(broker.address, encoding) as c:
        return c.call(UPDATE_BROKER_CONFIG, {}, text.encode())


def running_config(broker) -> tuple[dict[str, str], int]:
    with wc.WireClient(broker.address) as c:
        resp = c.call(GET_BROKER_CONFIG, {})
    config = parse_properties(resp.body.decode())
    return config, wc.fastjson_loads(resp.ext["version"].encode())["counter"]


def route_perms(namesrv: str, topic: str) -> set[int]:
    with wc.WireClient(namesrv) as c:
        resp = c.call(GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    assert resp.code == wc.SUCCESS, resp
    return {q["perm"] for q in wc.fastjson_loads(resp.body)["queueDatas"]}


@pytest.fixture
def broker_with_file(make_broker, tmp_path):
    path = tmp_path / "broker.conf"
    path.write_text(CONF)
    broker, namesrv = make_broker(broker_config_path=str(path))
    return broker, namesrv, path


@pytest.mark.parametrize("encoding", [wc.JSON, wc.ROCKETMQ])
def test_broker_permission_acts_at_once_and_reaches_the_routes(broker_with_file, encoding):
    broker, namesrv, path = broker_with_file
    assert send(broker, "PermTopic", 0, {}).code == wc.SUCCESS
    until(lambda: route_perms(namesrv, "PermTopic") == {6})

    resp = update(broker, "brokerPermission=4\n", encoding)
    assert (resp.code, resp.remark) == (wc.SUCCESS, None), resp
    config, version = running_config(broker)
    assert (config["brokerPermission"], version) == ("4", 1)
    until(lambda: route_perms(namesrv, "PermTopic") == {4})  # registered now, not in 30 s
    refused = send(broker, "PermTopic", 0, {})
    forbidden = f"the broker[{broker.config.broker_ip1}] sending message is forbidden"
    assert (refused.code, refused.remark) == (NO_PERMISSION, forbidden)
    assert path.read_text() == CONF  # a live key is not written to the file

    assert update(broker, "brokerPermission=6", encoding).code == wc.SUCCESS
    until(lambda: route_perms(namesrv, "PermTopic") == {6})
    assert send(broker, "PermTopic", 0, {}).code == wc.SUCCESS


def test_a_key_read_at_start_goes_to_the_config_file(broker_with_file):
    broker, _, path = broker_with_file
    resp = update(broker, "flushConsumerOffsetInterval=7000\nslaveReadEnable=true\n")
    assert resp.code == wc.SUCCESS, resp
    assert resp.remark == (f"flushConsumerOffsetInterval written to {path}: they take effect "
                           "when the broker restarts")  # fmt: skip
    config, version = running_config(broker)
    # the live key acts, the other waits for the restart; one change counted
    assert (config["slaveReadEnable"], config["flushConsumerOffsetInterval"]) == ("true", "5000")
    assert version == 1
    assert path.read_text() == CONF.replace("5000", "7000")  # in place, the comment kept
    assert load_broker_config(path).flush_consumer_offset_interval == 7000


@pytest.mark.parametrize(
    ("text", "code", "remark"),
    [
        ("brokerPermision=4", wc.SYSTEM_ERROR, "unknown broker config key brokerPermision"),
        ("brokerPermission=x", wc.SYSTEM_ERROR, "brokerPermission = 'x' is not a valid int"),
        ("brokerPermission=99", wc.SYSTEM_ERROR,
         "brokerPermission = 99 is invalid: must be in 0..15"),
        ("storePathRootDir=/tmp/x\nbrokerPermission=4", NO_PERMISSION,
         "Can not update config in black list. (storePathRootDir)"),
        ("brokerConfigPath=/etc/passwd", NO_PERMISSION, "black list"),
    ],
)  # fmt: skip
def test_refused_updates_change_nothing(broker_with_file, text, code, remark):
    broker, _, path = broker_with_file
    resp = update(broker, text)
    assert resp.code == code and remark in resp.remark, resp
    config, version = running_config(broker)
    assert (config["brokerPermission"], version) == ("6", 0)
    assert path.read_text() == CONF


def test_without_a_config_file_a_restart_key_is_refused(make_broker):
    broker, _ = make_broker()
    resp = update(broker, "flushConsumerOffsetInterval=7000")
    assert resp.code == wc.SYSTEM_ERROR, resp
    assert resp.remark == ("flushConsumerOffsetInterval act only when the broker starts, and "
                           "it was started without a config file to keep them in")  # fmt: skip
    assert update(broker, "longPollingEnable=false").code == wc.SUCCESS
    assert running_config(broker)[0]["longPollingEnable"] == "false"
    assert update(broker, "").code == wc.SUCCESS  # nothing to change (RocketMQ: success)


def test_a_config_file_that_cannot_be_written_changes_nothing(make_broker, tmp_path):
    """The file gone (or a full disk): the update is refused naming the file, and neither
    the running config nor its version moved."""
    path = tmp_path / "gone.conf"
    broker, _ = make_broker(broker_config_path=str(path))
    resp = update(broker, "flushConsumerOffsetInterval=7000\nslaveReadEnable=true")
    assert resp.code == wc.SYSTEM_ERROR and resp.remark.startswith(f"cannot write {path}:"), resp
    config, version = running_config(broker)
    assert (config["slaveReadEnable"], version) == ("false", 0)


# -- editing the file in place ----------------------------------------------------------------

KEYS = ("brokerPermission", "flushConsumerOffsetInterval", "brokerName", "fileReservedTime")
values = st.text(string.ascii_letters + string.digits + " :=#!\\\t\u00e9", max_size=12)
lines = st.one_of(
    st.tuples(st.sampled_from((*KEYS, "other", "x.y")), st.sampled_from(["=", ":", " ", " = "]),
              values).map(lambda t: f"{t[0]}{t[1]}{t[2]}"),
    st.sampled_from(["", "# comment", "! bang", "   ", "cont=a\\", "  b"]),
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(lines, max_size=10), st.dictionaries(st.sampled_from(KEYS), values, min_size=1))
def test_properties_edit_reads_back_as_the_old_file_with_the_changes(file_lines, changes):
    """Whatever the file holds, the edited file reads as before with the changed keys set
    (a key given in snake_case is replaced too), and its comments stay."""
    text = "\n".join(file_lines)
    try:
        before = parse_properties(text)
    except ConfigError:
        assume(False)  # the broker could not have started from it
    edited = _edit_properties(text, changes)
    expected = {k: v.strip(" ") for k, v in changes.items()}  # escaped but spaces
    assert parse_properties(edited) == {**before, **expected}
    comments, continued = [], False  # a comment-like line that continues a value is not one
    for line in file_lines:
        if not continued and line.strip()[:1] in ("#", "!"):
            comments.append(line)
            continue
        body = line.lstrip(" \t\f")
        continued = (len(body) - len(body.rstrip("\\"))) % 2 == 1
    assert all(c in edited.splitlines() for c in comments)


def test_properties_edit_replaces_snake_case_and_continued_lines():
    text = "flush_consumer_offset_interval = 1\nbrokerName=a\\\n  b\nx=1\n"
    edited = _edit_properties(text, {"flushConsumerOffsetInterval": 2, "brokerName": "c",
                                     "slaveReadEnable": True})  # fmt: skip
    assert edited == "flushConsumerOffsetInterval=2\nbrokerName=c\nx=1\nslaveReadEnable=true\n"


def test_toml_edit_keeps_tables_and_adds_keys_at_the_top_level(tmp_path):
    text = ('brokerName = "a"\n\n[store]\nflush_disk_type = "ASYNC_FLUSH"\n\n'
            '[tuning]\nbrokerName = "not a key here"\n')  # fmt: skip
    edited = _edit_toml(text, {"brokerName": "b", "flushDiskType": "SYNC_FLUSH",
                               "brokerPermission": 4, "slaveReadEnable": True})  # fmt: skip
    data = tomllib.loads(edited)
    assert data["brokerName"] == "b" and data["brokerPermission"] == 4
    assert data["slaveReadEnable"] is True
    assert data["store"] == {"flush_disk_type": "SYNC_FLUSH"}
    assert data["tuning"] == {"brokerName": "not a key here"}
    path = os.path.join(tmp_path, "broker.toml")
    with open(path, "w") as f:
        f.write(edited)
    cfg = load_broker_config(path)
    assert (cfg.broker_name, cfg.store.flush_disk_type, cfg.broker_permission) == (
        "b", "SYNC_FLUSH", 4)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80) | st.builds(lambda k, v: f"{k}={v}", st.sampled_from(
    ["brokerPermission", "slaveReadEnable", "flushDiskType", "storePathRootDir", "tuning",
     "store", "brokerConfigPath", "ringSize"]), st.text(max_size=12)))  # fmt: skip
def test_any_update_body_is_taken_or_refused_with_a_config_error(text):
    """Whatever a client sends as UPDATE_BROKER_CONFIG's body: a change, or a ConfigError
    naming the problem (the handler answers it), never another exception."""
    from shmq.broker.config.broker_config import BrokerConfig
    from shmq.broker.config.updates import ConfigUpdate

    with contextlib.suppress(ConfigError):
        ConfigUpdate(BrokerConfig(), text)
