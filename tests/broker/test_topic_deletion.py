"""Deleting a topic deletes its messages, with real processes: the writer records the
deletion in the CommitLog, reput (the master's, a slave's, recovery's after SIGKILL) purges
the topic's consume queues there, the group offsets on it go, and a re-created topic is
empty and goes on from queue offsets no old message had."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import threading
import time

import pytest
from test_ha import SLAVE, caught_up, sigkill_broker
from waiting import wait_for

from e2e_helpers import cluster, free_port, pull_all, shm_entries, shmq
from shmq import Message, Producer, PullConsumer
from shmq.broker.offset.consumer_offsets import parse as parse_offsets
from shmq.broker.topic.config import TopicConfigManager
from shmq.client.admin.admin import Admin
from shmq.errors import ResponseError, ShmqError
from shmq.names import DELETED_TOPIC_LOG
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RequestCode, ResponseCode
from spec_decoder import read_consume_queue

TOPIC = "Deleted"
UNITS = 1024  # the e2e clusters' consume-queue files (mappedFileSizeConsumeQueue 20 KiB)
LIFE = UNITS + 1  # the first offset of a queue's next life: after the file's blank unit


def send(producer: Producer, tag: str, count: int) -> dict[bytes, int]:
    """``count`` messages over the topic's queues: body → queue offset."""
    sent = {}
    for i in range(count):
        body = f"{tag}-{i}".encode()
        sent[body] = producer.send(Message(TOPIC, body, keys=["same-key"])).queue_offset
    return sent


def poll_until(consumer: PullConsumer, count: int) -> list[bytes]:
    """The bodies ``consumer`` polls until it has ``count`` of them."""
    got: list[bytes] = []
    wait_for(lambda: got.extend(m.body for m in consumer.poll(0.5)) or len(got) >= count,
             interval=0, what=f"{count} messages polled")  # fmt: skip
    return got


def offsets_file(store: str) -> dict:
    with open(os.path.join(store, "config", "consumerOffset.json")) as f:
        return parse_offsets(f.read())  # RocketMQ's shape: bare integer queue ids


def cq_files(store: str, queue_id: int) -> list[int]:
    names = os.listdir(os.path.join(store, "consumequeue", TOPIC, str(queue_id)))
    return sorted(int(n) // 20 for n in names)


def test_a_deleted_topic_comes_back_empty_and_its_offsets_go_on(tmp_path):
    before = shm_entries()
    with cluster(tmp_path) as c, Admin(c.namesrv) as admin:
        c.create_topic(TOPIC, 2)
        with Producer("del-p", c.namesrv) as producer:
            old = send(producer, "old", 40)
            assert sorted(old.values()) == sorted(list(range(20)) * 2)
            with PullConsumer("del-live", c.namesrv, auto_commit=False,
                              consume_from_where="FIRST_OFFSET") as live:  # fmt: skip
                live.subscribe(TOPIC)
                live.start()
                assert sorted(poll_until(live, 40)) == sorted(old)
                live.commit()
                wait_for(
                    lambda: f"{TOPIC}@del-live" in offsets_file(c.store),
                    interval=0.2,
                    ignore=FileNotFoundError,
                    what="the commit in consumerOffset.json",
                )

                assert admin.delete_topic(TOPIC) == ["broker-a"]
                assert f"{TOPIC}@del-live" not in offsets_file(c.store)
                admin.update_topic(TOPIC, read_queue_nums=2, write_queue_nums=2)
                new = send(producer, "new", 6)
                assert sorted(new.values()) == [LIFE, LIFE, LIFE + 1, LIFE + 1, LIFE + 2, LIFE + 2]
                # a consumer that held the old life goes on with the new one
                assert sorted(poll_until(live, 6)) == sorted(new)

        status = admin.topic_status(TOPIC)
        assert {(q.min_offset, q.max_offset) for q in status} == {(LIFE, LIFE + 3)}
        assert cq_files(c.store, 0) == cq_files(c.store, 1) == [UNITS]
        # new groups read the next life only, from its start: through the mapped files,
        # over TCP, and with CONSUME_FROM_LAST_OFFSET too (RocketMQ's rule for a young queue)
        assert pull_all(c.namesrv, "del-first", TOPIC, set(new)) == set(new)
        with PullConsumer("del-tcp", c.namesrv, transport="tcp",
                          consume_from_where="FIRST_OFFSET") as tcp:  # fmt: skip
            tcp.subscribe(TOPIC)
            tcp.start()
            assert sorted(poll_until(tcp, 6)) == sorted(new)
        with PullConsumer("del-last", c.namesrv, consume_from_where="LAST_OFFSET") as last:
            last.subscribe(TOPIC)
            last.start()
            assert sorted(poll_until(last, 6)) == sorted(new)
        # the index still holds the old life's keys; queries do not return those messages
        found = admin.query_msg_by_key(TOPIC, "same-key")
        assert sorted(base64.b64decode(m["body"]) for m in found) == sorted(new)
        # system topics are not deleted (RocketMQ 5's answer), the deletion log least of all:
        # Admin refuses before it asks anyone, the broker refuses a request that names one
        for system in (DELETED_TOPIC_LOG, "SCHEDULE_TOPIC_XXXX"):
            with pytest.raises(ResponseError, match=r"conflict with system topic") as err:
                admin.delete_topic(system, cluster="DefaultCluster")
            assert err.value.code == ResponseCode.SYSTEM_ERROR
        with RemotingClient() as client:
            for system in (DELETED_TOPIC_LOG, "DefaultCluster", "broker-a"):
                with pytest.raises(ResponseError, match=r"conflict with system topic") as err:
                    client.invoke_json(c.main.address, RequestCode.DELETE_TOPIC_IN_BROKER,
                                       {"topic": system})  # fmt: skip
                assert err.value.code == ResponseCode.SYSTEM_ERROR
        # the deletion log: one record, naming the topic
        log_units = read_consume_queue(c.store, DELETED_TOPIC_LOG, 0)
        assert len(log_units) == 1
    assert shm_entries() <= before


def test_sigkill_right_after_a_deletion(tmp_path):
    """The broker dies at once after the deletion was answered (reput may not have purged
    yet): recovery purges, and the writer's offsets go on from the next life."""
    before = shm_entries()
    with cluster(tmp_path) as c:
        c.create_topic(TOPIC, 2)
        with Producer("del-p", c.namesrv) as producer, Admin(c.namesrv) as admin:
            send(producer, "old", 30)
            admin.delete_topic(TOPIC)
            sigkill_broker(c, "broker-a")
        c.start_broker()
        with Producer("del-p2", c.namesrv) as producer, Admin(c.namesrv) as admin:
            admin.update_topic(TOPIC, read_queue_nums=2, write_queue_nums=2)
            new = send(producer, "new", 4)
            assert sorted(new.values()) == [LIFE, LIFE, LIFE + 1, LIFE + 1]
        assert pull_all(c.namesrv, "del-after", TOPIC, set(new)) == set(new)
        assert cq_files(c.store, 0) == cq_files(c.store, 1) == [UNITS]
    assert shm_entries() <= before


def test_a_slave_purges_where_its_master_did(tmp_path):
    before = shm_entries()
    with cluster(tmp_path, brokerRole="ASYNC_MASTER", haListenPort=free_port()) as c:
        c.create_topic(TOPIC, 2)
        slave = c.add_broker("slave", **SLAVE)
        with Producer("del-p", c.namesrv) as producer, Admin(c.namesrv) as admin:
            send(producer, "old", 30)
            caught_up(c)
            assert cq_files(slave.store, 0) == [0]
            admin.delete_topic(TOPIC)
            admin.update_topic(TOPIC, read_queue_nums=2, write_queue_nums=2)
            send(producer, "new", 4)
        caught_up(c)
        for qid in range(2):
            assert cq_files(slave.store, qid) == cq_files(c.store, qid) == [UNITS]
            master = read_consume_queue(c.store, TOPIC, qid)
            assert read_consume_queue(slave.store, TOPIC, qid) == master
            assert len(master) == 3  # the blank unit and two messages
    assert shm_entries() <= before


def test_a_topic_deleted_while_a_producer_sends_to_it(tmp_path):
    """A producer keeps sending while the topic is deleted (and auto-created again by its
    next send): each acknowledged message lies in one life by its queue offset; a new
    group reads exactly the messages of the new life, none of the old."""
    before = shm_entries()
    with cluster(tmp_path) as c, Admin(c.namesrv) as admin:
        c.create_topic(TOPIC, 2)
        acked: dict[bytes, tuple[int, int]] = {}  # body -> (queue id, queue offset)
        stop = threading.Event()

        def produce() -> None:
            with Producer("del-busy", c.namesrv, send_timeout=10) as producer:
                i = 0
                while not stop.is_set():
                    body = b"m-%d" % i
                    i += 1
                    with contextlib.suppress(ShmqError):  # refused while it is gone
                        r = producer.send(Message(TOPIC, body))
                        acked[body] = (r.message_queue.queue_id, r.queue_offset)

        sender = threading.Thread(target=produce)
        sender.start()
        try:
            wait_for(lambda: len(acked) >= 200, what="200 sends acknowledged")
            admin.delete_topic(TOPIC)
            wait_for(lambda: sum(qoff >= LIFE for _, qoff in list(acked.values())) >= 20,
                     what="20 sends acknowledged in the topic's next life")  # fmt: skip
        finally:
            stop.set()
            sender.join(30)
        new = {body for body, (_, qoff) in acked.items() if qoff >= LIFE}
        old = set(acked) - new
        assert old and new
        got = pull_all(c.namesrv, "del-busy-reader", TOPIC, new)
        assert got == new  # every acknowledged message of the new life, none of the old
        # one producer, sends in order: the deletion cut them once, old before new
        index = {body: int(body.split(b"-")[1]) for body in acked}
        assert max(index[b] for b in old) < min(index[b] for b in new)
    assert shm_entries() <= before


def test_clean_unused_topic_purges_what_no_config_names(tmp_path):
    """mqadmin cleanUnusedTopic: a topic that left topics.json while the broker was down
    keeps its messages until then; cleaning twice purges once."""
    before = shm_entries()
    with cluster(tmp_path) as c:
        c.create_topic(TOPIC, 2)
        c.create_topic("Kept", 1)
        with Producer("del-p", c.namesrv) as producer:
            send(producer, "old", 10)
            producer.send(Message("Kept", b"kept"))
        c.stop_broker()
        topics = TopicConfigManager(os.path.join(c.store, "config"))
        assert topics.delete(TOPIC)
        topics.persist()
        c.start_broker()
        with Admin(c.namesrv) as admin:
            assert admin.clean_unused_topic() == {"broker-a": [TOPIC]}
            assert admin.clean_unused_topic() == {"broker-a": []}  # no life after the next
            admin.update_topic(TOPIC, read_queue_nums=2, write_queue_nums=2)
            with Producer("del-p2", c.namesrv) as producer:
                new = send(producer, "new", 4)
        assert sorted(new.values()) == [LIFE, LIFE, LIFE + 1, LIFE + 1]
        assert pull_all(c.namesrv, "del-clean", TOPIC, set(new)) == set(new)
        assert pull_all(c.namesrv, "del-clean", "Kept", {b"kept"}) == {b"kept"}
        out = shmq("admin", "clean-unused-topic", "-n", c.namesrv, "--json")
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout) == {"broker-a": []}
    assert shm_entries() <= before


def test_a_deletion_the_writer_does_not_record_keeps_the_topic(tmp_path):
    """A writer that cannot answer (stopped here with SIGSTOP; a full disk, too): after
    3 s the deletion fails naming why, the topic is back in config and routes with its
    messages, and nothing else stopped; once the writer runs again, deleting works."""
    before = shm_entries()
    with cluster(tmp_path) as c, Admin(c.namesrv) as admin:
        c.create_topic(TOPIC, 1)
        with Producer("del-p", c.namesrv) as producer:
            old = send(producer, "old", 5)
        writer = c.runtime_info()["agents"]["writer"]["pid"]
        os.kill(writer, signal.SIGSTOP)
        try:
            with pytest.raises(ResponseError, match=r"topic Deleted is kept: the writer did not"):
                admin.delete_topic(TOPIC)
        finally:
            os.kill(writer, signal.SIGCONT)
        assert TOPIC in admin.topic_list()
        assert pull_all(c.namesrv, "del-kept", TOPIC, set(old)) == set(old)
        assert admin.delete_topic(TOPIC) == ["broker-a"]
        assert all(a["alive"] and a["restarts"] == 0 for a in c.runtime_info()["agents"].values())
    assert shm_entries() <= before


def test_clean_expired_cq_purges_the_expired_queues_no_config_names(tmp_path):
    """mqadmin cleanExpiredCQ: a topic without config whose messages all expired keeps its
    consume queues (cleanUnusedTopic sees no message in them) until then; cleaning twice
    purges once; a configured topic's queue keeps its offsets."""
    before = shm_entries()
    conf = {"mappedFileSizeCommitLog": 1 << 20, "deleteWhen": ";".join(map(str, range(24))),
            "fileReservedTime": 1, "cleanResourceInterval": 300,
            "cleanResourceInitialDelay": 300}  # fmt: skip
    with cluster(tmp_path, **conf) as c:
        c.create_topic("Expiring", 1)
        c.create_topic("Later", 1)
        with Producer("exp-p", c.namesrv) as producer:
            for i in range(1500):  # CommitLog files 0 and 1
                producer.send(Message("Expiring", b"%04d" % i + b"x" * 996))
            for i in range(2500):  # files 1 to 4
                producer.send(Message("Later", b"%04d" % i + b"x" * 996))
        c.stop_broker()
        topics = TopicConfigManager(os.path.join(c.store, "config"))
        assert topics.delete("Expiring")
        topics.persist()
        c.start_broker()
        cq = os.path.join(c.store, "consumequeue", "Expiring", "0")
        with Admin(c.namesrv) as admin:
            assert admin.clean_expired_consume_queue() == {"broker-a": []}  # not expired yet
            files = sorted(os.listdir(os.path.join(c.store, "commitlog")))
            old = time.time() - 2 * 3600
            for name in files[:2]:
                os.utime(os.path.join(c.store, "commitlog", name), (old, old))
            purged = wait_for(
                lambda: (done := admin.clean_expired_consume_queue()) != {"broker-a": []} and done,
                interval=0.2,
                what="Expiring's messages to expire",
            )
            assert purged == {"broker-a": ["Expiring"]}
            assert admin.clean_expired_consume_queue() == {"broker-a": []}  # purged once
            assert admin.clean_unused_topic() == {"broker-a": []}
            [life] = sorted(os.listdir(cq))  # the next life's file, the old ones gone
            assert int(life) == 2 * UNITS * 20  # 1,500 messages: the life starts at 2,048
            [later] = admin.topic_status("Later")  # configured: its queue and offsets stay
            assert later.max_offset == 2500
            assert sorted(os.listdir(os.path.join(c.store, "consumequeue", "Later", "0")))
        out = shmq("admin", "clean-expired-cq", "-n", c.namesrv)
        assert (out.returncode, out.stdout.strip()) == (0, "broker-a: nothing expired"), out.stderr
    assert shm_entries() <= before
