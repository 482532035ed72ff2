"""broker.conf (Java properties) and TOML parsing, validation, and writing a conf back."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shmq.broker.config.broker_config import (
    BrokerConfig,
    camel_case,
    load_broker_config,
    to_properties,
)
from shmq.config import MessageStoreConfig, snake_case
from shmq.errors import ConfigError
from shmq.java_properties import parse_properties


def write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_defaults_are_rocketmq_s():
    cfg = BrokerConfig()
    assert (cfg.broker_cluster_name, cfg.broker_name, cfg.broker_id) == (
        "DefaultCluster",
        "broker-a",
        0,
    )
    assert (cfg.listen_port, cfg.broker_ip1, cfg.broker_role) == (
        10911,
        "127.0.0.1",
        "ASYNC_MASTER",
    )
    assert cfg.broker_permission == 6 and cfg.default_topic_queue_nums == 8
    assert cfg.auto_create_topic_enable and cfg.cluster_topic_enable and cfg.broker_topic_enable
    assert cfg.register_name_server_period == 30_000
    assert cfg.flush_consumer_offset_interval == 5_000
    assert cfg.long_polling_enable and cfg.short_polling_time_mills == 1_000
    assert cfg.server_channel_max_idle_time_seconds == 120
    assert cfg.ring_size == 8 << 20 and cfg.ring_slots == 65536
    assert cfg.ring_message_limit >= cfg.store.max_message_size  # the documented maximum fits
    assert cfg.namesrv_addrs == [] and cfg.store == MessageStoreConfig() and cfg.tuning == {}


def test_properties_syntax():
    text = (
        "# comment = ignored\n"
        "  ! indented comment\n"
        "brokerName = b1   \n"
        "listenPort:10920\n"
        "brokerClusterName   C1\n"
        "namesrvAddr=127.0.0.1:9876;\\\n"
        "     127.0.0.1:9877\n"
        "# a comment ending in a backslash does not continue \\\n"
        "storePathRootDir=/data/a\\\\\n"  # an even run of backslashes: no continuation
        "deleteWhen=04\r\n"
        "flushDiskType=ASYNC_FLUSH\r"
        "brokerName=b2\n"
        "emptyValue=\n"
        "tab\\tkey\\=x = caf\\u00e9\\n\n"
        "\n"
        "last = end\\"
    )
    assert parse_properties(text) == {
        "brokerName": "b2",
        "listenPort": "10920",
        "brokerClusterName": "C1",
        "namesrvAddr": "127.0.0.1:9876;127.0.0.1:9877",
        "storePathRootDir": "/data/a\\",
        "deleteWhen": "04",
        "flushDiskType": "ASYNC_FLUSH",
        "emptyValue": "",
        "tab\tkey=x": "café\n",
        "last": "end",
    }


def test_properties_bad_unicode_escape():
    with pytest.raises(ConfigError, match="uXXXX"):
        parse_properties("brokerName=a\\u12\n")


def test_conf_routes_store_keys_and_derives_store_host(tmp_path):
    cfg = load_broker_config(
        write(
            tmp_path,
            "broker.conf",
            "brokerName=b1\nlistenPort=10920\nbrokerIP1=10.0.0.5\nflushDiskType=SYNC_FLUSH\n"
            "mappedFileSizeCommitLog=1048576\nautoCreateTopicEnable=FALSE\n"
            "storePathRootDir=/tmp/x\ncheckCRCOnRecover=false\n"
            "namesrvAddr=1.2.3.4:9876; 1.2.3.5:1\n",
        )
    )
    assert cfg.broker_name == "b1" and cfg.listen_port == 10920 and cfg.broker_ip1 == "10.0.0.5"
    assert cfg.auto_create_topic_enable is False
    assert cfg.store.flush_disk_type == "SYNC_FLUSH" and cfg.store.sync_flush
    assert cfg.store.mapped_file_size_commit_log == 1 << 20
    assert cfg.store.store_path_root_dir == "/tmp/x"
    assert cfg.store.check_crc_on_recover is False
    assert cfg.store.store_host == "10.0.0.5:10920"
    assert cfg.namesrv_addrs == ["1.2.3.4:9876", "1.2.3.5:1"]


def test_explicit_store_host_is_kept(tmp_path):
    cfg = load_broker_config(write(tmp_path, "b.conf", "listenPort=1\nstoreHost=10.1.1.1:7\n"))
    assert cfg.store.store_host == "10.1.1.1:7"
    assert cfg.replace(listen_port=2).store.store_host == "10.1.1.1:7"


def test_replace_takes_both_spellings_and_store_keys():
    cfg = BrokerConfig().replace(listenPort="10930", broker_name="x", fileReservedTime=1)
    assert cfg.listen_port == 10930 and cfg.broker_name == "x"
    assert cfg.store.file_reserved_time == 1
    assert cfg.store.store_host == "127.0.0.1:10930"  # follows the port
    assert cfg.replace(brokerIP1="10.0.0.1").store.store_host == "10.0.0.1:10930"
    assert BrokerConfig.from_mapping({"listen_port": 5}) == BrokerConfig().replace(listenPort=5)


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ("fooBar=1", "unknown broker config key 'fooBar'"),
        ("brokerRole=MASTER", "brokerRole = 'MASTER' is invalid: must be one of ASYNC_MASTER"),
        ("listenPort=abc", "listenPort = 'abc' is not a valid int"),
        ("listenPort=1.5", "listenPort = '1.5' is not a valid int"),
        ("listenPort=70000", r"listenPort = 70000 is invalid: must be in 0\.\.65535"),
        ("autoCreateTopicEnable=yes", "autoCreateTopicEnable = 'yes' is not a valid bool"),
        ("defaultTopicQueueNums=0", r"defaultTopicQueueNums = 0 .* in 1\.\.1024"),
        ("brokerPermission=16", r"brokerPermission = 16 .* in 0\.\.15"),
        ("ringSize=100000", "ringSize = 100000 .* power of two >= 65536"),
        ("ringSlots=8", "ringSlots = 8 .* power of two >= 16"),
        ("registerNameServerPeriod=0", "registerNameServerPeriod = 0 .* >= 1"),
        ("brokerRole=SLAVE", "brokerId = 0 .* > 0 for a SLAVE"),
        ("brokerId=1", "brokerId = 1 .* 0 for a master"),
        ("brokerName=", "brokerName = '' .* non-empty"),
        ("namesrvAddr=localhost:9876", "not an IPv4"),
        ("brokerIP1=1.2.3", "not an IPv4"),
        ("flushDiskType=NOPE", "flushDiskType 'NOPE' is not one of"),
        ("mappedFileSizeCommitLog=x", "mapped_file_size_commit_log = 'x' is not a valid int"),
    ],
)
def test_bad_values_name_key_value_and_limit(tmp_path, line, match):
    path = write(tmp_path, "broker.conf", line + "\n")
    with pytest.raises(ConfigError, match=match) as info:
        load_broker_config(path)
    assert path in str(info.value)


def test_short_register_period_is_not_clamped():
    assert BrokerConfig().replace(registerNameServerPeriod=200).register_name_server_period == 200


def test_slave_with_id():
    cfg = BrokerConfig().replace(brokerRole="SLAVE", brokerId=1)
    assert cfg.broker_role == "SLAVE" and cfg.broker_id == 1


def test_missing_file_names_the_path(tmp_path):
    missing = tmp_path / "nope.conf"
    with pytest.raises(ConfigError, match=f"cannot read broker config {missing}"):
        load_broker_config(missing)


def test_toml_layouts(tmp_path):
    flat = write(
        tmp_path,
        "a.toml",
        'brokerName = "t"\nlisten_port = 10940\nflushDiskType = "SYNC_FLUSH"\n'
        "autoCreateTopicEnable = false\n",
    )
    tables = write(
        tmp_path,
        "b.toml",
        '[broker]\nbrokerName = "t"\nlisten_port = 10940\nautoCreateTopicEnable = false\n'
        '[store]\nflushDiskType = "SYNC_FLUSH"\n'
        '[tuning]\nwriter = { batch = 32 }\nmode = "fast"\n',
    )
    a, b = load_broker_config(flat), load_broker_config(tables)
    assert a.broker_name == "t" and a.listen_port == 10940 and not a.auto_create_topic_enable
    assert a.store.flush_disk_type == "SYNC_FLUSH" and a.store.store_host == "127.0.0.1:10940"
    assert a.tuning == {}
    assert b.tuning == {"writer": {"batch": 32}, "mode": "fast"}
    assert dataclasses.replace(b, tuning={}) == a


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('[store]\nbrokerName = "x"\n', r"\[store\] has unknown store key 'brokerName'"),
        ("listenPort = true\n", "listenPort = True is not a valid int"),
        ('brokerName = "a\n', "is not valid TOML"),
        ("[other]\nx = 1\n", "unknown broker config key 'other'"),
    ],
)
def test_toml_errors(tmp_path, text, match):
    with pytest.raises(ConfigError, match=match):
        load_broker_config(write(tmp_path, "c.toml", text))


def test_to_properties_writes_only_changes(tmp_path):
    assert to_properties(BrokerConfig()).splitlines()[1:] == []
    cfg = BrokerConfig().replace(
        brokerName="b9",
        listenPort=10950,
        brokerIP1="10.0.0.9",
        autoCreateTopicEnable=False,
        checkCRCOnRecover=False,
        warmMapedFileEnable=True,
        storePathRootDir="/srv/shmq store/\\x/é/😀",
    )
    text = to_properties(cfg)
    lines = text.splitlines()
    assert lines[0].startswith("#")
    assert "brokerIP1=10.0.0.9" in lines and "autoCreateTopicEnable=false" in lines
    assert "checkCRCOnRecover=false" in lines and "warmMapedFileEnable=true" in lines
    assert "storePathRootDir=/srv/shmq store/\\\\x/\\u00e9/\\ud83d\\ude00" in lines
    assert not any(line.startswith("storeHost") for line in lines)  # it is derived
    assert text.isascii()
    assert load_broker_config(write(tmp_path, "again.conf", text)) == cfg


def test_to_properties_keeps_an_explicit_store_host(tmp_path):
    cfg = BrokerConfig().replace(storeHost="10.2.2.2:1")
    assert "storeHost=10.2.2.2:1" in to_properties(cfg).splitlines()
    assert load_broker_config(write(tmp_path, "x.conf", to_properties(cfg))) == cfg


path_text = st.text(min_size=1, max_size=30).filter(lambda s: s == s.strip())


@settings(max_examples=60, deadline=None)
@given(root=path_text, name=st.from_regex(r"[A-Za-z0-9_-]{1,20}", fullmatch=True))
def test_to_properties_round_trips(tmp_path_factory, root, name):
    cfg = BrokerConfig().replace(storePathRootDir=root, brokerName=name, idleSpinUs=3)
    path = tmp_path_factory.mktemp("conf") / "broker.conf"
    path.write_text(to_properties(cfg), encoding="utf-8")
    assert load_broker_config(path) == cfg


def test_camel_case_inverts_snake_case_for_every_field():
    names = [f.name for cls in (BrokerConfig, MessageStoreConfig) for f in dataclasses.fields(cls)]
    for name in names:
        if name in ("store", "tuning"):
            continue
        camel = camel_case(name)
        assert "_" not in camel and camel[0].islower()
        assert snake_case(camel) == name, camel
        assert snake_case(name) == name
    assert camel_case("check_crc_on_recover") == "checkCRCOnRecover"
    assert camel_case("broker_ip1") == "brokerIP1"
    assert camel_case("mapped_file_size_commit_log") == "mappedFileSizeCommitLog"
    assert camel_case("short_polling_time_mills") == "shortPollingTimeMills"
