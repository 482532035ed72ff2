"""UPDATE_BROKER_CONFIG (mqadmin updateBrokerConfig) over the wire, written with the
independent wire client: live keys act at once (brokerPermission reaches the namesrv's
routes), the others are written into the broker's config file, refused keys change
nothing; and the in-place edit of properties and TOML files, fuzzed."""

from __future__ import annotations

import contextlib
import os
import string
import tempfile
import tomllib

import pytest
import wire_client as wc
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_remoting_send import send
from waiting import wait_for

from shmq.broker.config.broker_config import BrokerConfig, load_broker_config
from shmq.broker.config.rocketmq_keys import ignored_reason
from shmq.broker.config.updates import ConfigUpdate, _edit_properties, _edit_toml, persist
from shmq.config import snake_case
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
    wait_for(lambda: route_perms(namesrv, "PermTopic") == {6}, what="PermTopic routed")

    resp = update(broker, "brokerPermission=4\n", encoding)
    assert (resp.code, resp.remark) == (wc.SUCCESS, None), resp
    config, version = running_config(broker)
    assert (config["brokerPermission"], version) == ("4", 1)
    # registered at once: the wait ends well before the next periodic registration (30 s)
    wait_for(lambda: route_perms(namesrv, "PermTopic") == {4}, timeout=10,
             what="the namesrv to route PermTopic read-only")  # fmt: skip
    refused = send(broker, "PermTopic", 0, {})
    forbidden = f"the broker[{broker.config.broker_ip1}] sending message is forbidden"
    assert (refused.code, refused.remark) == (NO_PERMISSION, forbidden)
    assert path.read_text() == CONF  # a live key is not written to the file

    assert update(broker, "brokerPermission=6", encoding).code == wc.SUCCESS
    wait_for(lambda: route_perms(namesrv, "PermTopic") == {6}, timeout=10,
             what="the namesrv to route PermTopic writable again")  # fmt: skip
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
        ("brokerPermision=4", wc.SYSTEM_ERROR,
         "unknown broker config key 'brokerPermision' (did you mean 'brokerPermission'?)"),
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
    with contextlib.suppress(ConfigError):
        ConfigUpdate(BrokerConfig(), text)


# -- TOML files: only the changed keys' values change ------------------------------------------


def load_toml(text: str) -> BrokerConfig:
    """``text`` read as the broker reads the ``.toml`` file it was started from."""
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "broker.toml")
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        return load_broker_config(path)


# (the file, the changes, the file expected): the regex edit of issue 50 failed the first 13,
# and put the keys of the last three elsewhere
TOML_EDITS = [
    pytest.param('flushConsumerOffsetInterval = 5000  # ms: "=" and # are kept\n',
                 {"flushConsumerOffsetInterval": 7000},
                 'flushConsumerOffsetInterval = 7000  # ms: "=" and # are kept\n',
                 id="inline comment"),
    pytest.param('brokerName = "a=b#c"  # the group\nbrokerClusterName = \'x#y=z\'\n',
                 {"brokerName": "d=e#f"},
                 'brokerName = "d=e#f"  # the group\nbrokerClusterName = \'x#y=z\'\n',
                 id="= and # in strings"),
    pytest.param('# aligned\nbrokerName       = "a"\nbrokerPermission = 6\n'
                 '  slaveReadEnable = false\n', {"brokerName": "b", "slaveReadEnable": True},
                 '# aligned\nbrokerName       = "b"\nbrokerPermission = 6\n'
                 '  slaveReadEnable = true\n',
                 id="alignment and indent"),
    pytest.param('brokerName = "a"\n\n[store]  # the store\'s keys\n'
                 'flushDiskType = "ASYNC_FLUSH"\n',
                 {"flushDiskType": "SYNC_FLUSH"},
                 'brokerName = "a"\n\n[store]  # the store\'s keys\nflushDiskType = "SYNC_FLUSH"\n',
                 id="table header with a comment"),
    pytest.param('["store"]\nflush_disk_type = "ASYNC_FLUSH"\n', {"flushDiskType": "SYNC_FLUSH"},
                 '["store"]\nflush_disk_type = "SYNC_FLUSH"\n', id="quoted table name"),
    pytest.param('"brokerName" = "a"\n', {"brokerName": "b"}, '"brokerName" = "b"\n',
                 id="quoted key"),
    pytest.param('broker.brokerName = "a"\nstore.flushDiskType = "ASYNC_FLUSH"  # dotted\n\n'
                 '[tuning]\ngc_freeze = true\n',
                 {"brokerName": "b", "flushDiskType": "SYNC_FLUSH", "fileReservedTime": 48},
                 'broker.brokerName = "b"\nstore.flushDiskType = "SYNC_FLUSH"  # dotted\n'
                 'store.fileReservedTime = 48\n\n[tuning]\ngc_freeze = true\n',
                 id="dotted keys"),
    pytest.param('messageDelayLevel = """\\\n    1s 5s 10s \\\n    30s 1m"""  # levels 1-5\n'
                 'brokerName = "a"\n', {"messageDelayLevel": "1s 2s"},
                 'messageDelayLevel = "1s 2s"  # levels 1-5\nbrokerName = "a"\n',
                 id="multi-line string"),
    pytest.param('flushDiskType = "ASYNC_FLUSH"\n\n[tuning]\nbrokerName = """\n[store]\n'
                 'flushDiskType = "ASYNC_FLUSH"\n"""\n', {"flushDiskType": "SYNC_FLUSH"},
                 'flushDiskType = "SYNC_FLUSH"\n\n[tuning]\nbrokerName = """\n[store]\n'
                 'flushDiskType = "ASYNC_FLUSH"\n"""\n', id="look-alike lines in a string"),
    pytest.param('# pasted from a wiki:\u2028 a line separator\nbrokerName = "a"\n',
                 {"brokerName": "b"},
                 '# pasted from a wiki:\u2028 a line separator\nbrokerName = "b"\n',
                 id="U+2028 in a comment"),
    pytest.param('brokerName = "a"\r\n# written on Windows\r\nbrokerPermission = 6\r\n',
                 {"brokerPermission": 4},
                 'brokerName = "a"\r\n# written on Windows\r\nbrokerPermission = 4\r\n', id="CRLF"),
    pytest.param('brokerName = "a"\n', {"brokerName": 'q"\\\x7f'},
                 'brokerName = "q\\"\\\\\\u007f"\n', id="quote, backslash and DEL in a value"),
    pytest.param('store = { flushDiskType = "ASYNC_FLUSH", fileReservedTime = 72 }  # inline\n',
                 {"fileReservedTime": 48},
                 'store = { flushDiskType = "ASYNC_FLUSH", fileReservedTime = 48 }  # inline\n',
                 id="inline table"),
    pytest.param('haListenPort = 10912\nlistenPort = 10911\n', {"listenPort": 10921},
                 'haListenPort = 10912\nlistenPort = 10921\n', id="a key ending another's name"),
    pytest.param('brokerName = "a"\n\n[tuning.cpu_affinity]\nwriter = [\n    3,  # the last core\n'
                 ']\nreput = [\n    0,\n    1,\n]\n', {"brokerName": "b"},
                 'brokerName = "b"\n\n[tuning.cpu_affinity]\nwriter = [\n    3,  # the last core\n'
                 ']\nreput = [\n    0,\n    1,\n]\n', id="multi-line arrays"),
    pytest.param('flush_disk_type = "ASYNC_FLUSH"\n\n[store]\nflushDiskType = "ASYNC_FLUSH"\n',
                 {"flushDiskType": "SYNC_FLUSH"},
                 'flush_disk_type = "SYNC_FLUSH"\n\n[store]\nflushDiskType = "SYNC_FLUSH"\n',
                 id="every place the loader reads"),
    pytest.param('brokerName = "a"\n\n[store]\nflushDiskType = "ASYNC_FLUSH"\n\n'
                 '[tuning]\ngc_freeze = true\n', {"fileReservedTime": 48, "brokerPermission": 4},
                 'brokerName = "a"\nbrokerPermission = 4\n\n[store]\n'
                 'flushDiskType = "ASYNC_FLUSH"\nfileReservedTime = 48\n\n'
                 '[tuning]\ngc_freeze = true\n',
                 id="added to the top level and [store]"),
    pytest.param('brokerName = "a"\n\n[broker]\nbrokerPermission = 6\n',
                 {"slaveReadEnable": True, "fileReservedTime": 48},
                 'brokerName = "a"\n\n[broker]\nbrokerPermission = 6\nslaveReadEnable = true\n'
                 'fileReservedTime = 48\n', id="added to [broker]"),
    pytest.param('brokerName = "a"\n[store]\nflushDiskType = "ASYNC_FLUSH"\n',
                 {"brokerPermission": 4}, 'brokerName = "a"\nbrokerPermission = 4\n\n'
                 '[store]\nflushDiskType = "ASYNC_FLUSH"\n',
                 id="added before a table, a blank line between"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "changes", "expected"), TOML_EDITS)
def test_toml_edit_changes_only_the_values_of_the_keys(text, changes, expected):
    """Each key is set wherever the loader reads it (any spelling, quoted, dotted, inline),
    or added to the table its kind is kept in; every other line, comment and the layout stay
    as they were, and the broker restarts with the new values."""
    edited = _edit_toml(text, changes)
    assert edited == expected
    assert load_toml(edited) == load_toml(text).replace(**changes)


def test_persist_keeps_a_toml_file_as_written_or_refuses_one_that_no_longer_parses(tmp_path):
    """The file is read as written (CRLF stays CRLF) and replaced atomically, its old text
    kept as ``.bak``; a file edited into invalid TOML since the start is refused with a
    ConfigError (the handler answers it) and left as it is."""
    path = tmp_path / "broker.toml"
    before = b'brokerName = "a"\r\nbrokerPermission = 6\r\n'
    path.write_bytes(before)
    persist(str(path), {"brokerPermission": 4})
    assert path.read_bytes() == b'brokerName = "a"\r\nbrokerPermission = 4\r\n'
    assert (tmp_path / "broker.toml.bak").read_bytes() == before
    path.write_text("brokerName = \n")
    with pytest.raises(ConfigError, match=f"broker config {path} is not valid TOML"):
        persist(str(path), {"brokerPermission": 6})
    assert path.read_text() == "brokerName = \n" and not os.path.exists(f"{path}.tmp")


TOML_KEYS = {  # broker and store keys, with values the broker takes
    "brokerName": st.text(string.ascii_letters + "=#'\"\\\x7f-é", min_size=1, max_size=8),
    "brokerPermission": st.integers(0, 15),
    "slaveReadEnable": st.booleans(),
    "listenPort": st.integers(1, 65535),
    "haListenPort": st.integers(0, 65535),
    "flushDiskType": st.sampled_from(["ASYNC_FLUSH", "SYNC_FLUSH"]),
    "fileReservedTime": st.integers(1, 1000),
    "messageDelayLevel": st.sampled_from(["1s 5s 10s", "1s", "2m 1h 1d"]),
}
STORE_KEYS = ["flushDiskType", "fileReservedTime", "messageDelayLevel"]
TUNING = ('[tuning]\ngc_threshold = [\n    700,  # generation 0\n    10,\n    10,\n]\n'
          'brokerName = """\n[store]\nflushDiskType = "not a key here"\n"""\n')  # fmt: skip


@st.composite
def toml_files(draw) -> tuple[str, list[tuple[str, str]], list[str]]:
    """A broker config in TOML: keys at the top level and in ``broker`` and ``store`` (as
    tables, dotted keys or an inline table), spelt every way, values in every string form,
    comments anywhere, and a ``[tuning]`` table holding look-alikes. Returns the text, each
    key's entry (key, text) and the comments."""
    entries: list[tuple[str, str]] = []
    comments: list[str] = []

    def render(keys: list[str], prefix: str = "", inline: bool = False) -> list[str]:
        lines = []
        for key in keys:
            value = draw(TOML_KEYS[key])
            if isinstance(value, bool):
                forms = ["true" if value else "false"]
            elif isinstance(value, int):
                forms = [str(value)]
            else:
                escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\x7f", "\\u007f")
                forms = [f'"{escaped}"', *[f'"""\\\n    {escaped}"""'][:not inline],
                         *[f"'{value}'"][: "'" not in value and "\x7f" not in value]]  # fmt: skip
            spelling = draw(st.sampled_from([key, snake_case(key), f'"{key}"']))
            sep = " = " if inline else draw(st.sampled_from([" = ", "=", "    = "]))
            entry = f"{prefix}{spelling}{sep}{draw(st.sampled_from(forms))}"
            entries.append((key, entry))
            if not inline and draw(st.booleans()):
                comments.append(f"# {len(comments)} = [store] #")
                entry += f"  {comments[-1]}"
            if not inline and draw(st.booleans()):
                comments.append(f"# comment {len(comments)}")
                entry += f"\n{comments[-1]}"
            lines.append(entry if inline else draw(st.sampled_from(["", "  "])) + entry)
        return lines

    def keys(pool: list[str]) -> list[str]:
        return draw(st.lists(st.sampled_from(pool), unique=True, max_size=4))

    def header(name: str) -> str:
        comment = f"# the {name} table {len(comments)}"
        form = draw(st.sampled_from(
            [f"[{name}]", f"[ {name} ]", f'["{name}"]', f"[{name}]  {comment}"]))  # fmt: skip
        comments.extend([comment][: form.endswith(comment)])
        return draw(st.sampled_from(["", "\n"])) + form

    top = render(keys(list(TOML_KEYS)))
    tables = []
    broker_form, store_form = draw(st.sampled_from(["", "table", "dotted"])), draw(
        st.sampled_from(["", "table", "dotted", "inline"]))  # fmt: skip
    if broker_form == "dotted":
        top += render(keys(list(TOML_KEYS)), "broker.")
    elif broker_form == "table":
        tables.append("\n".join([header("broker"), *render(keys(list(TOML_KEYS)))]))
    if store_form == "dotted":
        top += render(keys(STORE_KEYS), "store.")
    elif store_form == "inline":
        top.append(f"store = {{ {', '.join(render(keys(STORE_KEYS), inline=True))} }}")
    elif store_form == "table":
        tables.append("\n".join([header("store"), *render(keys(STORE_KEYS))]))
    if draw(st.booleans()):
        tables.append(TUNING.rstrip("\n"))
    tables = draw(st.permutations(tables))
    return "\n".join(top + tables) + "\n", entries, comments


@settings(max_examples=300, deadline=None)
@given(toml_files(), st.sampled_from(list(TOML_KEYS)).flatmap(
    lambda key: st.tuples(st.just(key), TOML_KEYS[key])))  # fmt: skip
def test_toml_edit_reads_back_as_the_old_file_with_the_change(file, change):
    """Changing a key and reading the file back gives the new value for it and the value it
    had for every other key; the key is set in every place the loader reads it, and every
    other key's entry, every comment and the tuning table stay as they were written."""
    text, entries, comments = file
    key, value = change
    edited = _edit_toml(text, {key: value})
    assert load_toml(edited) == load_toml(text).replace(**{key: value})
    data = tomllib.loads(edited)
    places = [data, *(data.get(table, {}) for table in ("broker", "store"))]
    found = [v for place in places for k, v in place.items() if snake_case(k) == snake_case(key)]
    assert found and all(v == value for v in found)
    assert all(entry in edited for k, entry in entries if k != key)
    assert all(comment in edited for comment in comments)
    assert TUNING not in text or TUNING.rstrip("\n") in edited


# -- keys that are not taken ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("sendMessageThreadPoolNums=64", "sendMessageThreadPoolNums is a RocketMQ key that "
         f"shmq ignores: {ignored_reason('sendMessageThreadPoolNums')}"),
        ("reject_transaction_message=true",
         "reject_transaction_message is a RocketMQ key that shmq ignores: "
         f"{ignored_reason('rejectTransactionMessage')}"),
        ("slaveReadEnabled=true",
         "unknown broker config key 'slaveReadEnabled' (did you mean 'slaveReadEnable'?)"),
        ("x=1", "unknown broker config key 'x'"),
        ("brokerNmae=b\nrejectTransactionMessage=true\nbrokerPermission=4",
         "unknown broker config key 'brokerNmae' (did you mean 'brokerName'?); "
         "rejectTransactionMessage is a RocketMQ key that shmq ignores: "
         f"{ignored_reason('rejectTransactionMessage')}"),
    ],
)  # fmt: skip
def test_a_key_not_taken_is_refused_saying_why(text, message):
    """RocketMQ's keys that shmq ignores are refused with the reason the config loader logs
    for them, any other name with the nearest key, as the loader suggests it."""
    with pytest.raises(ConfigError) as refused:
        ConfigUpdate(BrokerConfig(), text)
    assert str(refused.value) == message


def test_a_misspelt_key_gets_the_suggestion_the_loader_gives(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("flushConsumerOfsetInterval=7000\n")
    with pytest.raises(ConfigError) as at_start:
        load_broker_config(conf)
    with pytest.raises(ConfigError) as at_update:
        ConfigUpdate(BrokerConfig(), conf.read_text())
    assert str(at_start.value).endswith(str(at_update.value)) and "did you mean" in str(
        at_update.value)  # fmt: skip


def test_a_properties_file_keeps_its_lines_encoding_and_line_ends(tmp_path):
    """Java properties end lines at CR, LF or CRLF only: a comment holding U+2028 or a form
    feed stays one comment (split by ``str.splitlines`` it became a key the broker then
    refused); a latin-1 file (what the loader falls back to) is updated, not refused."""
    path = tmp_path / "broker.conf"
    path.write_bytes("# a\u2028b\fc\r\nbrokerName=b\r\nlistenPort=1\r\n".encode())
    persist(str(path), {"listenPort": 2})
    assert path.read_bytes() == "# a\u2028b\fc\r\nbrokerName=b\r\nlistenPort=2\r\n".encode()
    latin = tmp_path / "latin.conf"
    latin.write_bytes("# caf\xe9\nbrokerName=b\n".encode("latin-1"))
    persist(str(latin), {"brokerName": "c"})
    assert load_broker_config(str(latin)).broker_name == "c"
