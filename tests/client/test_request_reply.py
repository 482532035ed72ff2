"""Request/reply against a real broker: a requester's ``request`` gets the reply a consumer
sends with ``create_reply_message``, over shared memory and over TCP; the reply is also
stored in the cluster's reply topic; a request nobody answers times out; bad uses fail
clearly."""

from __future__ import annotations

import threading
import time

import pytest
from waiting import wait_for

from shmq.client.consumer.push import PushConsumer
from shmq.client.producer.producer import Producer
from shmq.client.producer.request_reply import create_reply_message
from shmq.client.transport.queue_reader import QueueReader
from shmq.client.types import ConsumeResult, MessageQueue
from shmq.errors import (
    ClientError,
    ConfigError,
    InvalidPropertyError,
    MessageTooLargeError,
    RequestTimeoutError,
)
from shmq.message import Message

OK = ConsumeResult.CONSUME_SUCCESS
REPLY_TOPIC = "DefaultCluster_REPLY_TOPIC"


class Responder:
    """A PushConsumer whose listener answers each request with ``b"re:" + body``, through
    its own producer (``transport``)."""

    def __init__(self, c, topic: str, group: str, transport: str = "auto") -> None:
        self.producer = Producer(f"{group}-replies", c.namesrv, transport=transport)
        self.requests: list = []
        self.results: list = []
        self.replied: dict = {}  # request body -> the SendResult of its reply
        self.lock = threading.Lock()
        self.consumer = PushConsumer(group, c.namesrv, listener=self.on_message,
                                     consume_from_where="FIRST_OFFSET")  # fmt: skip
        self.consumer.subscribe(topic, "*")

    def on_message(self, msgs, ctx):
        for msg in msgs:
            with self.lock:  # before the reply: the requester may send its next at once
                self.requests.append(msg)
            result = self.producer.send(create_reply_message(msg, b"re:" + msg.body))
            with self.lock:
                self.results.append(result)
                self.replied[msg.body] = result
        return OK

    def __enter__(self) -> Responder:
        self.consumer.start()
        return self

    def __exit__(self, *exc) -> None:
        self.consumer.shutdown()
        self.producer.close()


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_request_gets_its_reply(broker, transport):
    topic = f"Quotes{transport}"
    broker.create_topic(topic, 4)
    with (
        Responder(broker, topic, f"quote-service-{transport}", transport) as responder,
        Producer(f"quote-clients-{transport}", broker.namesrv, transport=transport) as client,
    ):
        before = time.time_ns() // 1_000_000
        replies = [client.request(Message(topic, f"q{i}", tags="Ask"), timeout=10.0)
                   for i in range(5)]  # fmt: skip
        futures = [client.request_async(Message(topic, f"a{i}"), 10.0) for i in range(20)]
        async_bodies = sorted(f.result(15).body for f in futures)
    assert [r.body for r in replies] == [f"re:q{i}".encode() for i in range(5)]
    assert async_bodies == sorted(f"re:a{i}".encode() for i in range(20))
    reply = replies[0]
    (request,) = [m for m in responder.requests if m.body == b"q0"]
    assert reply.topic == REPLY_TOPIC
    assert reply.properties["CORRELATION_ID"] == request.properties["CORRELATION_ID"]
    assert reply.properties["MSG_TYPE"] == "reply"
    assert reply.properties["REPLY_TO_CLIENT"] == request.properties["REPLY_TO_CLIENT"]
    assert reply.properties["TTL"] == "10000"
    assert int(reply.properties["ARRIVE_TIME"]) >= int(reply.properties["PUSH_REPLY_TIME"])
    assert reply.store_timestamp >= before and reply.born_timestamp >= before
    assert reply.store_host == f"127.0.0.1:{broker.broker_port}"
    assert request.properties["CLUSTER"] == "DefaultCluster"
    assert request.tags == "Ask"
    # every reply was also stored in the reply topic, with the id its sender was given
    assert {r.send_status.name for r in responder.results} == {"SEND_OK"}
    ids = {r.offset_msg_id for r in responder.results}
    by_id: dict = {}
    with QueueReader("reply-check", broker.namesrv, transport=transport) as reader:

        def all_stored() -> bool:
            pulled = reader.pull(MessageQueue(REPLY_TOPIC, "broker-a", 0), len(by_id), 64,
                                 timeout=0.2)  # fmt: skip
            by_id.update((m.offset_msg_id, m) for m in pulled.messages)
            return ids <= set(by_id)

        wait_for(all_stored, interval=0, what="every reply in the reply topic")
    # q0's reply (results come in any order: consume threads answer q0 and q1 concurrently)
    one = by_id[responder.replied[b"q0"].offset_msg_id]
    assert one.properties["CORRELATION_ID"] == request.properties["CORRELATION_ID"]


def test_unanswered_request_times_out_and_late_reply_is_dropped(broker):
    broker.create_topic("NobodyAnswers", 2)
    with Producer("lonely-client", broker.namesrv) as client:
        started = time.monotonic()
        with pytest.raises(RequestTimeoutError, match="wait reply message timeout"):
            client.request(Message("NobodyAnswers", b"hello?"), timeout=0.5)
        assert 0.5 <= time.monotonic() - started < 5
        # the request itself was stored; answering it now reaches nobody waiting
        with QueueReader("late", broker.namesrv) as reader:
            queues = [MessageQueue("NobodyAnswers", "broker-a", q) for q in range(2)]
            msgs = [m for mq in queues for m in reader.pull(mq, 0, 10).messages]
        (late,) = msgs
        with Producer("late-responder", broker.namesrv) as responder:
            result = responder.send(create_reply_message(late, b"too late"))
        assert result.send_status.name == "SEND_OK"
        assert client._requests.unmatched == 1


def test_reply_to_a_gone_requester_fails_naming_it(broker):
    broker.create_topic("GoneRequester", 1)
    with Producer("gone-client", broker.namesrv) as client:
        asked = client.request_async(Message("GoneRequester", b"ask"), 0.2)
        wait_for(asked.done, what="the request to time out")  # nobody waits for a reply now
    with QueueReader("gone", broker.namesrv) as reader:
        (request,) = reader.pull(MessageQueue("GoneRequester", "broker-a", 0), 0, 10).messages
    with (
        Producer("gone-responder", broker.namesrv) as responder,
        pytest.raises(ClientError, match="not found"),
    ):
        responder.send(create_reply_message(request, b"anyone?"))


def test_bad_uses_fail_clearly(broker):
    with pytest.raises(ClientError, match="CLUSTER"):
        create_reply_message(Message("T", b"not a request"), b"x")
    with pytest.raises(InvalidPropertyError, match="reserved"):
        Message("T", b"x", properties={"CORRELATION_ID": "1"}).encoded_properties()
    broker.create_topic("BadRequests", 1)
    with Producer("bad-client", broker.namesrv) as client:
        with pytest.raises(ClientError, match="delayed"):
            client.request(Message("BadRequests", b"x", delay_level=1), timeout=1.0)
        with pytest.raises(ConfigError, match="timeout"):
            client.request(Message("BadRequests", b"x"), timeout=0)
        with pytest.raises(MessageTooLargeError):  # refused by the send: nothing waits
            client.request(Message("BadRequests", b"x" * (5 << 20)), timeout=1.0)
        foreign = MessageQueue("BadRequests", "broker-z", 0)  # the send fails: no waiting
        with pytest.raises(ClientError, match="send request message to <BadRequests> fail"):
            client.request(Message("BadRequests", b"x"), timeout=30.0, selector=lambda *_: foreign)
        assert client._requests._waiting == {}
        assert client.cluster_of("NotCreatedYet") == "DefaultCluster"  # from TBW102's route
    with pytest.raises(ClientError, match="closed"):
        client.request(Message("BadRequests", b"x"), timeout=1.0)
