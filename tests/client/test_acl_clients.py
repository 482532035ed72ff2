"""Clients against a broker with ACL on (``aclEnable=true``): with an account's credentials
the admin, producers (shared memory and TCP) and push consumers (both data paths) work, as
every request they send is signed; with a wrong secret each fails with a shmq error naming
the refused signature."""

from __future__ import annotations

import logging
import threading

import pytest
from waiting import wait_for

from e2e_helpers import cluster, shm_entries
from shmq.client.admin.admin import Admin
from shmq.client.consumer.push import PushConsumer
from shmq.client.producer.producer import Producer
from shmq.client.types import ConsumeResult
from shmq.errors import ResponseError, SendError
from shmq.message import Message

ADMIN = ("shmqAdmin", "admin-secret-1")
APP = ("orderApp", "app-secret-1")
WRONG = ("orderApp", "not-the-secret")
NARROW = ("narrowApp", "narrow-secret-1")
PLAIN_ACL = f"""\
accounts:
  - accessKey: {ADMIN[0]}
    secretKey: {ADMIN[1]}
    admin: true
  - accessKey: {APP[0]}
    secretKey: {APP[1]}
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: PUB|SUB
  - accessKey: {NARROW[0]}
    secretKey: {NARROW[1]}
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - AclOrders=PUB
"""
REFUSED = "Check signature failed for accessKey=orderApp"


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory):
    before = shm_entries()
    tmp = tmp_path_factory.mktemp("acl")
    (tmp / "plain_acl.yml").write_text(PLAIN_ACL)
    with cluster(tmp, aclEnable="true", aclFile="plain_acl.yml") as c:
        with Admin(c.namesrv, credentials=ADMIN) as admin:
            admin.update_topic("AclOrders", read_queue_nums=2, write_queue_nums=2)
            admin.update_topic("AclSecret", read_queue_nums=1, write_queue_nums=1)
            wait_for(lambda: {"AclOrders", "AclSecret"} <= set(admin.topic_list()),
                     what="the topics routed")  # fmt: skip
        yield c
    assert shm_entries() - before == set()


def test_signed_clients_produce_and_consume(acl_broker):
    namesrv = acl_broker.namesrv
    for transport in ("shm", "tcp"):
        with Producer(f"acl-p-{transport}", namesrv, credentials=APP,
                      transport=transport) as producer:  # fmt: skip
            for i in range(5):
                producer.send(Message("AclOrders", f"{transport}-{i}"))
    got: dict[str, set[str]] = {"shm": set(), "tcp": set()}
    lock = threading.Lock()

    def listener_of(transport: str):
        def listener(msgs, ctx):
            with lock:
                got[transport].update(m.body.decode() for m in msgs)
            return ConsumeResult.CONSUME_SUCCESS

        return listener

    consumers = [
        PushConsumer(f"acl-c-{transport}", namesrv, listener=listener_of(transport),
                     credentials=APP, transport=transport,
                     consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        for transport in ("shm", "tcp")
    ]  # fmt: skip
    try:
        for consumer in consumers:
            consumer.subscribe("AclOrders")
            consumer.start()
        want = {f"{t}-{i}" for t in ("shm", "tcp") for i in range(5)}
        wait_for(lambda: got == {"shm": want, "tcp": want}, what="each group to consume all")
    finally:
        for consumer in consumers:
            consumer.close()
    with Admin(namesrv, credentials=ADMIN) as admin:
        progress = admin.consumer_progress("acl-c-tcp", "AclOrders")
        assert progress.diff_total == 0


def test_a_wrong_secret_gets_a_clear_error(acl_broker, caplog):
    """Admin calls and sends raise; a push consumer starts and logs each refused heartbeat
    and rebalance, as RocketMQ's does (it cannot tell a broker's refusal from a broker
    that is down for a moment)."""
    namesrv = acl_broker.namesrv
    with Admin(namesrv, credentials=WRONG) as admin, pytest.raises(ResponseError, match=REFUSED):
        admin.update_topic("AclOther")
    for transport in ("tcp", "shm"):  # shm: asking the broker for its store is refused
        producer = Producer(f"acl-wrong-{transport}", namesrv, credentials=WRONG,
                            transport=transport, retry_times_when_send_failed=0)  # fmt: skip
        with producer, pytest.raises(SendError, match=REFUSED):
            producer.send(Message("AclOrders", b"refused"))
    with Admin(namesrv) as admin, pytest.raises(ResponseError, match="No accessKey"):
        admin.update_topic("AclOther")
    consumer = PushConsumer("acl-wrong-c", namesrv, credentials=WRONG, transport="tcp",
                            listener=lambda msgs, ctx: ConsumeResult.CONSUME_SUCCESS)  # fmt: skip
    consumer.subscribe("AclOrders")
    with caplog.at_level(logging.WARNING, logger="shmq.client.instance"):
        consumer.start()
        consumer.close()
    assert REFUSED in caplog.text and "heartbeat" in caplog.text


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_a_producer_writes_only_the_topics_its_account_may_publish(acl_broker, transport):
    """Also through its shared-memory ring, which the request check never sees: the writer
    refuses a record for a topic the ring's account lacks PUB on, and stores nothing."""
    namesrv = acl_broker.namesrv
    with Admin(namesrv, credentials=ADMIN) as admin:
        before = [q.max_offset for q in admin.topic_status("AclSecret")]
    with Producer(f"narrow-{transport}", namesrv, credentials=NARROW,
                  transport=transport, retry_times_when_send_failed=0) as producer:  # fmt: skip
        assert producer.send(Message("AclOrders", b"allowed")).send_status.name == "SEND_OK"
        with pytest.raises(SendError, match=r"may not publish|No default permission"):
            producer.send(Message("AclSecret", b"refused"))
    with Admin(namesrv, credentials=ADMIN) as admin:
        assert [q.max_offset for q in admin.topic_status("AclSecret")] == before
