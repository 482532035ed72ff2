"""maxTopics sizes the shared topic table: a topic past it is refused with a reason before
anything changes, and the topics already there keep working."""

from __future__ import annotations

import pytest

import shmq
from shmq.errors import ResponseError
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RequestCode


def create_topic(client: RemotingClient, broker, topic: str) -> None:
    client.invoke_json(broker.address, RequestCode.UPDATE_AND_CREATE_TOPIC,
                       {"topic": topic, "readQueueNums": 1, "writeQueueNums": 1})  # fmt: skip


def test_a_topic_past_max_topics_is_refused_and_the_others_go_on(make_broker):
    broker, namesrv = make_broker(max_topics=24)
    room = 24 - len(broker.topics.all())
    assert room > 1
    with RemotingClient() as client:
        for i in range(room):
            create_topic(client, broker, f"Fits{i}")
        with pytest.raises(
            ResponseError, match=r"cannot create topic Over: .*24 topics.*maxTopics"
        ):
            create_topic(client, broker, "Over")
        create_topic(client, broker, "Fits0")  # an update of a topic it holds is no new slot
    assert "Over" not in broker.topics.all() and len(broker.topics.all()) == 24
    with shmq.Producer("limits-p", namesrv) as producer:
        assert (
            producer.send(shmq.Message("Fits0", b"still here")).send_status
            == shmq.SendStatus.SEND_OK
        )
