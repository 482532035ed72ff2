"""Scenarios of the official RocketMQ 5 Python client (``rocketmq-python-client``) against a
shmq proxy, run by ``test_official_client.py`` in a virtualenv of its own: the client's
generated protos register the same protobuf names as shmq's stubs, so it never shares a
process with shmq.

Usage: ``python official_client.py <ip:port> <scenario>...``. The scenarios run at once,
each on a topic of its own (``Oc<Name>``, created by the test) and a group of its own, and
each prints one JSON line ``{"scenario": name, ...}`` of what happened; the test judges it.
A scenario that raises prints ``{"scenario": name, "error": "..."}``.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
    TransactionChecker,
    TransactionResolution,
)

INVISIBLE_S = 20
AWAIT_S = 5  # the proxy's shortest long polling: a receive that finds nothing lasts this long
DEADLINE_S = 30  # a scenario's longest wait for what it expects


def config(endpoint: str) -> ClientConfiguration:
    return ClientConfiguration(endpoint, Credentials(), request_timeout=5)


def message(topic: str, body: str, tag: str = "A", **system: Any) -> Message:
    msg = Message()
    msg.topic = topic
    msg.body = body.encode()
    msg.tag = tag
    msg.keys = body
    for name, value in system.items():
        setattr(msg, name, value)
    return msg


def send_all(endpoint: str, topic: str, messages: list[Message]) -> list[str]:
    producer = Producer(config(endpoint), (topic,))
    producer.startup()
    try:
        return [producer.send(m).message_id for m in messages]
    finally:
        producer.shutdown()


def simple_consumer(endpoint: str, group: str, topic: str, tag: str = "*") -> SimpleConsumer:
    consumer = SimpleConsumer(config(endpoint), group, {topic: FilterExpression(tag)},
                              await_duration=AWAIT_S)  # fmt: skip
    consumer.startup()
    return consumer


def receive(consumer: SimpleConsumer, count: int, ack: bool = True) -> list[Message]:
    """Receive until ``count`` messages came (or the deadline), acking each."""
    got: list[Message] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(got) < count and time.monotonic() < deadline:
        for msg in consumer.receive(32, INVISIBLE_S):
            got.append(msg)
            if ack:
                consumer.ack(msg)
    return got


def described(msg: Message) -> dict[str, Any]:
    return {"id": msg.message_id, "body": msg.body.decode(), "tag": msg.tag,
            "group": msg.message_group, "attempt": msg.delivery_attempt,
            "keys": sorted(msg.keys or ())}  # fmt: skip


def scenario_normal(endpoint: str) -> dict[str, Any]:
    """Normal messages: each received once, acked ones not again; a tag filter."""
    topic = "OcNormal"
    sent = send_all(endpoint, topic, [message(topic, f"n{i}", tag="A" if i % 4 else "B")
                                      for i in range(12)])  # fmt: skip
    consumer = simple_consumer(endpoint, "oc-normal", topic, "A || C")
    try:
        got = receive(consumer, 9)
        again = consumer.receive(32, INVISIBLE_S)
    finally:
        consumer.shutdown()
    return {"sent": sent, "received": [described(m) for m in got],
            "again": [described(m) for m in again]}  # fmt: skip


def scenario_fifo(endpoint: str) -> dict[str, Any]:
    """FIFO messages of two message groups, interleaved."""
    topic = "OcFifo"
    messages = [message(topic, f"{g}-{i}", message_group=g) for i in range(6) for g in "xy"]
    sent = send_all(endpoint, topic, messages)
    consumer = simple_consumer(endpoint, "oc-fifo", topic)
    try:
        got = receive(consumer, len(sent))
    finally:
        consumer.shutdown()
    return {"sent": sent, "received": [described(m) for m in got]}


def scenario_delay(endpoint: str) -> dict[str, Any]:
    """A delay message (delivery timestamp 3 s ahead) comes at its time, not before. The
    client (5.1.2) writes ``delivery_timestamp`` into the protobuf Timestamp's seconds as
    given, so it is given in seconds (in milliseconds RocketMQ's proxy refuses it too)."""
    topic = "OcDelay"
    deliver_s = int(time.time()) + 3
    sent = send_all(endpoint, topic, [message(topic, "later", delivery_timestamp=deliver_s)])
    consumer = simple_consumer(endpoint, "oc-delay", topic)
    try:
        got = receive(consumer, 1)
        received_ms = int(time.time() * 1000)
    finally:
        consumer.shutdown()
    return {"sent": sent, "received": [described(m) for m in got],
            "deliver_ms": deliver_s * 1000, "received_ms": received_ms}  # fmt: skip


class Checker(TransactionChecker):
    """Commits the halves whose body starts with "check", records every check."""

    def __init__(self) -> None:
        self.checked: list[str] = []

    def check(self, message: Message) -> TransactionResolution:
        body = message.body.decode()
        self.checked.append(body)
        commit = body.startswith("check")
        return TransactionResolution.COMMIT if commit else TransactionResolution.ROLLBACK


def scenario_transaction(endpoint: str) -> dict[str, Any]:
    """Halves committed, rolled back, and left open for the broker's check-back, which the
    producer's checker answers (commit)."""
    topic = "OcTrans"
    checker = Checker()
    producer = Producer(config(endpoint), (topic,), checker)
    producer.startup()
    consumer = simple_consumer(endpoint, "oc-trans", topic)
    try:
        for body in ("commit", "rollback", "check"):
            transaction = producer.begin_transaction()
            producer.send(message(topic, body), transaction)
            if body == "commit":
                transaction.commit()
            elif body == "rollback":
                transaction.rollback()
        got = receive(consumer, 2)
        again = consumer.receive(32, INVISIBLE_S)
    finally:
        consumer.shutdown()
        producer.shutdown()
    return {"received": [described(m) for m in got + again], "checked": checker.checked}


def scenario_invisible(endpoint: str) -> dict[str, Any]:
    """A message whose invisible time is cut to 1 s comes back (attempt 2); acked, it
    does not come again."""
    topic = "OcInvisible"
    sent = send_all(endpoint, topic, [message(topic, "again")])
    consumer = simple_consumer(endpoint, "oc-invisible", topic)
    try:
        first = receive(consumer, 1, ack=False)
        for msg in first:
            consumer.change_invisible_duration(msg, 1)
        second = receive(consumer, 1)
        again = consumer.receive(32, INVISIBLE_S)
    finally:
        consumer.shutdown()
    return {"sent": sent, "first": [described(m) for m in first],
            "second": [described(m) for m in second],
            "again": [described(m) for m in again]}  # fmt: skip


class Collector(MessageListener):
    """Every message consumed; the first delivery of "fail" fails (it must come again)."""

    def __init__(self) -> None:
        self.consumed: list[Message] = []
        self.lock = threading.Lock()

    def consume(self, message: Message) -> ConsumeResult:
        with self.lock:
            self.consumed.append(message)
        if message.body == b"fail" and message.delivery_attempt == 1:
            return ConsumeResult.FAILURE
        return ConsumeResult.SUCCESS


def scenario_push(endpoint: str) -> dict[str, Any]:
    """The push consumer: every message consumed, a failed one again (attempt 2).

    The failed message comes back through the group's retry topic, and a POP waiting on the
    topic is not woken by it (as in RocketMQ with v1 retry topics): the consumer's next
    receive would wait out its long polling (20 s), so a "nudge" message is sent every
    2 s until the failed one is back."""
    topic = "OcPush"
    listener = Collector()
    consumer = PushConsumer(config(endpoint), "oc-push", listener, {topic: FilterExpression()},
                            consumption_thread_count=2)  # fmt: skip
    consumer.startup()
    producer = Producer(config(endpoint), (topic,))
    producer.startup()
    try:
        bodies = [f"p{i}" for i in range(5)] + ["fail"]
        sent = [producer.send(message(topic, b)).message_id for b in bodies]
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            time.sleep(2)
            with listener.lock:
                attempts = [m.delivery_attempt for m in listener.consumed if m.body == b"fail"]
            if len(attempts) > 1:
                break
            sent.append(producer.send(message(topic, "nudge")).message_id)
        time.sleep(2)  # anything more would be a duplicate
    finally:
        producer.shutdown()
        consumer.shutdown()
    return {"sent": sent, "consumed": [described(m) for m in listener.consumed]}


SCENARIOS: dict[str, Callable[[str], dict[str, Any]]] = {
    "normal": scenario_normal,
    "fifo": scenario_fifo,
    "delay": scenario_delay,
    "transaction": scenario_transaction,
    "invisible": scenario_invisible,
    "push": scenario_push,
}


def run(endpoint: str, name: str) -> dict[str, Any]:
    started = time.monotonic()
    try:
        result = SCENARIOS[name](endpoint)
    except Exception:
        result = {"error": traceback.format_exc()}
    result.update(scenario=name, seconds=round(time.monotonic() - started, 2))
    return result


def main(endpoint: str, names: list[str]) -> None:
    """The scenarios at once (each mostly waits: on long polls, a delay, a check-back)."""
    with ThreadPoolExecutor(len(names)) as pool:
        for result in pool.map(run, [endpoint] * len(names), names):
            print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
