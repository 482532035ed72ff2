"""A traced producer's Pubs are batched: each send's future queues itself when it settles with
a result, the dispatcher's thread formats whole runs of them in RocketMQ's trace format (the
same text the context encoder writes) and packs them into trace messages of 20, and a full
queue drops rather than blocks. Against a real broker: a traced batch send and a delayed
async send are found by their message ids."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

from waiting import wait_for

from shmq.client.admin.admin import Admin
from shmq.client.producer.async_completion import SendFuture
from shmq.client.producer.producer import Producer
from shmq.client.trace.dispatcher import AsyncTraceDispatcher
from shmq.client.trace.encoder import TRACE_TOPIC, MessageType, TraceType, decode, encode
from shmq.client.trace.send_hook import PubFuture, SendMessageTraceHook
from shmq.client.types import MessageQueue, SendResult, SendStatus
from shmq.errors import ClientError, NoRouteError, ResponseError, SendError
from shmq.message import Message, offset_msg_id

HOST = bytes([10, 0, 0, 7, 0, 0, 0x2A, 0x9F])  # 10.0.0.7:10911
MQ = MessageQueue("TopicA", "broker-a", 1)


class Recorder:
    """A trace producer that keeps what it is asked to send."""

    def __init__(self) -> None:
        self.sent: list[Message] = []
        self.closed = False

    def send_async(self, msg: Message) -> Future:
        self.sent.append(msg)
        future: Future = Future()
        future.set_result(None)
        return future

    def close(self) -> None:
        self.closed = True


def traced(**options) -> tuple[SendMessageTraceHook, Recorder]:
    """A hook whose dispatcher's thread is stopped: the test drains it (``flush``)."""
    recorder = Recorder()
    dispatcher = AsyncTraceDispatcher(TRACE_TOPIC, recorder, polling_ms=60_000, **options)
    dispatcher.flush()
    return SendMessageTraceHook("PG", dispatcher), recorder


def answered(i: int, status: SendStatus = SendStatus.SEND_OK) -> SendResult:
    return SendResult.answered(status, f"7F00000100002A9F{i:016X}", MQ, i, HOST, 4096 * i)


def test_a_formatted_run_is_the_encoders_text():
    hook, _ = traced()
    msgs = [
        Message("TopicA", b"plain"),
        Message("TopicA", b"tagged", tags="Paid", keys=["order-1", "order-2"]),
        Message("TopicA", b"later", delay_level=3),
    ]
    results = [answered(1), answered(2, SendStatus.FLUSH_DISK_TIMEOUT),
               SendResult(SendStatus.SEND_OK, "M3", offset_msg_id(HOST, 77), MQ, 3)]  # fmt: skip
    before = int(time.time() * 1000)
    for msg, result in zip(msgs, results, strict=True):
        future = hook.future(msg)
        assert isinstance(future, PubFuture)
        future.settle(result)
    after = int(time.time() * 1000)
    records, keys = hook.pub_records(hook.facts, 3)
    assert not hook.facts
    contexts = [ctx for record in records for ctx in decode(record)]
    assert [encode(ctx) for ctx in contexts] == records  # byte for byte the encoder's text
    for ctx, msg, result in zip(contexts, msgs, results, strict=True):
        bean = ctx.beans[0]
        assert ctx.trace_type is TraceType.Pub and ctx.group_name == "PG"
        assert before - 1 <= ctx.time_stamp <= after + 1 and 0 <= ctx.cost_time <= after - before
        assert (bean.topic, bean.msg_id, bean.body_length) == (msg.topic, result.msg_id,
                                                               len(msg.body))  # fmt: skip
        assert (bean.store_host, bean.offset_msg_id) == ("10.0.0.7:10911", result.offset_msg_id)
    assert [c.success for c in contexts] == [True, False, True]
    assert [c.beans[0].msg_type for c in contexts] == [0, 0, MessageType.Delay_Msg]
    assert (contexts[1].beans[0].tags, contexts[1].beans[0].keys) == ("Paid", "order-1 order-2")
    assert (contexts[0].beans[0].tags, contexts[0].beans[0].keys) == ("null", "null")
    assert keys == [results[0].msg_id, f"{results[1].msg_id} order-1 order-2", "M3"]


def test_runs_are_packed_into_trace_messages_of_twenty():
    hook, recorder = traced()
    results = [answered(i) for i in range(45)]
    for i, result in enumerate(results):
        hook.future(Message("TopicA", b"x", keys=[f"k{i}"] if i % 2 else [])).settle(result)
    hook.shutdown()
    assert recorder.closed
    assert [len(decode(m.body.decode())) for m in recorder.sent] == [20, 20, 5]
    assert hook.dispatcher.stats() == {"sent": 3, "discarded": 0, "waiting": 0}
    first = recorder.sent[0]
    user_keys = [f"k{i}" for i in range(1, 20, 2)]
    assert first.topic == TRACE_TOPIC
    assert first.keys == sorted([r.msg_id for r in results[:20]] + user_keys)
    ids = [ctx.beans[0].msg_id for m in recorder.sent for ctx in decode(m.body.decode())]
    assert ids == [r.msg_id for r in results]


def test_only_a_send_settled_with_a_result_is_traced_once():
    hook, _ = traced()
    failed = hook.future(Message("TopicA", b"x"))
    failed.settle(exc=SendError("gone"))
    twice = hook.future(Message("TopicA", b"x"))
    assert twice.settle(answered(1)) and not twice.settle(answered(2))
    waited = hook.future(Message("TopicA", b"x"))  # settled through the condition
    got = []
    waiter = threading.Thread(target=lambda: got.append(waited.result(10)))
    waiter.start()
    wait_for(lambda: waited._cond is not None, timeout=10, what="a waiter")
    waited.settle(answered(3))
    waiter.join(10)
    assert got == [answered(3)]
    assert list(hook.facts) == [twice, waited]
    assert type(hook.future(Message(TRACE_TOPIC, b"x"))) is SendFuture  # the trace isn't traced


def test_a_full_queue_drops_and_counts_rather_than_blocks():
    hook, _ = traced(queue_size=1, batch_size=2)  # two facts may wait
    futures = [hook.future(Message("TopicA", b"x")) for _ in range(4)]
    for i, future in enumerate(futures[:2]):
        future.settle(answered(i))
    late = [hook.future(Message("TopicA", b"x")) for _ in range(2)]
    assert all(type(f) is SendFuture for f in late)
    assert hook.dispatcher.stats()["discarded"] == 2


def test_a_batchs_messages_share_its_time():
    hook, _ = traced()
    results = [answered(i) for i in range(4)]

    def send_batch(messages, **options):
        time.sleep(0.04)
        return results

    traced_batch = hook._traced_send_batch(send_batch)
    began = time.monotonic()
    assert traced_batch([Message("TopicA", b"x") for _ in range(4)]) == results
    took_ms = (time.monotonic() - began) * 1000
    records, _ = hook.pub_records(hook.facts, 4)
    costs = [decode(record)[0].cost_time for record in records]
    assert all(10 <= cost <= took_ms / 4 for cost in costs), (costs, took_ms)


def test_a_traced_future_keeps_the_fields_of_its_pub_not_the_message():
    hook, _ = traced()
    msg = Message("TopicA", b"body", tags="Paid", keys=["order-1"], delay_level=2)
    future = hook.future(msg)
    assert all(value is not msg for value in vars(future).values())
    msg.tags, msg.keys = "Changed", []  # what was sent is traced, not what became of it
    future.settle(answered(1))
    [record], [keys] = hook.pub_records(hook.facts, 1)
    [ctx] = decode(record)
    assert (ctx.beans[0].tags, ctx.beans[0].keys, ctx.beans[0].body_length) == (
        "Paid", "order-1", 4)  # fmt: skip
    assert ctx.beans[0].msg_type == MessageType.Delay_Msg
    assert keys == f"{answered(1).msg_id} order-1"


class FailingRecorder(Recorder):
    """A trace producer whose every send fails once it is settled."""

    def send_async(self, msg: Message) -> Future:
        self.sent.append(msg)
        future: Future = Future()
        future.set_exception(SendError("the trace topic is gone"))
        return future


def test_a_failed_trace_send_is_logged_and_contexts_without_keys_are_packed(caplog):
    recorder = FailingRecorder()
    dispatcher = AsyncTraceDispatcher(TRACE_TOPIC, recorder, polling_ms=60_000)

    class Keyless:
        def transfer(self) -> tuple[str, set[str]]:
            return "Pub\u0001record\u0002", set()

    assert dispatcher.append(Keyless())
    dispatcher.shutdown()
    assert [(m.body, m.keys) for m in recorder.sent] == [(b"Pub\x01record\x02", [])]
    assert "the trace topic is gone" in caplog.text
    assert not dispatcher._in_flight


NOT_YET = (ClientError, ResponseError, NoRouteError)


def test_traced_batch_and_delayed_sends_reach_the_trace_topic(broker):
    topic = "TracedBatches"
    with Producer("TraceBatchPG", broker.namesrv, enable_msg_trace=True) as producer:
        batch = producer.send_batch([Message(topic, f"m{i}".encode()) for i in range(3)])
        delayed = producer.send_async(Message(topic, b"later", delay_level=1)).result(10)
    with Admin(broker.namesrv) as admin:
        for result, msg_type in [(batch[2], "Normal_Msg"), (delayed, "Delay_Msg")]:

            def produced(msg_id: str = result.msg_id) -> list:
                return admin.query_msg_trace_by_id(msg_id, TRACE_TOPIC)["produce"]

            [pub] = wait_for(produced, ignore=NOT_YET, timeout=20,
                             what=f"the trace of {result.msg_id}")  # fmt: skip
            assert (pub["group"], pub["msgType"], pub["status"]) == ("TraceBatchPG", msg_type,
                                                                     "success")  # fmt: skip
            assert pub["offsetMsgId"] == result.offset_msg_id
