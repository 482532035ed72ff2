"""Subscription group configs, their manager and subscriptionGroup.json persistence."""

from __future__ import annotations

import os

import pytest

from shmq import json_file
from shmq.broker.subscription.groups import (
    SYSTEM_GROUPS,
    SubscriptionGroupConfig,
    SubscriptionGroupManager,
    validate_group,
)
from shmq.errors import ConfigError

GROUP_JSON = (
    "{\n"
    '\t"brokerId":0,\n'
    '\t"consumeBroadcastEnable":true,\n'
    '\t"consumeEnable":true,\n'
    '\t"consumeFromMinEnable":true,\n'
    '\t"consumeMessageOrderly":false,\n'
    '\t"groupName":"G",\n'
    '\t"notifyConsumerIdsChangedEnable":true,\n'
    '\t"retryMaxTimes":16,\n'
    '\t"retryQueueNums":1,\n'
    '\t"whichBrokerWhenConsumeSlowly":1\n'
    "}"
)

# As RocketMQ 5.x writes it: fields this version does not know, and a forbiddenTable.
ROCKETMQ_5_FILE = (
    '{"dataVersion":{"counter":3,"stateVersion":0,"timestamp":1700000000000},'
    '"forbiddenTable":{},"subscriptionGroupTable":{"Readers":{"attributes":{},'
    '"brokerId":0,"consumeBroadcastEnable":false,"consumeEnable":false,'
    '"consumeFromMinEnable":true,"consumeMessageOrderly":false,"consumeTimeoutMinute":15,'
    '"groupName":"Readers","groupRetryPolicy":{"type":"CUSTOMIZED"},"groupSysFlag":0,'
    '"notifyConsumerIdsChangedEnable":true,"retryMaxTimes":3,"retryQueueNums":1,'
    '"whichBrokerWhenConsumeSlowly":1}}}'
)


def test_defaults_are_rocketmqs_and_the_json_is_fastjsons():
    cfg = SubscriptionGroupConfig("G")
    assert json_file.dumps_fastjson(cfg.to_json()) == GROUP_JSON
    assert SubscriptionGroupConfig.from_json(cfg.to_json()) == cfg
    assert SubscriptionGroupConfig.from_json({"groupName": "G"}) == cfg


def test_from_json_ignores_unknown_fields_and_checks_values():
    cfg = SubscriptionGroupConfig.from_json(
        {"groupName": "G", "retryMaxTimes": 3, "consumeEnable": False, "groupSysFlag": 0}
    )
    assert (cfg.retry_max_times, cfg.consume_enable) == (3, False)
    with pytest.raises(ConfigError, match="has no groupName"):
        SubscriptionGroupConfig.from_json({"retryMaxTimes": 3})
    with pytest.raises(ConfigError, match="not a JSON object"):
        SubscriptionGroupConfig.from_json(["G"])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="retryMaxTimes = '3' of group G is not an integer"):
        SubscriptionGroupConfig.from_json({"groupName": "G", "retryMaxTimes": "3"})
    with pytest.raises(ConfigError, match="consumeEnable = 1 of group G is not a boolean"):
        SubscriptionGroupConfig.from_json({"groupName": "G", "consumeEnable": 1})
    with pytest.raises(ConfigError, match="brokerId = True of group G is not an integer"):
        SubscriptionGroupConfig.from_json({"groupName": "G", "brokerId": True})
    with pytest.raises(ConfigError, match=r"retryQueueNums 5000 of group G is not in 0..1024"):
        SubscriptionGroupConfig("G", retry_queue_nums=5000)
    with pytest.raises(ConfigError, match=r"retryMaxTimes -2 of group G is not in -1..1024"):
        SubscriptionGroupConfig("G", retry_max_times=-2)


@pytest.mark.parametrize(
    ("name", "reason"),
    [("", "blank"), ("   ", "blank"), ("a b", "illegal characters"), ("g@t", "illegal"),
     ("x" * 256, "above the limit of 255"), (None, "blank")],
)  # fmt: skip
def test_group_names_follow_rocketmqs_rule(name, reason):
    with pytest.raises(ConfigError, match=reason):
        validate_group(name)
    assert validate_group("%RETRY%my_group-1|x") == "%RETRY%my_group-1|x"
    assert validate_group("g" * 255) == "g" * 255


def test_updated_applies_json_keys_and_rejects_unknown_ones():
    cfg = SubscriptionGroupConfig("G").updated({"retryMaxTimes": 5, "consumeEnable": False})
    assert (cfg.group_name, cfg.retry_max_times, cfg.consume_enable) == ("G", 5, False)
    with pytest.raises(ConfigError, match=r"unknown subscription group setting.*retryTimes"):
        cfg.updated({"retryTimes": 1})


def test_manager_adds_system_groups_and_persists(tmp_path):
    manager = SubscriptionGroupManager(str(tmp_path))
    assert set(SYSTEM_GROUPS) <= set(manager.all()) and manager.dirty
    counter = manager.data_version["counter"]
    manager.update(SubscriptionGroupConfig("Readers", retry_max_times=3))
    assert manager.data_version["counter"] == counter + 1
    manager.persist()
    assert not manager.dirty
    path = tmp_path / "subscriptionGroup.json"
    text = path.read_text()
    assert text.startswith('{\n\t"dataVersion":{') and '\t\t"Readers":{' in text
    assert manager.delete("Readers") and not manager.delete("Readers")
    manager.update(SubscriptionGroupConfig("Writers"))
    manager.persist()
    assert (tmp_path / "subscriptionGroup.json.bak").read_text() == text  # the old version
    again = SubscriptionGroupManager(str(tmp_path))
    assert again.get("Readers") is None and again.get("Writers") == SubscriptionGroupConfig(
        "Writers"
    )
    assert again.data_version == manager.data_version and not again.dirty
    assert again.to_wrapper_json() == json_file.loads_fastjson(path.read_text())


def test_manager_loads_rocketmq_5_files_and_falls_back_to_bak(tmp_path):
    path = tmp_path / "subscriptionGroup.json"
    path.write_text(ROCKETMQ_5_FILE)
    manager = SubscriptionGroupManager(str(tmp_path))
    readers = manager.get("Readers")
    assert readers is not None
    assert (readers.consume_enable, readers.consume_broadcast_enable, readers.retry_max_times) == (
        False,
        False,
        3,
    )
    assert manager.data_version == {"counter": 3, "timestamp": 1700000000000}
    manager.persist()
    path.write_text('{"subscriptionGroupTable": {')  # torn: the .bak is read instead
    assert SubscriptionGroupManager(str(tmp_path)).get("Readers") == readers
    os.unlink(str(path) + ".bak")
    with pytest.raises(ConfigError, match="cannot load"):
        SubscriptionGroupManager(str(tmp_path))


def test_manager_rejects_inconsistent_tables(tmp_path):
    path = tmp_path / "subscriptionGroup.json"
    path.write_text('{"subscriptionGroupTable":{"A":{"groupName":"B"}}}')
    with pytest.raises(ConfigError, match="key 'A' holds group 'B'"):
        SubscriptionGroupManager(str(tmp_path))
    path.write_text('{"subscriptionGroupTable":[]}')
    with pytest.raises(ConfigError, match="must be JSON objects"):
        SubscriptionGroupManager(str(tmp_path))
