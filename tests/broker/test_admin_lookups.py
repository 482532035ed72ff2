"""GET_TOPIC_CONFIG and GET_SUBSCRIPTIONGROUP_CONFIG (RocketMQ 5's one-config reads) and
QUERY_CORRECTION_OFFSET over the wire, with the independent wire client."""

from __future__ import annotations

import json

import pytest
import wire_client as wc
from test_clone_group_offset import commit
from test_remoting_send import send

GET_TOPIC_CONFIG, GET_SUBSCRIPTIONGROUP_CONFIG, QUERY_CORRECTION_OFFSET = 351, 352, 308
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
TOPIC_NOT_EXIST, SUBSCRIPTION_GROUP_NOT_EXIST = 17, 26
LONG_MAX = 2**63 - 1


@pytest.mark.parametrize("encoding", [wc.JSON, wc.ROCKETMQ])
def test_one_topic_config_and_one_group_config(shared_broker, encoding):
    broker, _ = shared_broker
    assert send(broker, "LookupTopic", 0, {}).code == wc.SUCCESS  # auto-created
    group = {"groupName": "lookup-group", "consumeEnable": True, "retryMaxTimes": 3}
    with wc.WireClient(broker.address, encoding) as c:
        created = c.call(UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, json.dumps(group).encode())
        assert created.code == wc.SUCCESS, created

        topic = c.call(GET_TOPIC_CONFIG, {"topic": "LookupTopic", "lo": "false"})
        assert topic.code == wc.SUCCESS, topic
        config = json.loads(topic.body)
        assert config["topicName"] == "LookupTopic"
        assert {"readQueueNums", "writeQueueNums", "perm", "topicSysFlag", "order"} <= set(config)
        missing = c.call(GET_TOPIC_CONFIG, {"topic": "LookupNope"})
        assert missing.code == TOPIC_NOT_EXIST and "LookupNope" in missing.remark
        bad = c.call(GET_TOPIC_CONFIG, {"topic": "bad topic!"})
        assert bad.code == wc.SYSTEM_ERROR

        got = c.call(GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "lookup-group"})
        assert got.code == wc.SUCCESS, got
        assert json.loads(got.body)["groupName"] == "lookup-group"
        assert json.loads(got.body)["retryMaxTimes"] == 3
        nope = c.call(GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "lookup-nope"})
        assert (nope.code, nope.remark) == (SUBSCRIPTION_GROUP_NOT_EXIST, "No group in this broker")


def test_correction_offsets_are_the_lowest_of_the_other_groups(shared_broker):
    broker, _ = shared_broker
    for qid in (0, 1, 2):
        for _ in range(5):
            assert send(broker, "CorrTopic", qid, {}).code == wc.SUCCESS
    with wc.WireClient(broker.address) as c:
        commit(c, "corr-a", "CorrTopic", 0, 4)
        commit(c, "corr-a", "CorrTopic", 1, 2)
        commit(c, "corr-b", "CorrTopic", 0, 3)
        commit(c, "corr-b", "CorrTopic", 1, 5)
        commit(c, "corr-slow", "CorrTopic", 0, 1)  # filtered out below
        commit(c, "corr-cmp", "CorrTopic", 0, 5)
        commit(c, "corr-cmp", "CorrTopic", 1, 1)
        commit(c, "corr-cmp", "CorrTopic", 2, 5)  # no other group on queue 2

        def correction(filter_groups: str) -> dict[int, int]:
            resp = c.call(QUERY_CORRECTION_OFFSET, {"topic": "CorrTopic", "compareGroup":
                          "corr-cmp", "filterGroups": filter_groups})  # fmt: skip
            assert resp.code == wc.SUCCESS, resp
            return {int(k): v for k, v in wc.fastjson_loads(resp.body)["correctionOffsets"].items()}

        # the compared group counts in the minimum unless filtered, as in RocketMQ
        assert correction("corr-slow") == {0: 3, 1: 1, 2: 5}
        # filtered: queue 0's lowest other (3) is below corr-cmp's 5: kept; queue 1's (2) is
        # above corr-cmp's 1: no correction (Long.MAX_VALUE); queue 2, no other group: left out
        assert correction("corr-slow,corr-cmp") == {0: 3, 1: LONG_MAX}
        assert correction("corr-cmp") == {0: 1, 1: LONG_MAX}
        # a read: the filtered groups keep their offsets (RocketMQ's deletes them)
        resp = c.call(wc.QUERY_CONSUMER_OFFSET, {"consumerGroup": "corr-slow",
                                                 "topic": "CorrTopic", "queueId": "0"})  # fmt: skip
        assert int(resp.ext["offset"]) == 1
        bad = c.call(QUERY_CORRECTION_OFFSET, {"topic": "CorrTopic", "compareGroup": "corr-cmp",
                                               "filterGroups": "a@b"})  # fmt: skip
        assert bad.code == wc.SYSTEM_ERROR and "filterGroups" in bad.remark
