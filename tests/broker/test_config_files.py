"""broker.conf / TOML parsing, fastjson persistence, topic and consumer-offset managers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shmq import json_file
from shmq.broker.config.broker_config import (
    BrokerConfig,
    camel_case,
    load_broker_config,
    to_properties,
)
from shmq.broker.offset.consumer_offsets import ConsumerOffsetManager
from shmq.broker.topic.config import TopicConfig, TopicConfigManager
from shmq.config import MessageStoreConfig, snake_case
from shmq.errors import ConfigError, InvalidTopicError
from shmq.java_properties import parse_properties


def test_properties_syntax():
    text = (
        "# comment\n! also\nbrokerName = b1\nlistenPort:10920\n"
        "namesrvAddr 127.0.0.1:1;\\\n  127.0.0.1:2\n\nbrokerName=b2\n"
    )
    assert parse_properties(text) == {
        "brokerName": "b2",
        "listenPort": "10920",
        "namesrvAddr": "127.0.0.1:1;127.0.0.1:2",
    }


def test_broker_conf_routes_store_keys(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "brokerName=b1\nlistenPort=10920\nflushDiskType=SYNC_FLUSH\n"
        "mappedFileSizeCommitLog=1048576\nautoCreateTopicEnable=false\n"
    )
    cfg = load_broker_config(conf)
    assert cfg.broker_name == "b1" and cfg.listen_port == 10920
    assert not cfg.auto_create_topic_enable
    assert cfg.store.flush_disk_type == "SYNC_FLUSH"
    assert cfg.store.mapped_file_size_commit_log == 1 << 20
    assert cfg.store.store_host == "127.0.0.1:10920"
    assert load_broker_config_text(tmp_path, to_properties(cfg)) == cfg


def load_broker_config_text(tmp_path, text: str) -> BrokerConfig:
    path = tmp_path / "again.conf"
    path.write_text(text)
    return load_broker_config(path)


def test_toml_layouts(tmp_path):
    flat = tmp_path / "a.toml"
    flat.write_text('brokerName = "t"\nflushDiskType = "SYNC_FLUSH"\n')
    tables = tmp_path / "b.toml"
    tables.write_text(
        '[broker]\nbroker_name = "t"\n[store]\nflush_disk_type = "SYNC_FLUSH"\n[tuning]\nx = 1\n'
    )
    a, b = load_broker_config(flat), load_broker_config(tables)
    assert a.broker_name == b.broker_name == "t"
    assert a.store.flush_disk_type == b.store.flush_disk_type == "SYNC_FLUSH"
    assert b.tuning == {"x": 1}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("fooBar=1", "unknown broker config key 'fooBar'"),
        ("brokerRole=BOSS", "brokerRole"),
        ("listenPort=abc", "not a valid int"),
        ("ringSize=1000", "power of two"),
        ("namesrvAddr=localhost", "IPv4"),
    ],
)
def test_bad_config(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        load_broker_config_text(tmp_path, text)


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read broker config"):
        load_broker_config(tmp_path / "nope.conf")


def test_every_field_name_round_trips():
    import dataclasses

    for cls in (BrokerConfig, MessageStoreConfig):
        for f in dataclasses.fields(cls):
            assert snake_case(camel_case(f.name)) == f.name
    assert camel_case("check_crc_on_recover") == "checkCRCOnRecover"


def test_fastjson_shape_is_rocketmq_s():
    text = json_file.dumps_fastjson({"offsetTable": {"T@G": {1: 7, 0: 12}}})
    assert text == '{\n\t"offsetTable":{\n\t\t"T@G":{\n\t\t\t0:12,\n\t\t\t1:7\n\t\t}\n\t}\n}'
    assert json_file.loads_fastjson('{"offsetTable":{"T@G":{0:12,1:7}}}') == {
        "offsetTable": {"T@G": {0: 12, 1: 7}}
    }


# Keys never start with NUL: that is the parser's marker for bare integer keys.
keys = st.text(max_size=6).filter(lambda k: not k.startswith("\x00")) | st.integers(0, 999)
json_values = st.recursive(
    st.integers(-(2**40), 2**40) | st.booleans() | st.text(max_size=8),
    lambda inner: (
        st.dictionaries(st.text(max_size=6) | st.integers(0, 999), inner, max_size=4)
        | st.lists(inner, max_size=3)
    ),
    max_leaves=12,
)


@given(st.dictionaries(keys, json_values, max_size=5))
def test_fastjson_round_trip(obj):
    assert json_file.loads_fastjson(json_file.dumps_fastjson(obj)) == obj


def test_persist_falls_back_to_bak(tmp_path):
    path = str(tmp_path / "config" / "x.json")
    json_file.persist(path, json_file.dumps_fastjson({"a": 1}))
    json_file.persist(path, json_file.dumps_fastjson({"a": 2}))
    assert json_file.load(path) == {"a": 2}
    with open(path, "w") as f:
        f.write("{garbage")
    assert json_file.load(path) == {"a": 1}  # the .bak holds the previous content
    assert not (tmp_path / "config" / "x.json.tmp").exists()


def test_topic_manager(tmp_path):
    m = TopicConfigManager(str(tmp_path), default_queue_nums=4, cluster_name="C", broker_name="B")
    assert {"TBW102", "SELF_TEST_TOPIC", "C", "B"} <= set(m.all())
    version = m.data_version["counter"]
    m.update(TopicConfig("Orders", 2, 2))
    assert m.data_version["counter"] == version + 1
    assert m.create_auto("New").write_queue_nums == 4
    m.persist()
    again = TopicConfigManager(str(tmp_path), cluster_name="C", broker_name="B")
    assert again.get("Orders") == TopicConfig("Orders", 2, 2)
    assert again.delete("Orders") and not again.delete("Orders")
    off = TopicConfigManager(str(tmp_path / "x"), auto_create=False)
    assert off.get("TBW102") is None
    with pytest.raises(ConfigError, match="autoCreateTopicEnable"):
        off.create_auto("New")
    with pytest.raises(ConfigError, match=r"1\.\.1024"):
        TopicConfig("T", 0, 1)
    with pytest.raises(InvalidTopicError):
        TopicConfig("bad topic", 1, 1)


def test_consumer_offsets(tmp_path):
    m = ConsumerOffsetManager(str(tmp_path))
    assert m.query("g", "T", 0) == -1
    m.commit("g", "T", 0, 12)
    m.commit("g", "T", 1, 7)
    m.persist()
    text = (tmp_path / "consumerOffset.json").read_text()
    assert '"T@g":{' in text and "\t\t\t0:12," in text
    again = ConsumerOffsetManager(str(tmp_path))
    assert again.offsets("g", "T") == {0: 12, 1: 7}
    assert again.groups_of_topic("T") == ["g"] and again.topics_of_group("g") == ["T"]
    with pytest.raises(ConfigError, match="must not contain"):
        again.commit("a@b", "T", 0, 1)
