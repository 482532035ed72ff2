"""RecallMessage through the gRPC proxy (RocketMQ 5.3): a delay message's SendMessage entry
carries RocketMQ's recall handle, RecallMessage takes the message back before its time
(a simple consumer receives the others), and failed recalls get the proxy's codes."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator

import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from grpc_client import message

from e2e_helpers import embedded
from shmq.proxy.v2 import definition_pb2 as pb
from shmq.proxy.v2 import service_pb2 as spb

Code = pb.Code


@pytest.fixture(scope="module")
def proxy(tmp_path_factory) -> Iterator[str]:
    """A proxy in front of a broker that takes recalls (off by default, as RocketMQ's)."""
    conf = {"proxy_enable": True, "grpc_server_port": 0, "recall_message_enable": True,
            "timer_precision_ms": 100}  # fmt: skip
    with embedded(str(tmp_path_factory.mktemp("recall") / "store"), **conf) as mq:
        for topic in ("RecallDelay", "RecallLate"):
            mq.create_topic(topic, 1)
        yield mq.grpc_address


def delay_message(topic: str, body: bytes, deliver_ms: int) -> pb.Message:
    at = Timestamp()
    at.FromMilliseconds(deliver_ms)
    return message(topic, body, delivery_timestamp=at, message_type=pb.DELAY)


def recall(c, topic: str, handle: str) -> spb.RecallMessageResponse:
    return c.call("RecallMessage", spb.RecallMessageRequest(topic=pb.Resource(name=topic),
                                                            recall_handle=handle))  # fmt: skip


def receive_until(c, group: str, topic: str, last: bytes) -> list[bytes]:
    """Bodies received (and acked) until ``last`` is among them."""
    got: list[pb.Message] = []
    deadline = time.monotonic() + 60
    while last not in [m.body for m in got] and time.monotonic() < deadline:
        status, messages = c.receive(group, topic, polling_ms=5_000)
        assert status.code in (Code.OK, Code.MESSAGE_NOT_FOUND), status
        got += messages
    if got:
        c.ack(group, topic, *got)
    return [m.body for m in got]


def test_a_recalled_delay_message_is_not_received_and_the_others_are(client):
    c = client()
    c.subscribe("g-recall", "RecallDelay")
    at = int(time.time() * 1000) + 2_000
    sent = c.send(delay_message("RecallDelay", b"drop", at))
    assert sent.status.code == Code.OK, sent
    entry = sent.entries[0]
    raw = base64.urlsafe_b64decode(entry.recall_handle).decode()
    assert raw.split(" ") == ["v1", "RecallDelay", "broker-a", str(at + 1), entry.message_id]
    for body, deliver in ((b"keep", at), (b"later", at + 300)):
        assert c.send(delay_message("RecallDelay", body, deliver)).status.code == Code.OK
    recalled = recall(c, "RecallDelay", entry.recall_handle)
    assert (recalled.status.code, recalled.message_id) == (Code.OK, entry.message_id)
    assert sorted(receive_until(c, "g-recall", "RecallDelay", b"later")) == [b"keep", b"later"]


def test_failed_recalls_get_the_proxys_codes(client):
    c = client()
    c.subscribe("g-late", "RecallLate")
    bad = recall(c, "RecallLate", "not a handle!")
    assert (bad.status.code, bad.status.message) == (Code.INTERNAL_SERVER_ERROR,
                                                     "recall handle is invalid")  # fmt: skip
    assert recall(c, "NoSuchTopic", "eA").status.code == Code.TOPIC_NOT_FOUND
    assert recall(c, "a b", "eA").status.code == Code.ILLEGAL_TOPIC
    sent = c.send(delay_message("RecallLate", b"x", int(time.time() * 1000) + 300))
    handle = sent.entries[0].recall_handle
    mismatch = recall(c, "RecallDelay", handle)
    assert (mismatch.status.code, mismatch.status.message) == (
        Code.INTERNAL_SERVER_ERROR, "recall failed, topic not match")  # fmt: skip
    assert receive_until(c, "g-late", "RecallLate", b"x") == [b"x"]
    late = recall(c, "RecallLate", handle)  # delivered: its time has passed
    assert (late.status.code, late.status.message) == (
        Code.INTERNAL_SERVER_ERROR, "recall failed, timestamp invalid")  # fmt: skip
