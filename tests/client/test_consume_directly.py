"""CONSUME_MESSAGE_DIRECTLY (mqadmin ``queryMsgById -g -d``): an admin has one member of a
group consume a stored message with its listener now, through the broker, and gets
RocketMQ's ConsumeMessageDirectlyResult; offsets do not move."""

from __future__ import annotations

import threading
import time

import pytest
from waiting import wait_for

from e2e_helpers import shmq
from shmq.client.admin.admin import Admin
from shmq.client.consumer.lite_pull import PullConsumer
from shmq.client.consumer.push import PushConsumer
from shmq.client.producer.producer import Producer
from shmq.client.types import ConsumeOrderlyStatus, ConsumeResult
from shmq.errors import ResponseError
from shmq.message import Message
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode


class Listener:
    """Consumes everything until ``direct`` is set, then answers by body: ok, later, none
    (no status), boom (raises)."""

    def __init__(self, orderly: bool = False) -> None:
        self.seen: list = []
        self.direct = False
        self.lock = threading.Lock()
        ok = ConsumeOrderlyStatus.SUCCESS if orderly else ConsumeResult.CONSUME_SUCCESS
        later = (ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT if orderly
                 else ConsumeResult.RECONSUME_LATER)  # fmt: skip
        self.answers = {b"ok": ok, b"later": later, b"none": None}

    def __call__(self, msgs, ctx):
        with self.lock:
            self.seen += [(m.body, ctx.message_queue) for m in msgs]
        if not self.direct:
            return self.answers[b"ok"]
        if msgs[0].body == b"boom":
            raise RuntimeError("boom went the listener")
        return self.answers.get(msgs[0].body)


@pytest.mark.parametrize("orderly", [False, True])
def test_a_member_consumes_a_message_on_request(broker, orderly):
    topic, group = f"Direct{int(orderly)}", f"direct-{int(orderly)}"
    broker.create_topic(topic, 1)
    with Producer("direct-p", broker.namesrv) as producer:
        ids = {b: producer.send(Message(topic, b)).offset_msg_id
               for b in (b"ok", b"later", b"none", b"boom")}  # fmt: skip
    listener = Listener(orderly)
    consumer = PushConsumer(group, broker.namesrv, listener=listener, orderly=orderly,
                            consume_from_where="FIRST_OFFSET")  # fmt: skip
    consumer.subscribe(topic, "*")
    with consumer, Admin(broker.namesrv) as admin:
        consumer.start()
        wait_for(lambda: len(listener.seen) >= 4, what="the first deliveries")
        cid = consumer.instance.client_id
        wait_for(
            lambda: admin.consumer_progress(group, topic).diff_total == 0,
            what="the offsets committed",
        )
        listener.direct = True
        results = {b: admin.consume_message_directly(group, cid, i) for b, i in ids.items()}
        time.sleep(1.5)  # a test of absence: a message sent back would come again by now
        assert admin.consumer_progress(group, topic).diff_total == 0
    expected = {b"ok": "CR_SUCCESS", b"later": "CR_LATER", b"none": "CR_RETURN_NULL",
                b"boom": "CR_THROW_EXCEPTION"}  # fmt: skip
    assert {b: r["consumeResult"] for b, r in results.items()} == expected
    assert all(r["order"] is orderly and r["autoCommit"] is True for r in results.values())
    assert all(r["spentTimeMills"] >= 0 for r in results.values())
    assert results[b"boom"]["remark"] == "RuntimeError: boom went the listener"
    direct = listener.seen[-4:]
    assert [body for body, _ in direct] == [b"ok", b"later", b"none", b"boom"]
    assert {(mq.topic, mq.broker_name, mq.queue_id) for _, mq in direct} == {(topic, "broker-a", 0)}
    assert len(listener.seen) == 8  # nothing was sent back to be consumed again


def test_direct_consumption_refused_clearly(broker):
    topic, group = "DirectRefused", "direct-pull"
    broker.create_topic(topic, 1)
    with Producer("direct-p2", broker.namesrv) as producer:
        msg_id = producer.send(Message(topic, b"x")).offset_msg_id
    with PullConsumer(group, broker.namesrv) as pull, Admin(broker.namesrv) as admin:
        pull.subscribe(topic, "*")
        pull.start()
        cid = pull.instance.client_id
        wait_for(lambda: admin.consumer_connection(group), what="the pull consumer online")
        with pytest.raises(ResponseError, match=f"The Consumer Group <{group}> not exist") as e:
            admin.consume_message_directly(group, cid, msg_id)
        assert e.value.code == ResponseCode.SYSTEM_ERROR
        with pytest.raises(ResponseError, match=r"The Consumer <direct-pull> <gone@1> not online"):
            admin.consume_message_directly(group, "gone@1", msg_id)
    done = shmq("admin", "query-msg-by-id", "-i", msg_id, "-g", group, "-n", broker.namesrv)
    assert done.returncode == 2 and "-g (group) and -d (client id) go together" in done.stderr


def test_cli_has_a_member_consume_a_message(broker):
    topic, group = "DirectCli", "direct-cli"
    broker.create_topic(topic, 1)
    with Producer("direct-p3", broker.namesrv) as producer:
        msg_id = producer.send(Message(topic, b"ok")).offset_msg_id
    listener = Listener()
    consumer = PushConsumer(group, broker.namesrv, listener=listener,
                            consume_from_where="FIRST_OFFSET")  # fmt: skip
    consumer.subscribe(topic, "*")
    with consumer:
        consumer.start()
        wait_for(lambda: listener.seen, what="the first delivery")
        cid = consumer.instance.client_id
        done = shmq("admin", "query-msg-by-id", "-i", msg_id, "-g", group, "-d", cid,
                    "-n", broker.namesrv)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"{cid} of {group}: CR_SUCCESS in " in done.stdout


def test_a_bad_message_id_is_a_clear_error(broker):
    """What a client names cannot hurt the broker: a malformed id or an offset past the
    end is answered SYSTEM_ERROR naming it, and the broker serves on."""
    with RemotingClient() as client:
        for msg_id, why in (("garbage", "garbage"), ("7F0000010000" + "F" * 20, "offset")):
            fields = {"consumerGroup": "g", "clientId": "c", "msgId": msg_id}
            request = RemotingCommand.request(RequestCode.CONSUME_MESSAGE_DIRECTLY, fields)
            answer = client.invoke(broker.brokers["broker-a"].address, request)
            assert answer.code == ResponseCode.SYSTEM_ERROR and why in answer.remark.lower()
        missing = RemotingCommand.request(RequestCode.CONSUME_MESSAGE_DIRECTLY, {"msgId": "x"})
        answer = client.invoke(broker.brokers["broker-a"].address, missing)
        assert answer.code == ResponseCode.SYSTEM_ERROR and "consumerGroup" in answer.remark
