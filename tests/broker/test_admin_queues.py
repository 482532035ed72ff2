"""mqadmin's queue inspection over the wire, with the independent wire client:
QUERY_CONSUME_QUEUE (``queryCq``) answers each unit as the spec decoder reads the records it
points to, QUERY_CONSUME_TIME_SPAN the store times a group stands between, and
GET_SYSTEM_TOPIC_LIST_FROM_BROKER RocketMQ's system topics."""

from __future__ import annotations

import json
import time

import wire_client as wc
from test_remoting_send import send, stored

QUERY_CONSUME_TIME_SPAN, GET_SYSTEM_TOPIC_LIST_FROM_BROKER, QUERY_CONSUME_QUEUE = 303, 305, 321
HEART_BEAT = 34


def java_hash(text: str) -> int:
    """``String.hashCode``: a tag's tags code."""
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def query_cq(c: wc.WireClient, topic: str, queue_id: int, index: int, count: int,
             group: str | None = None) -> wc.Frame:  # fmt: skip
    ext = {"topic": topic, "queueId": str(queue_id), "index": str(index), "count": str(count)}
    if group is not None:
        ext["consumerGroup"] = group
    return c.call(QUERY_CONSUME_QUEUE, ext)


def heartbeat(c: wc.WireClient, group: str, topic: str, tags: list[str]) -> None:
    sub = {"classFilterMode": False, "codeSet": [java_hash(t) for t in tags],
           "expressionType": "TAG", "subString": "||".join(tags) or "*", "subVersion": 1,
           "tagsSet": tags, "topic": topic}  # fmt: skip
    data = {"clientID": "10.0.0.7@9#1", "producerDataSet": [], "consumerDataSet": [{
        "groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
        "subscriptionDataSet": [sub]}]}  # fmt: skip
    assert c.call(HEART_BEAT, {}, json.dumps(data).encode()).code == wc.SUCCESS


def test_query_cq_answers_each_unit_as_the_records_it_points_to(shared_broker):
    broker, _ = shared_broker
    tags = ["TagA", "TagB", "TagA", "TagC", "TagA"]
    for i, tag in enumerate(tags):
        assert send(broker, "InspectCq", 1, {"TAGS": tag}, b"x" * (10 + i)).code == wc.SUCCESS
    records = stored(broker, "InspectCq", 1, len(tags))
    with wc.WireClient(broker.address) as c, wc.WireClient(broker.address) as member:
        resp = query_cq(c, "InspectCq", 1, 1, 3)
        assert (resp.code, resp.remark) == (wc.SUCCESS, None), resp
        body = json.loads(resp.body)
        assert (body["minQueueIndex"], body["maxQueueIndex"]) == (0, 5)
        assert "subscriptionData" not in body  # no group asked
        units = body["queueData"]
        assert [(u["physicOffset"], u["physicSize"], u["tagsCode"]) for u in units] == [
            (r["phys"], r["size"], java_hash(r["properties"]["TAGS"])) for r in records[1:4]
        ]
        assert [u["eval"] for u in units] == [False] * 3  # nothing to evaluate without a group

        # a group online with a tag filter: its subscription, and which units it takes
        heartbeat(member, "inspect-g", "InspectCq", ["TagA", "TagC"])
        body = json.loads(query_cq(c, "InspectCq", 1, 0, 100, "inspect-g").body)
        assert body["subscriptionData"]["subString"] == "TagA||TagC"
        assert body["filterData"] == "null"
        assert [u["eval"] for u in body["queueData"]] == [t != "TagB" for t in tags]
        offline = json.loads(query_cq(c, "InspectCq", 1, 0, 1, "inspect-nobody").body)
        assert offline["filterData"] == "inspect-nobody@InspectCq is not online!"
        assert offline["subscriptionData"] is None

        # RocketMQ's answers outside the queue, and a count the broker will not serve
        past = query_cq(c, "InspectCq", 1, 5, 10)
        assert past.code == wc.SUCCESS and past.remark == "Index 5 of 1@InspectCq is not exist!"
        assert json.loads(past.body)["queueData"] == []
        empty = query_cq(c, "InspectCq", 7, 0, 10)
        assert (empty.code, empty.remark) == (wc.SYSTEM_ERROR, "7@InspectCq is not exist!")
        for count in ("0", "10001", "many"):
            bad = c.call(QUERY_CONSUME_QUEUE, {"topic": "InspectCq", "queueId": "1",
                                               "index": "0", "count": count})  # fmt: skip
            assert bad.code == wc.SYSTEM_ERROR and "count" in bad.remark, bad
        assert query_cq(c, "InspectCq", 1, 0, 1).code == wc.SUCCESS  # the connection goes on


def test_consume_time_span_gives_the_store_times_a_group_stands_between(shared_broker):
    broker, _ = shared_broker
    for _ in range(3):
        assert send(broker, "InspectSpan", 0, {}).code == wc.SUCCESS
    records = stored(broker, "InspectSpan", 0, 3)
    stamps = [r["store_timestamp"] for r in records]
    with wc.WireClient(broker.address) as c:
        header = wc.offset_header("span-g", "InspectSpan", 0, 1)
        assert c.call(wc.UPDATE_CONSUMER_OFFSET, header).code == wc.SUCCESS
        before = int(time.time() * 1000)
        resp = c.call(QUERY_CONSUME_TIME_SPAN, {"topic": "InspectSpan", "group": "span-g"})
        after = int(time.time() * 1000)
        assert resp.code == wc.SUCCESS, resp
        spans = json.loads(resp.body)["consumeTimeSpanSet"]
        assert len(spans) == broker.topics.get("InspectSpan").write_queue_nums  # one per queue
        first = spans[0]
        assert first["messageQueue"] == {
            "topic": "InspectSpan",
            "brokerName": broker.config.broker_name,
            "queueId": 0,
        }
        assert (first["minTimeStamp"], first["maxTimeStamp"]) == (stamps[0], stamps[2])
        assert first["consumeTimeStamp"] == stamps[0]  # the last consumed: offset 0
        assert before - stamps[1] <= first["delayTime"] <= after - stamps[1]  # waits: offset 1
        idle = spans[1]  # a queue without messages
        assert (idle["minTimeStamp"], idle["maxTimeStamp"], idle["delayTime"]) == (-1, -1, 0)

        assert (
            c.call(wc.UPDATE_CONSUMER_OFFSET, wc.offset_header("span-g", "InspectSpan", 0, 3)).code
            == wc.SUCCESS
        )
        done = json.loads(c.call(QUERY_CONSUME_TIME_SPAN, {"topic": "InspectSpan",
                                                          "group": "span-g"}).body)  # fmt: skip
        assert done["consumeTimeSpanSet"][0]["consumeTimeStamp"] == stamps[2]
        assert done["consumeTimeSpanSet"][0]["delayTime"] == 0  # at the end

        missing = c.call(QUERY_CONSUME_TIME_SPAN, {"topic": "InspectNope", "group": "span-g"})
        assert missing.code == wc.TOPIC_NOT_EXIST, missing


def test_system_topics_are_rocketmqs_and_the_brokers_names(shared_broker):
    broker, _ = shared_broker
    with wc.WireClient(broker.address, wc.ROCKETMQ) as c:
        resp = c.call(GET_SYSTEM_TOPIC_LIST_FROM_BROKER, {})
    assert resp.code == wc.SUCCESS, resp
    topics = set(json.loads(resp.body)["topicList"])
    assert {"SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "TBW102",
            broker.config.broker_name, broker.config.broker_cluster_name} <= topics  # fmt: skip
    assert "InspectCq" not in topics
