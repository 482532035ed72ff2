"""Message trace against a real broker: traced sends and consumes are found by
``query_msg_trace_by_id`` (and ``shmq admin query-msg-trace-by-id``) with matching ids,
groups and results; a transaction's end is traced; a lite pull consumer's poll is traced;
and trace off writes nothing."""

from __future__ import annotations

import json
import threading

from click.testing import CliRunner
from waiting import wait_for

from shmq.client.admin.admin import Admin
from shmq.client.consumer.lite_pull import PullConsumer
from shmq.client.consumer.push import PushConsumer
from shmq.client.producer.producer import Producer
from shmq.client.trace.encoder import TRACE_TOPIC
from shmq.client.transaction.producer import TransactionProducer
from shmq.client.transaction.types import LocalTransactionState
from shmq.client.types import ConsumeResult
from shmq.errors import ClientError, NoRouteError, ResponseError
from shmq.message import Message
from shmq_cli.main import cli

NOT_YET = (ClientError, ResponseError, NoRouteError)


def trace_of(namesrv: str, msg_id: str, ready, topic: str = TRACE_TOPIC) -> dict:
    """The message's timeline once ``ready(timeline)`` holds (the index lags the send)."""
    with Admin(namesrv) as admin:
        line: dict = {}

        def found() -> bool:
            line.update(admin.query_msg_trace_by_id(msg_id, topic))
            return ready(line)

        wait_for(found, ignore=NOT_YET, timeout=20, what=f"the trace of {msg_id}")
        return line


def test_trace_off_writes_nothing_and_starts_no_thread(broker):
    with Producer("NoTracePG", broker.namesrv) as producer:
        assert producer._trace is None and "send" not in vars(producer)
        assert "trace" not in producer.stats()
        result = producer.send(Message("NoTraceTopic", b"quiet", keys=["quiet-1"]))
    got = threading.Event()

    def listener(msgs, ctx):
        got.set()
        return ConsumeResult.CONSUME_SUCCESS

    consumer = PushConsumer("NoTraceCG", broker.namesrv, consume_from_where="FIRST_OFFSET",
                            listener=listener)  # fmt: skip
    consumer.subscribe("NoTraceTopic")
    consumer.start()
    try:
        assert got.wait(10)
        assert consumer._trace is None
        assert not [t for t in threading.enumerate() if t.name == "shmq-trace-dispatcher"]
    finally:
        consumer.shutdown()
    with Admin(broker.namesrv) as admin:  # no trace message was ever sent: no trace topic
        try:
            found = admin.query_msg_by_key(TRACE_TOPIC, result.msg_id)
        except NoRouteError:
            found = []
    assert found == []


def test_a_traced_send_and_consume_show_both_ends(broker):
    topic = "TracedOrders"
    with Producer("TracePG", broker.namesrv, enable_msg_trace=True) as producer:
        sent = producer.send(Message(topic, b"order 1", tags="Paid", keys=["order-1"]))
        async_sent = producer.send_async(Message(topic, b"order 2")).result(10)
        assert producer.stats()["trace"]["discarded"] == 0
    attempts: list[int] = []

    def listener(msgs, ctx):  # the first delivery fails: consumed again from the retry topic
        attempts.append(msgs[0].reconsume_times)
        if msgs[0].msg_id == sent.msg_id and msgs[0].reconsume_times == 0:
            return ConsumeResult.RECONSUME_LATER
        return ConsumeResult.CONSUME_SUCCESS

    consumer = PushConsumer("TraceCG", broker.namesrv, consume_from_where="FIRST_OFFSET",
                            listener=listener, enable_msg_trace=True)  # fmt: skip
    consumer.subscribe(topic)
    consumer.start()
    try:
        wait_for(lambda: len(attempts) >= 3, timeout=20, what="a retried consume")
    finally:
        consumer.shutdown()

    line = trace_of(broker.namesrv, sent.msg_id, lambda t: t["produce"] and
                    len([c for c in t["consume"] if c["costTime"] is not None]) == 2)  # fmt: skip
    [pub] = line["produce"]
    assert (pub["group"], pub["topic"], pub["tags"], pub["keys"], pub["status"]) == (
        "TracePG",
        topic,
        "Paid",
        "order-1",
        "success",
    )
    assert pub["offsetMsgId"] == sent.offset_msg_id and pub["msgType"] == "Normal_Msg"
    assert (pub["queueId"], pub["queueOffset"]) == (sent.message_queue.queue_id,
                                                    sent.queue_offset)  # fmt: skip
    assert pub["storeHost"] == broker.brokers["broker-a"].address
    first, retry = line["consume"]
    assert first["group"] == retry["group"] == "TraceCG"
    assert (first["retryTimes"], first["status"], first["result"]) == (0, "failed", "FAILED")
    assert (retry["retryTimes"], retry["status"], retry["result"]) == (1, "success", "SUCCESS")
    assert first["clientHost"] and pub["clientHost"]
    assert line["transactions"] == []

    # found by the message's user key too (the trace message's keys carry it)
    with Admin(broker.namesrv) as admin:
        assert admin.query_msg_by_key(TRACE_TOPIC, "order-1")
    async_line = trace_of(broker.namesrv, async_sent.msg_id,
                          lambda t: t["produce"] and t["consume"])  # fmt: skip
    assert async_line["produce"][0]["group"] == "TracePG"

    out = CliRunner().invoke(cli, ["admin", "query-msg-trace-by-id", "-i", sent.msg_id, "-n",
                                   broker.namesrv, "--json"])  # fmt: skip
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["produce"][0]["offsetMsgId"] == sent.offset_msg_id
    wide = CliRunner(env={"COLUMNS": "250"}).invoke(
        cli, ["admin", "query-msg-trace-by-id", "-i", sent.msg_id, "-n", broker.namesrv]
    )
    assert wide.exit_code == 0, wide.output
    assert "TracePG" in wide.output and "TraceCG" in wide.output and "FAILED" in wide.output
    none = CliRunner().invoke(cli, ["admin", "query-msg-trace-by-id", "-i", "0" * 32, "-n",
                                    broker.namesrv])  # fmt: skip
    assert none.exit_code == 0 and "no trace" in none.output


class Commit:
    def execute_local_transaction(self, msg, arg):
        return LocalTransactionState.COMMIT_MESSAGE

    def check_local_transaction(self, msg):
        return LocalTransactionState.COMMIT_MESSAGE


def test_a_transaction_and_a_lite_pull_are_traced_to_a_topic_of_choice(broker):
    topic, trace_topic = "TracedPayments", "PaymentTrace"
    traced = {"enable_msg_trace": True, "trace_topic": trace_topic}
    with TransactionProducer("TraceTxPG", broker.namesrv, listener=Commit(), **traced) as producer:
        result = producer.send_message_in_transaction(Message(topic, b"paid", keys=["pay-7"]))
    with PullConsumer("TraceLiteCG", broker.namesrv, consume_from_where="FIRST_OFFSET",
                      **traced) as consumer:  # fmt: skip
        consumer.subscribe(topic)
        consumer.start()
        got = []
        wait_for(lambda: got.extend(consumer.poll(0.5)) or got, timeout=20,
                 what="the committed message")  # fmt: skip
    assert got[0].msg_id == result.msg_id

    def ready(t: dict) -> bool:
        return bool(t["produce"] and t["transactions"] and t["consume"])

    line = trace_of(broker.namesrv, result.msg_id, ready, trace_topic)
    assert line["produce"][0]["msgType"] == "Trans_Msg_Half"
    [end] = line["transactions"]
    assert (end["group"], end["transactionState"], end["fromTransactionCheck"]) == (
        "TraceTxPG",
        "COMMIT_MESSAGE",
        False,
    )
    [consume] = line["consume"]
    assert (consume["group"], consume["status"], consume["result"]) == ("TraceLiteCG", "success",
                                                                        "SUCCESS")  # fmt: skip
