"""TopicConfig validation and JSON, the topic manager, and topics.json persistence."""

from __future__ import annotations

import os
import threading

import pytest

from shmq import json_file
from shmq.broker.topic.config import (
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    TopicConfig,
    TopicConfigManager,
)
from shmq.errors import ConfigError, InvalidTopicError

TOPICS_JSON = (
    "{\n"
    '\t"dataVersion":{\n'
    '\t\t"counter":2,\n'
    '\t\t"timestamp":1700000000000\n'
    "\t},\n"
    '\t"topicConfigTable":{\n'
    '\t\t"Orders":{\n'
    '\t\t\t"order":false,\n'
    '\t\t\t"perm":6,\n'
    '\t\t\t"readQueueNums":4,\n'
    '\t\t\t"topicFilterType":"SINGLE_TAG",\n'
    '\t\t\t"topicName":"Orders",\n'
    '\t\t\t"topicSysFlag":0,\n'
    '\t\t\t"writeQueueNums":4\n'
    "\t\t}\n"
    "\t}\n"
    "}"
)

# As RocketMQ 5.x writes it (compact here, with fields this version does not know).
ROCKETMQ_TOPICS = (
    '{"dataVersion":{"counter":7,"stateVersion":0,"timestamp":1699999999999},'
    '"topicConfigTable":{"TopicTest":{"attributes":{},"order":true,"perm":7,'
    '"readQueueNums":8,"topicFilterType":"MULTI_TAG","topicName":"TopicTest",'
    '"topicSysFlag":1,"writeQueueNums":4}}}'
)


def manager(path, **kw) -> TopicConfigManager:
    kw.setdefault("cluster_name", "C")
    kw.setdefault("broker_name", "B")
    return TopicConfigManager(str(path), **kw)


def test_topic_config_defaults_and_perms():
    cfg = TopicConfig("T")
    assert (cfg.read_queue_nums, cfg.write_queue_nums, cfg.perm) == (16, 16, 6)
    assert cfg.topic_filter_type == "SINGLE_TAG" and cfg.topic_sys_flag == 0 and not cfg.order
    assert cfg.is_readable and cfg.is_writable
    assert not TopicConfig("T", perm=PERM_READ).is_writable
    assert not TopicConfig("T", perm=PERM_WRITE | PERM_INHERIT).is_readable


def test_topics_json_is_byte_exact():
    wrapper = {
        "topicConfigTable": {"Orders": TopicConfig("Orders", 4, 4).to_json()},
        "dataVersion": {"timestamp": 1700000000000, "counter": 2},
    }
    assert json_file.dumps_fastjson(wrapper) == TOPICS_JSON
    assert json_file.loads_fastjson(TOPICS_JSON) == wrapper


def test_from_json_reads_rocketmq_s_file():
    data = json_file.loads_fastjson(ROCKETMQ_TOPICS)
    cfg = TopicConfig.from_json(data["topicConfigTable"]["TopicTest"])
    assert cfg == TopicConfig("TopicTest", 8, 4, 7, "MULTI_TAG", 1, True)
    assert TopicConfig.from_json(cfg.to_json()) == cfg
    assert TopicConfig.from_json({"topicName": "X"}) == TopicConfig("X")


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"readQueueNums": 1}, "has no topicName"),
        ({"topicName": "T", "perm": "6"}, "perm = '6' is not an integer"),
        ({"topicName": "T", "readQueueNums": True}, "readQueueNums = True is not an integer"),
        ({"topicName": "T", "order": 0}, "order = 0 is not a boolean"),
        ([1], "not a JSON object"),
    ],
)
def test_from_json_rejects_bad_shapes(data, match):
    with pytest.raises(ConfigError, match=match):
        TopicConfig.from_json(data)


def test_topic_config_validation():
    for n in (0, 1025):
        with pytest.raises(ConfigError, match=r"readQueueNums .* not in 1\.\.1024"):
            TopicConfig("T", read_queue_nums=n)
        with pytest.raises(ConfigError, match=r"writeQueueNums .* not in 1\.\.1024"):
            TopicConfig("T", write_queue_nums=n)
    assert TopicConfig("T", 1024, 1).read_queue_nums == 1024
    with pytest.raises(ConfigError, match=r"perm 16 .* 0\.\.15"):
        TopicConfig("T", perm=16)
    with pytest.raises(ConfigError, match="topicFilterType 'X'"):
        TopicConfig("T", topic_filter_type="X")
    with pytest.raises(InvalidTopicError):
        TopicConfig("bad topic")
    with pytest.raises(InvalidTopicError):
        TopicConfig("x" * 128)


def test_system_topics(tmp_path):
    m = manager(tmp_path, default_queue_nums=4)
    topics = m.all()
    assert set(topics) == {"SELF_TEST_TOPIC", "TBW102", "C", "B", "OFFSET_MOVED_EVENT",
                           "C_REPLY_TOPIC"}  # fmt: skip
    assert topics["TBW102"] == TopicConfig("TBW102", 4, 4, 7)
    for name in ("SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", "C_REPLY_TOPIC"):
        assert topics[name] == TopicConfig(name, 1, 1, 6)
    assert topics["C"] == TopicConfig("C", 1, 1, 7) and topics["B"] == TopicConfig("B", 1, 1, 7)
    assert m.dirty and m.data_version["counter"] == 0

    off = manager(
        tmp_path / "off", auto_create=False, cluster_topic_enable=False, broker_topic_enable=False
    )
    assert off.get("TBW102") is None
    assert off.get("C").perm == PERM_INHERIT and off.get("B").perm == PERM_INHERIT


def test_auto_create(tmp_path):
    m = manager(tmp_path, default_queue_nums=3)
    before = m.data_version["counter"]
    cfg = m.create_auto("New")
    assert cfg == TopicConfig("New", 3, 3, PERM_READ | PERM_WRITE)
    assert m.get("New") == cfg and m.data_version["counter"] == before + 1
    assert m.create_auto("New") is cfg and m.data_version["counter"] == before + 1
    assert m.create_auto("Asked2", 2).write_queue_nums == 2  # the producer's count
    assert m.create_auto("Asked99", 99).write_queue_nums == m.create_auto("New").write_queue_nums
    with pytest.raises(InvalidTopicError):
        m.create_auto("no spaces")

    off = manager(tmp_path / "off", auto_create=False)
    with pytest.raises(ConfigError, match="topic X does not exist and autoCreateTopicEnable"):
        off.create_auto("X")
    off.update(TopicConfig("X", 2, 2))
    assert off.create_auto("X") == TopicConfig("X", 2, 2)


def test_update_delete_and_versions(tmp_path):
    m = manager(tmp_path)
    v0 = m.data_version
    m.update(TopicConfig("Orders", 2, 2))
    v1 = m.data_version
    assert v1["counter"] == v0["counter"] + 1 and v1["timestamp"] >= v0["timestamp"]
    m.update(TopicConfig("Orders", 4, 4, PERM_READ))
    assert m.get("Orders") == TopicConfig("Orders", 4, 4, PERM_READ)
    assert m.data_version["counter"] == v0["counter"] + 2
    assert m.delete("Orders") is True and m.get("Orders") is None
    assert m.delete("Orders") is False
    assert m.data_version["counter"] == v0["counter"] + 3
    wrapper = m.to_wrapper_json()
    assert wrapper["dataVersion"] == m.data_version
    assert wrapper["topicConfigTable"]["TBW102"] == m.get("TBW102").to_json()


def test_persist_and_reload(tmp_path):
    m = manager(tmp_path)
    m.update(TopicConfig("Orders", 2, 2, order=True))
    assert m.dirty
    m.persist_if_dirty()
    assert not m.dirty
    path = tmp_path / "topics.json"
    assert path.read_text() == json_file.dumps_fastjson(m.to_wrapper_json())
    assert '\t\t\t"readQueueNums":2,' in path.read_text()
    again = manager(tmp_path)
    assert again.all() == m.all() and again.data_version == m.data_version
    assert not again.dirty  # nothing to add: the system topics were saved
    assert not os.path.exists(str(path) + ".tmp")


def test_loads_rocketmq_s_topics_json(tmp_path):
    (tmp_path / "topics.json").write_text(ROCKETMQ_TOPICS)
    m = manager(tmp_path)
    assert m.get("TopicTest") == TopicConfig("TopicTest", 8, 4, 7, "MULTI_TAG", 1, True)
    assert m.data_version == {"counter": 7, "timestamp": 1699999999999}
    assert m.get("TBW102") is not None


@pytest.mark.parametrize("broken", ["", '{"topicConfigTable":{"A":{"topi', "garbage", "[]"])
def test_falls_back_to_bak(tmp_path, broken, caplog):
    m = manager(tmp_path)
    m.update(TopicConfig("First", 2, 2))
    m.persist()
    m.update(TopicConfig("Second", 2, 2))
    m.persist()  # topics.json.bak now holds First only
    (tmp_path / "topics.json").write_text(broken)
    again = manager(tmp_path)
    assert again.get("First") == TopicConfig("First", 2, 2) and again.get("Second") is None
    assert "loaded" in caplog.text and "topics.json.bak" in caplog.text


def test_mismatched_table_key_falls_back(tmp_path):
    (tmp_path / "topics.json").write_text('{"topicConfigTable":{"A":{"topicName":"B"}}}')
    with pytest.raises(ConfigError, match="key 'A' holds topic 'B'"):
        manager(tmp_path)  # no .bak to fall back to: refuse rather than start empty


def test_concurrent_updates(tmp_path):
    m = manager(tmp_path)
    start = m.data_version["counter"]

    def work(i: int) -> None:
        for j in range(50):
            m.update(TopicConfig(f"T{i}-{j}", 1, 1))
            if j % 10 == 0:
                m.persist()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert m.data_version["counter"] == start + 200
    m.persist()
    assert manager(tmp_path).all() == m.all()
    assert sorted(os.listdir(tmp_path)) == ["topics.json", "topics.json.bak"]
