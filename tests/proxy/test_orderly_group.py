"""A group whose ``consumeMessageOrderly`` is set consumes in order through the proxy, as
RocketMQ 5 groups do: its clients are told ``fifo`` in their settings, and a queue gives
out no further message while the one it gave out is neither acked nor visible again, even
to a client that did not ask for FIFO (the official SimpleConsumer never does)."""

from __future__ import annotations

import json

from grpc_client import message

from shmq.proxy.v2 import definition_pb2 as pb
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RemotingCommand, RequestCode

Code = pb.Code


def test_an_orderly_group_gets_one_message_of_a_queue_at_a_time(client, broker):
    group, topic = "g-orderly", "Orderly"
    broker.create_topic(topic, 1)
    body = json.dumps({"groupName": group, "consumeMessageOrderly": True}).encode()
    with RemotingClient() as rc:
        request = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body)
        assert rc.invoke(broker.broker_address, request, 10).code == 0
    c = client()
    settings = c.subscribe(group, topic)  # no fifo asked for
    assert settings.settings.subscription.fifo
    sent = c.send(*(message(topic, b"m%d" % i, message_group="order-1",
                            message_type=pb.FIFO) for i in range(3)))  # fmt: skip
    assert sent.status.code == Code.OK, sent
    status, (first,) = c.receive(group, topic, batch=1, polling_ms=5_000)
    assert first.body == b"m0"
    status, none = c.receive(group, topic, batch=1, polling_ms=5_000)
    assert (status.code, none) == (Code.MESSAGE_NOT_FOUND, [])  # m1 waits for m0's ack
    assert c.ack(group, topic, first).status.code == Code.OK
    status, (second,) = c.receive(group, topic, batch=1, polling_ms=5_000)
    assert second.body == b"m1"
