"""CLONE_GROUP_OFFSET (mqadmin cloneGroupOffset) over the wire, with the independent wire
client: the destination group gets the source's committed offsets on the topic, in place
of its own; without a topic on every topic of the source; a topic the online source does
not subscribe to only with ``offline``."""

from __future__ import annotations

import json

import wire_client as wc
from test_remoting_send import send

CLONE_GROUP_OFFSET, HEART_BEAT = 314, 34


def commit(c: wc.WireClient, group: str, topic: str, queue_id: int, offset: int) -> None:
    header = wc.offset_header(group, topic, queue_id, offset)
    assert c.call(wc.UPDATE_CONSUMER_OFFSET, header).code == wc.SUCCESS


def committed(c: wc.WireClient, group: str, topic: str, queue_id: int) -> int:
    resp = c.call(wc.QUERY_CONSUMER_OFFSET, {"consumerGroup": group, "topic": topic,
                                             "queueId": str(queue_id)})  # fmt: skip
    assert resp.code == wc.SUCCESS, resp  # 4.9: 0 for a queue from 0 without an offset
    return int(resp.ext["offset"])


def clone(c: wc.WireClient, ext: dict[str, str]) -> wc.Frame:
    return c.call(CLONE_GROUP_OFFSET, ext)


def test_clone_copies_the_topics_offsets_in_place_of_the_destinations(shared_broker):
    broker, _ = shared_broker
    for topic in ("CloneA", "CloneB"):
        for qid in (0, 1):
            assert send(broker, topic, qid, {}).code == wc.SUCCESS
    with wc.WireClient(broker.address) as c:
        commit(c, "clone-src", "CloneA", 0, 1)
        commit(c, "clone-src", "CloneA", 1, 1)
        commit(c, "clone-src", "CloneB", 0, 1)
        commit(c, "clone-dst", "CloneA", 1, 0)  # replaced, not merged
        resp = clone(c, {"srcGroup": "clone-src", "destGroup": "clone-dst", "topic": "CloneA",
                         "offline": "false"})  # fmt: skip
        assert (resp.code, resp.remark) == (wc.SUCCESS, None), resp
        assert [committed(c, "clone-dst", "CloneA", q) for q in (0, 1)] == [1, 1]
        assert committed(c, "clone-dst", "CloneB", 0) == 0  # only the topic asked (0: none)
        # no topic: every topic the source has offsets on (RocketMQ clones none here)
        assert clone(c, {"srcGroup": "clone-src", "destGroup": "clone-all"}).code == wc.SUCCESS
        assert committed(c, "clone-all", "CloneA", 0) == 1
        assert committed(c, "clone-all", "CloneB", 0) == 1
        # a topic the broker does not have is skipped, as RocketMQ does
        missing = {"srcGroup": "clone-src", "destGroup": "clone-none", "topic": "CloneNope"}
        assert clone(c, missing).code == wc.SUCCESS
        refused = clone(c, {"destGroup": "clone-none"})
        assert refused.code == wc.SYSTEM_ERROR and "srcGroup" in refused.remark, refused


def test_an_online_source_group_gives_only_what_it_subscribes_to_unless_offline(shared_broker):
    broker, _ = shared_broker
    assert send(broker, "CloneSub", 0, {}).code == wc.SUCCESS
    assert send(broker, "CloneOther", 0, {}).code == wc.SUCCESS
    heartbeat = {"clientID": "10.0.0.9@7#1", "producerDataSet": [], "consumerDataSet": [{
        "groupName": "clone-online", "consumeType": "CONSUME_PASSIVELY",
        "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
        "unitMode": False, "subscriptionDataSet": [{
            "classFilterMode": False, "codeSet": [], "expressionType": "TAG", "subString": "*",
            "subVersion": 1, "tagsSet": [], "topic": "CloneSub"}]}]}  # fmt: skip
    with wc.WireClient(broker.address) as member, wc.WireClient(broker.address) as c:
        assert member.call(HEART_BEAT, {}, json.dumps(heartbeat).encode()).code == wc.SUCCESS
        commit(c, "clone-online", "CloneSub", 0, 1)
        commit(c, "clone-online", "CloneOther", 0, 1)
        ext = {"srcGroup": "clone-online", "destGroup": "clone-copy", "topic": "CloneOther"}
        assert clone(c, ext).code == wc.SUCCESS
        assert committed(c, "clone-copy", "CloneOther", 0) == 0  # not subscribed: none
        assert clone(c, {**ext, "offline": "true"}).code == wc.SUCCESS
        assert committed(c, "clone-copy", "CloneOther", 0) == 1
        assert clone(c, {**ext, "topic": "CloneSub"}).code == wc.SUCCESS
        assert committed(c, "clone-copy", "CloneSub", 0) == 1
