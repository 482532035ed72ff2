"""HEART_BEAT's ``messageModel`` as RocketMQ's clients encode it: Java's sends the enum's
name, rocketmq-client-cpp its ordinal (BROADCASTING 0, CLUSTERING 1). Either way a
clustering consumer's group gets its retry topic and the registry reports the model by
name; a broadcasting one gets no retry topic. Raw frames, through the independent wire
client."""

from __future__ import annotations

import json

import pytest
import wire_client as wc

HEART_BEAT, GET_ALL_TOPIC_CONFIG, GET_CONSUMER_CONNECTION_LIST = 34, 21, 203


def heartbeat(client_id: str, group: str, model: object) -> bytes:
    """A consumer's heartbeat body with ``messageModel`` exactly as given (a JSON number
    stays one)."""
    return json.dumps({"clientID": client_id, "producerDataSet": [], "consumerDataSet": [{
        "groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": model,
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
        "subscriptionDataSet": [{"classFilterMode": False, "codeSet": [], "expressionType": "TAG",
                                 "subString": "*", "subVersion": 1, "tagsSet": [],
                                 "topic": "ModelTopic"}]}]}).encode()  # fmt: skip


def topics(c: wc.WireClient) -> set[str]:
    resp = c.call(GET_ALL_TOPIC_CONFIG, {})
    assert resp.code == wc.SUCCESS, resp
    return set(wc.fastjson_loads(resp.body)["topicConfigTable"])


@pytest.mark.parametrize(
    ("model", "retry", "name"),
    [(1, True, "CLUSTERING"), ("CLUSTERING", True, "CLUSTERING"),
     (0, False, "BROADCASTING"), ("BROADCASTING", False, "BROADCASTING")],
)  # fmt: skip
def test_the_model_counts_whether_named_or_numbered(shared_broker, model, retry, name):
    broker, _ = shared_broker
    group = f"model-{name.lower()}-{type(model).__name__}"
    with wc.WireClient(broker.address) as member, wc.WireClient(broker.address) as c:
        resp = member.call(HEART_BEAT, {}, heartbeat("10.0.0.5@1#1", group, model))
        assert resp.code == wc.SUCCESS, resp
        assert (f"%RETRY%{group}" in topics(c)) is retry
        conn = c.call(GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group})
        assert conn.code == wc.SUCCESS, conn
        assert wc.fastjson_loads(conn.body)["messageModel"] == name
