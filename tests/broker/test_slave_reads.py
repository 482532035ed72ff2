"""Consumers and slaves with real processes: a namesrv, a master and a slave on separate
stores. The master suggests the slave to a consumer far behind (``slaveReadEnable``), a
slave without it sends consumers back to the master, a push consumer group moves to the
slave when the master is SIGKILLed and back when it restarts, without losing or repeating
committed progress, and ``shmq consume`` reads from the slave of a SIGKILLed master and
commits to it, as RocketMQ 4.9's clients do."""

from __future__ import annotations

import os
import threading

import pytest
from test_ha import caught_up, sigkill_broker
from waiting import wait_for

from e2e_helpers import cluster, free_port, shm_entries, shmq
from shmq import Admin, Message, Producer, json_file
from shmq.client.consumer.push import PushConsumer
from shmq.client.transport.queue_reader import QueueReader
from shmq.client.types import ConsumeResult, MessageQueue, PullStatus
from shmq.ipc.segment import unlink_orphans
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RemotingCommand, RequestCode

TOPIC = "SlaveReads"
SLAVE = {"brokerName": "broker-a", "brokerId": 1, "brokerRole": "SLAVE",
         "slaveSynchronizeInterval": 500}  # fmt: skip


def topics_of(c, name: str) -> set[str]:
    with RemotingClient() as client:
        _, wrapper = client.invoke_json(c.brokers[name].address, RequestCode.GET_ALL_TOPIC_CONFIG)
    return set(wrapper["topicConfigTable"])


def offsets_of(c, name: str, group: str) -> dict[int, int]:
    """The group's committed offsets in the broker's table (GET_ALL_CONSUMER_OFFSET)."""
    request = RemotingCommand.request(RequestCode.GET_ALL_CONSUMER_OFFSET)
    with RemotingClient() as client:
        body = client.invoke(c.brokers[name].address, request).body.decode()
    return json_file.loads_fastjson(body)["offsetTable"].get(f"{TOPIC}@{group}", {})


def offsets_on_disk(c, group: str) -> dict[int, int]:
    path = os.path.join(c.store, "config", "consumerOffset.json")
    data = json_file.load(path) or {}
    return data.get("offsetTable", {}).get(f"{TOPIC}@{group}", {})


def send(c, bodies: list[bytes]) -> None:
    with Producer("slave-reads-p", c.namesrv) as producer:
        for body in bodies:
            producer.send(Message(TOPIC, body))


@pytest.mark.slow
def test_pulls_follow_the_suggested_broker(tmp_path):
    """accessMessageInMemoryMaxRatio 0: every pull is 'far behind', so the master (with
    slaveReadEnable) suggests the slave; the slave (without it) refuses and suggests the
    master, skipping nothing."""
    before = shm_entries()
    conf = {"slaveReadEnable": "true", "accessMessageInMemoryMaxRatio": 0}
    with cluster(tmp_path, brokerRole="ASYNC_MASTER", haListenPort=free_port(), **conf) as c:
        c.create_topic(TOPIC, 1)  # on the master only: the slave copies it
        slave = c.add_broker("slave", **SLAVE, slaveReadEnable="false")
        wait_for(lambda: TOPIC in topics_of(c, "slave"), what="the slave to copy the topic")
        send(c, [f"s-{i}".encode() for i in range(20)])
        caught_up(c)
        mq = MessageQueue(TOPIC, "broker-a", 0)
        with QueueReader("suggest-g", c.namesrv, transport="tcp") as reader:
            reader.queues(TOPIC)
            assert reader.pull_address(mq) == c.main.address
            first = reader.pull(mq, 0, 5, timeout=1.0)
            assert [m.queue_offset for m in first.messages] == [0, 1, 2, 3, 4]
            assert first.suggest_which_broker_id == 1
            assert reader.pull_address(mq) == slave.address
            refused = reader.pull(mq, 5, 5, timeout=1.0)
            assert refused.pull_status is PullStatus.NO_MATCHED_MSG
            assert (refused.next_begin_offset, refused.suggest_which_broker_id) == (5, 0)
            assert reader.pull_address(mq) == c.main.address
            again = reader.pull(mq, 5, 5, timeout=1.0)
            assert [m.queue_offset for m in again.messages] == [5, 6, 7, 8, 9]
    assert shm_entries() <= before


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_a_push_group_moves_to_the_slave_and_back_keeping_its_progress(tmp_path, transport):
    before = shm_entries()
    group = f"switch-{transport}"
    conf = {"slaveReadEnable": "true", "flushConsumerOffsetInterval": 200}
    with cluster(tmp_path, brokerRole="ASYNC_MASTER", haListenPort=free_port(), **conf) as c:
        c.create_topic(TOPIC, 2)
        slave = c.add_broker("slave", **SLAVE)
        first = [f"a-{i}".encode() for i in range(300)]
        send(c, first)
        caught_up(c)

        consumed: list[tuple[int, int, bytes]] = []
        lock = threading.Lock()
        gate = threading.Event()

        def listener(msgs, _ctx):
            with lock:
                held = len(consumed) >= 120
            if held:
                gate.wait(120)  # consumption pauses with part of the messages consumed
            with lock:
                consumed.extend((m.queue_id, m.queue_offset, m.body) for m in msgs)
            return ConsumeResult.CONSUME_SUCCESS

        consumer = PushConsumer(group, c.namesrv, listener=listener, transport=transport,
                                consume_thread_min=4, consume_thread_max=4,
                                rebalance_interval=1.0, heartbeat_interval=1.0,
                                persist_consumer_offset_interval=0.2,
                                poll_name_server_interval=1.0)  # fmt: skip
        try:
            consumer.subscribe(TOPIC)
            consumer.start()

            def settled():  # the commits stopped moving; the master persisted them
                master = offsets_of(c, "broker-a", group)
                copy = offsets_of(c, "slave", group)
                same = len(master) == 2 and master == copy
                return same and offsets_on_disk(c, group) == master and master

            committed = wait_for(
                settled, timeout=60, what="the slave to copy the committed offsets"
            )

            sigkill_broker(c, "broker-a")
            with lock:
                killed_at = len(consumed)
            gate.set()
            wait_for(
                lambda: {b for _, _, b in consumed} >= set(first),
                timeout=90,
                what="every message consumed from the slave",
            )
            reader = consumer.instance.reader
            # the route without the master reaches the consumer (same-host readers may have
            # read everything from the dead master's files before)
            wait_for(
                lambda: (
                    {reader.pull_address(mq) for mq in consumer.assignment()} == {slave.address}
                ),
                timeout=30,
                what="the queues to be read from the slave",
            )
            # a slave stores no commits: its table is what it copied from the master
            assert offsets_of(c, "slave", group) == committed
            with lock:
                after_kill = consumed[killed_at:]
            assert all(offset >= committed[qid] for qid, offset, _ in after_kill)

            c.start_broker("broker-a")
            ends = {qid: sum(1 for q, _, _ in {(q, o, b) for q, o, b in consumed} if q == qid)
                    for qid in (0, 1)}  # fmt: skip
            wait_for(
                lambda: offsets_of(c, "broker-a", group) == ends,
                timeout=60,
                what="the offsets kept in memory committed to the master",
            )
            wait_for(
                lambda: offsets_of(c, "slave", group) == ends,
                timeout=60,
                what="the slave to copy them again",
            )
            with lock:
                back_at = len(consumed)
            second = [f"b-{i}".encode() for i in range(60)]
            send(c, second)
            wait_for(
                lambda: {b for _, _, b in consumed} >= set(second),
                timeout=60,
                what="the messages sent after the restart",
            )
            assert {reader.pull_address(mq) for mq in consumer.assignment()} == {c.main.address}
        finally:
            gate.set()
            consumer.shutdown()
        with lock:
            after_restart = consumed[back_at:]
        assert all(offset >= ends[qid] for qid, offset, _ in after_restart)
        assert sorted(b for _, _, b in after_restart) == sorted(second)
        final = offsets_of(c, "broker-a", group)
        assert all(final[q] >= ends[q] >= committed[q] for q in (0, 1))
        assert sum(final.values()) == 360
    assert shm_entries() <= before


def master_gone(c) -> bool:
    with Admin(c.namesrv) as admin:
        datas = admin.topic_route(TOPIC)["brokerDatas"]
    return all("0" not in d["brokerAddrs"] for d in datas)


@pytest.mark.slow
def test_shmq_consume_reads_from_the_slave_of_a_killed_master_and_commits_there(tmp_path):
    """Issue 53, item 7: it used to read from the slave, then exit 1 with "broker broker-a
    has no master in the route" at its first commit, without saying what it received."""
    before = shm_entries()
    with cluster(tmp_path, brokerRole="SYNC_MASTER", haListenPort=free_port()) as c:
        c.create_topic(TOPIC, 2)
        c.add_broker("slave", **SLAVE)
        wait_for(lambda: TOPIC in topics_of(c, "slave"), what="the slave to copy the topic")
        bodies = [f"m-{i}".encode() for i in range(300)]
        send(c, bodies)
        caught_up(c)
        sigkill_broker(c, "broker-a")
        wait_for(lambda: master_gone(c), what="the route without the master")

        group = ["--group", "cli-on-slave", "-n", c.namesrv]
        args = ["consume", "--topic", TOPIC, *group, "--from", "first"]
        # commits while reading too (every 0.2 s), not only at the end
        run = shmq(*args, "--count", "300", "--persist-consumer-offset-interval", "0.2")
        assert run.returncode == 0, run.stderr
        assert "received 300 messages" in run.stdout
        assert "offsets were committed to the slave" in run.stderr
        committed = offsets_of(c, "slave", "cli-on-slave")
        assert sorted(committed) == [0, 1] and sum(committed.values()) == 300

        # the offsets survive: the next run resumes after them, and says what it received
        rest = shmq(*args, "--count", "1", "--timeout", "1", "--json")
        assert rest.returncode == 1
        assert rest.stdout == ""
        assert "received 0 messages" in rest.stderr
        assert "timeout: received 0 of 1 messages" in rest.stderr
        assert offsets_of(c, "slave", "cli-on-slave") == committed
    unlink_orphans()  # the killed master's segments, as its next start would remove them
    assert shm_entries() <= before
