"""The proxy's consumer side against a real broker's POP: long-polling receives, acks,
invisible-time changes, redelivery, the DLQ, tag filtering and FIFO order."""

from __future__ import annotations

import threading
import time

import grpc
from grpc_client import message, millis

from shmq.client.admin.admin import Admin
from shmq.proxy.v2 import definition_pb2 as pb
from shmq.proxy.v2 import service_pb2 as spb

Code = pb.Code


def _receive_all(c, group: str, topic: str, count: int, **kw) -> list[pb.Message]:
    got: list[pb.Message] = []
    deadline = time.monotonic() + 60
    while len(got) < count and time.monotonic() < deadline:
        status, messages = c.receive(group, topic, **kw)
        assert status.code in (Code.OK, Code.MESSAGE_NOT_FOUND), status
        got += messages
    return got


def test_receive_ack_and_long_polling(client):
    c = client()
    c.subscribe("g-recv", "Recv")
    sent = c.send(*(message("Recv", b"m%d" % i, tag="A") for i in range(3)))
    assert sent.status.code == Code.OK
    got = _receive_all(c, "g-recv", "Recv", 3)
    assert sorted(m.body for m in got) == [b"m0", b"m1", b"m2"]
    sp = got[0].system_properties
    assert sp.delivery_attempt == 1 and sp.tag == "A" and sp.receipt_handle
    assert sp.body_digest.type == pb.MD5 and sp.body_digest.checksum.isupper()
    acked = c.ack("g-recv", "Recv", *got)
    assert acked.status.code == Code.OK, acked
    started = time.monotonic()
    status, messages = c.receive("g-recv", "Recv", polling_ms=5_000)
    assert (status.code, status.message, messages) == (Code.MESSAGE_NOT_FOUND, "no new message", [])
    assert time.monotonic() - started >= 4.0  # it waited (long polling)
    # a message sent while a receive waits ends the wait
    threading.Timer(1.0, c.send, (message("Recv", b"late"),)).start()
    later = _receive_all(c, "g-recv", "Recv", 1, polling_ms=15_000)
    assert [m.body for m in later] == [b"late"]
    c.ack("g-recv", "Recv", *later)


def test_change_invisible_duration_brings_the_message_back(client):
    c = client()
    c.subscribe("g-inv", "Invisible")
    c.send(message("Invisible", b"again"))
    (first,) = _receive_all(c, "g-inv", "Invisible", 1)
    changed = c.call("ChangeInvisibleDuration", spb.ChangeInvisibleDurationRequest(
        group=pb.Resource(name="g-inv"), topic=pb.Resource(name="Invisible"),
        receipt_handle=first.system_properties.receipt_handle,
        invisible_duration=millis(1_000),
        message_id=first.system_properties.message_id))  # fmt: skip
    assert changed.status.code == Code.OK, changed
    assert changed.receipt_handle != first.system_properties.receipt_handle
    (again,) = _receive_all(c, "g-inv", "Invisible", 1)
    assert again.body == b"again"
    assert again.system_properties.delivery_attempt == 2
    assert c.ack("g-inv", "Invisible", again).status.code == Code.OK


def test_expired_and_forged_receipt_handles(client):
    c = client()
    forged = pb.Message(
        system_properties=pb.SystemProperties(message_id="x", receipt_handle="not a handle")
    )
    response = c.ack("g-bad", "Ack", forged)
    assert response.entries[0].status.code == Code.INVALID_RECEIPT_HANDLE
    old = "0 1000 10000 0 0 broker-a 0 0 0"
    expired = pb.Message(system_properties=pb.SystemProperties(message_id="x", receipt_handle=old))
    response = c.ack("g-bad", "Ack", expired)
    assert (response.entries[0].status.code, response.entries[0].status.message) == (
        Code.INVALID_RECEIPT_HANDLE, "receipt handle is expired")  # fmt: skip
    assert response.status.code == Code.INVALID_RECEIPT_HANDLE
    mixed = c.ack("g-bad", "Ack", forged, expired)
    assert [e.status.code for e in mixed.entries] == [Code.INVALID_RECEIPT_HANDLE] * 2
    bad_group = c.ack("CID_RMQ_SYS_X", "Ack", forged)
    assert bad_group.status.code == Code.ILLEGAL_CONSUMER_GROUP


def test_forward_to_dead_letter_queue(client):
    c = client()
    c.subscribe("g-dlq", "Dlq")
    c.send(message("Dlq", b"dead"))
    (msg,) = _receive_all(c, "g-dlq", "Dlq", 1)
    request = spb.ForwardMessageToDeadLetterQueueRequest(
        group=pb.Resource(name="g-dlq"), topic=pb.Resource(name="Dlq"),
        receipt_handle=msg.system_properties.receipt_handle,
        message_id=msg.system_properties.message_id, delivery_attempt=1,
        max_delivery_attempts=17)  # fmt: skip
    forwarded = c.call("ForwardMessageToDeadLetterQueue", request)
    assert forwarded.status.code == Code.OK, forwarded
    reader = client()
    reader.subscribe("g-dlq-reader", "%DLQ%g-dlq")
    (dead,) = _receive_all(reader, "g-dlq-reader", "%DLQ%g-dlq", 1)
    assert dead.body == b"dead"
    _status, left = c.receive("g-dlq", "Dlq", polling_ms=5_000)
    assert left == []


def test_tags_the_subscription_does_not_take_are_acked(client):
    c = client()
    c.subscribe("g-tags", "Tags")
    c.send(message("Tags", b"no", tag="B"), message("Tags", b"yes", tag="A"))
    got = _receive_all(c, "g-tags", "Tags", 1, expression="A")
    assert [m.body for m in got] == [b"yes"]


def test_sql92_filter_expression(client):
    """A SQL92 FilterExpression: the subscription registers, the broker pops only what
    matches; a bad expression is ILLEGAL_FILTER_EXPRESSION naming its position."""
    c = client()
    expression = "amount > 10 AND region = 'eu'"
    assert c.subscribe("g-sql", "Sql", sql=expression).status.code == Code.OK
    for amount, region in ((5, "eu"), (20, "eu"), (30, "us"), (40, "eu")):
        m = message("Sql", b"%d-%s" % (amount, region.encode()))
        m.user_properties.update({"amount": str(amount), "region": region})
        assert c.send(m).status.code == Code.OK
    got = _receive_all(c, "g-sql", "Sql", 2, expression=expression, sql=True)
    assert sorted(m.body for m in got) == [b"20-eu", b"40-eu"]
    assert c.ack("g-sql", "Sql", *got).status.code == Code.OK
    status, _ = c.receive("g-sql", "Sql", expression="amount >", sql=True)
    assert status.code == Code.ILLEGAL_FILTER_EXPRESSION and "position" in status.message
    bad = client().subscribe("g-sql-bad", "Sql", sql="region IN (")
    assert isinstance(bad, grpc.RpcError) and bad.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "position" in bad.details()


def test_fifo_order_per_message_group_across_two_consumers(client):
    producer = client()
    for i in range(6):
        group = "order-a" if i % 2 else "order-b"
        r = producer.send(message("FifoRecv", b"%s-%d" % (group.encode(), i),
                                  message_group=group, message_type=pb.FIFO))  # fmt: skip
        assert r.status.code == Code.OK
    seen: list[bytes] = []
    lock = threading.Lock()

    def consume(c) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with lock:
                if len(seen) >= 6:
                    return
            _status, messages = c.receive("g-fifo", "FifoRecv", batch=1, polling_ms=5_000)
            for m in messages:
                with lock:
                    seen.append(m.body)
                assert c.ack("g-fifo", "FifoRecv", m).status.code == Code.OK

    consumers = [client(), client()]
    for c in consumers:
        c.subscribe("g-fifo", "FifoRecv", fifo=True)
    threads = [threading.Thread(target=consume, args=(c,)) for c in consumers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(seen) == sorted(b"%s-%d" % (b"order-a" if i % 2 else b"order-b", i)
                                  for i in range(6))  # fmt: skip
    for group in (b"order-a", b"order-b"):
        numbers = [int(b.split(b"-")[-1]) for b in seen if b.startswith(group)]
        assert numbers == sorted(numbers)


def test_a_receive_that_is_never_read_does_not_hold_the_proxy(client):
    c = client()
    c.subscribe("g-never", "Never")
    c.send(*(message("Never", b"x" * 100_000) for _ in range(20)))
    request = spb.ReceiveMessageRequest(
        group=pb.Resource(name="g-never"),
        message_queue=pb.MessageQueue(topic=pb.Resource(name="Never")),
        batch_size=32,
        invisible_duration=millis(30_000),
        long_polling_timeout=millis(5_000),
    )
    calls = [c.stub.ReceiveMessage(request, metadata=c.metadata, timeout=60) for _ in range(3)]
    other = client()
    assert other.send(message("Normal")).status.code == Code.OK  # the proxy still serves
    for call in calls:
        call.cancel()


def test_grpc_consumers_are_listed_by_the_brokers_admin(client, broker):
    """Each gRPC consumer is a member of its group on the broker (its own client id and
    subscription), until it says goodbye; a bad tag expression is refused up front."""
    consumers = [client(), client()]
    for c in consumers:
        assert c.subscribe("g-admin", "Admin").status.code == Code.OK
    with Admin(broker.namesrv) as admin:
        listed = admin.consumer_connection("g-admin")
        assert sorted(m["clientId"] for m in listed["connectionSet"]) == sorted(
            c.client_id for c in consumers
        )
        assert listed["consumeType"] == "CONSUME_ACTIVELY"
        assert listed["subscriptionTable"]["Admin"]["subString"] == "*"
        gone = consumers[0].call("NotifyClientTermination", spb.NotifyClientTerminationRequest(
            group=pb.Resource(name="g-admin")))  # fmt: skip
        assert gone.status.code == Code.OK
        listed = admin.consumer_connection("g-admin")
        assert [m["clientId"] for m in listed["connectionSet"]] == [consumers[1].client_id]
    bad = client().open_telemetry(pb.Settings(
        client_type=pb.SIMPLE_CONSUMER, subscription=pb.Subscription(
            group=pb.Resource(name="g-admin"), subscriptions=[pb.SubscriptionEntry(
                topic=pb.Resource(name="Admin"),
                expression=pb.FilterExpression(type=pb.TAG, expression="||"))])))  # fmt: skip
    assert isinstance(bad, grpc.RpcError) and bad.code() == grpc.StatusCode.INVALID_ARGUMENT
