"""A gRPC consumer's message that is not consumed comes back one delivery attempt later,
and after the group's max delivery attempts (``retryMaxTimes`` + 1, as the proxy's settings
tell the client) it goes to ``%DLQ%<group>`` instead of being delivered again."""

from __future__ import annotations

import json
import time

import wire_client as wc
from grpc_client import message, millis
from waiting import wait_for

from shmq.proxy.v2 import definition_pb2 as pb
from shmq.proxy.v2 import service_pb2 as spb
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RemotingCommand, RequestCode

Code = pb.Code


def nack(c, group: str, topic: str, msg: pb.Message) -> None:
    """ChangeInvisibleDuration to 0: visible again at once (what a push consumer does with
    a message its listener failed)."""
    changed = c.call("ChangeInvisibleDuration", spb.ChangeInvisibleDurationRequest(
        group=pb.Resource(name=group), topic=pb.Resource(name=topic),
        receipt_handle=msg.system_properties.receipt_handle, invisible_duration=millis(0),
        message_id=msg.system_properties.message_id))  # fmt: skip
    assert changed.status.code == Code.OK, changed


def test_dead_letter_queue_after_the_groups_max_delivery_attempts(client, broker):
    group, topic = "g-attempts", "Attempts"
    broker.create_topic(topic, 1)
    body = json.dumps({"groupName": group, "retryMaxTimes": 1}).encode()
    with RemotingClient() as rc:
        request = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body)
        assert rc.invoke(broker.broker_address, request, 10).code == 0
    c = client()
    settings = c.subscribe(group, topic)
    assert settings.settings.backoff_policy.max_attempts == 2  # retryMaxTimes + 1
    c.send(message(topic, b"poison"))
    attempts = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(attempts) < 3:
        status, got = c.receive(group, topic, invisible_ms=10_000, polling_ms=5_000)
        if status.code == Code.MESSAGE_NOT_FOUND and len(attempts) == 2:
            break  # not delivered a third time
        for msg in got:
            attempts.append(msg.system_properties.delivery_attempt)
            nack(c, group, topic, msg)
    assert attempts == [1, 2]

    def dead_lettered() -> list[dict]:
        with wc.WireClient(broker.broker_address) as w:
            resp = w.call(wc.PULL_MESSAGE, wc.pull_header("x", f"%DLQ%{group}", 0, 0,
                                                          sys_flag=wc.SUBSCRIPTION))  # fmt: skip
        return wc.pulled_records(resp.body) if resp.code == wc.SUCCESS else []

    (dead,) = wait_for(dead_lettered, what="the message in the DLQ")
    assert dead["body"] == b"poison"
