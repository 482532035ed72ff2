"""The Admin client against real processes: a namesrv and two brokers of one cluster.

Topics, routes and queue status; consumer progress, connections and offset resets (a raw
socket plays an online consumer); message queries by id, key, unique key and time; broker
and cluster status; subscription groups kept across a broker restart (last: it restarts
broker-a).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Iterator

import pytest
import wire_client
from waiting import wait_for

from e2e_helpers import cluster, shm_entries
from shmq.client.admin.admin import Admin, ConsumerProgress
from shmq.client.consumer.lite_pull import PullConsumer
from shmq.client.consumer.push import PushConsumer
from shmq.client.producer.producer import Producer
from shmq.client.transport.queue_reader import QueueReader
from shmq.client.types import ConsumeResult, MessageQueue
from shmq.errors import ClientError, ConfigError, NoRouteError, ResponseError
from shmq.message import Message
from shmq.names import dlq_topic, retry_topic
from shmq.remoting.client import parse_addr
from shmq.remoting.frames import read_frame
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode

Rc = ResponseCode


@pytest.fixture(scope="module")
def two_brokers(tmp_path_factory):
    before = shm_entries()
    with cluster(tmp_path_factory.mktemp("admin"), defaultTopicQueueNums=2) as c:
        c.add_broker("broker-b")
        with Admin(c.namesrv) as admin:
            wait_for(
                lambda: len(admin.cluster_list()) == 2,
                ignore=NOT_YET,
                what="two brokers registered",
            )
        yield c
    assert shm_entries() - before == set()


@pytest.fixture
def admin(two_brokers) -> Iterator[Admin]:
    with Admin(two_brokers.namesrv) as a:
        yield a


NOT_YET = (ClientError, ResponseError, NoRouteError)  # asked before a broker or route has it


def produce(namesrv: str, topic: str, n: int, prefix: str = "m") -> list:
    with Producer("admin-test-producer", namesrv) as producer:
        return [producer.send(Message(topic, f"{prefix}{i}", keys=[f"{prefix}-key-{i}"]))
                for i in range(n)]  # fmt: skip


def dispatched(admin: Admin, topic: str, n: int) -> None:
    wait_for(
        lambda: sum(q.max_offset for q in admin.topic_status(topic)) == n,
        ignore=NOT_YET,
        what=f"{n} messages of {topic} dispatched",
    )


def next_frame(sock: socket.socket, code: int, timeout: float = 10.0) -> RemotingCommand:
    """The next request with ``code`` the broker sends on ``sock`` (others are skipped)."""
    deadline = time.monotonic() + timeout
    while True:
        frame = read_frame(sock, deadline=deadline)
        assert frame is not None, "the broker closed the connection"
        if frame.code == code and not frame.is_response:
            return frame


@contextlib.contextmanager
def online_consumer(address: str, group: str, topic: str, client_id: str):
    """A raw socket that announced itself as a consumer of ``group`` (HEART_BEAT)."""
    host, port = address.split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    try:
        body = {
            "clientID": client_id,
            "consumerDataSet": [
                {
                    "groupName": group,
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                    "subscriptionDataSet": [{"topic": topic, "subString": "*"}],
                }
            ],
            "producerDataSet": [],
        }
        request = RemotingCommand.request(
            RequestCode.HEART_BEAT, body=RemotingCommand.body_json(body)
        )
        sock.sendall(request.encode())
        deadline = time.monotonic() + 10
        while True:
            frame = read_frame(sock, deadline=deadline)
            assert frame is not None
            if frame.is_response and frame.opaque == request.opaque:
                assert frame.code == Rc.SUCCESS, frame.remark
                break
        yield sock
    finally:
        sock.close()


# -- topics -----------------------------------------------------------------------------------


def test_topic_create_list_route_status_delete(admin, two_brokers):
    assert admin.update_topic("AdmTopic", read_queue_nums=3, write_queue_nums=3) == [
        "broker-a",
        "broker-b",
    ]
    assert "AdmTopic" in admin.topic_list()
    route = admin.topic_route("AdmTopic")
    assert sorted(
        (q["brokerName"], q["readQueueNums"], q["perm"]) for q in route["queueDatas"]
    ) == [
        ("broker-a", 3, 6),
        ("broker-b", 3, 6),
    ]
    status = admin.topic_status("AdmTopic")
    assert [(q.broker_name, q.queue_id) for q in status] == [
        (b, i) for b in ("broker-a", "broker-b") for i in range(3)
    ]
    assert {(q.min_offset, q.max_offset, q.last_update_timestamp) for q in status} == {(0, 0, 0)}

    started = int(time.time() * 1000)
    results = produce(two_brokers.namesrv, "AdmTopic", 12)
    dispatched(admin, "AdmTopic", 12)
    status = admin.topic_status("AdmTopic")
    for q in status:
        sent = [r for r in results if r.message_queue == q.message_queue]
        assert q.max_offset == len(sent)
        if sent:
            assert started <= q.last_update_timestamp <= int(time.time() * 1000)
    assert status[0].to_json().keys() == {
        "topic", "brokerName", "queueId", "minOffset", "maxOffset", "lastUpdateTimestamp"
    }  # fmt: skip

    # one broker only, by name and by address; perm read-only
    addr_b = two_brokers.brokers["broker-b"].address
    assert admin.update_topic("AdmTopic", read_queue_nums=3, write_queue_nums=3, perm=4,
                              broker=addr_b) == ["broker-b"]  # fmt: skip
    route = admin.topic_route("AdmTopic")
    assert {q["brokerName"]: q["perm"] for q in route["queueDatas"]} == {
        "broker-a": 6,
        "broker-b": 4,
    }
    assert admin.update_topic("AdmOne", broker="broker-a") == ["broker-a"]
    assert [q["brokerName"] for q in admin.topic_route("AdmOne")["queueDatas"]] == ["broker-a"]

    with pytest.raises(ClientError, match=r"cluster Nope is not registered.*DefaultCluster"):
        admin.update_topic("AdmTopic", cluster="Nope")
    with pytest.raises(ClientError, match="broker broker-z is not registered"):
        admin.update_topic("AdmTopic", broker="broker-z")
    with pytest.raises(ResponseError, match=r"broker-a.*readQueueNums 0 of topic AdmTopic"):
        admin.update_topic("AdmTopic", read_queue_nums=0, broker="broker-a")

    assert admin.delete_topic("AdmTopic") == ["broker-a", "broker-b"]
    assert admin.delete_topic("AdmOne", cluster="DefaultCluster") == ["broker-a"]
    assert "AdmTopic" not in admin.topic_list()
    with pytest.raises(NoRouteError, match="No route info of this topic: AdmTopic"):
        admin.topic_route("AdmTopic")
    with pytest.raises(NoRouteError, match="AdmTopic"):
        admin.topic_status("AdmTopic")
    with pytest.raises(ResponseError, match="topic AdmTopic does not exist on cluster") as err:
        admin.delete_topic("AdmTopic", cluster="DefaultCluster")
    assert err.value.code == Rc.TOPIC_NOT_EXIST
    time.sleep(1.5)  # a test of absence: a broker re-registering must not bring it back
    assert "AdmTopic" not in admin.topic_list()


def test_deleting_a_group_deletes_its_retry_and_dead_letter_topics(admin, two_brokers):
    """As mqadmin's ``deleteSubGroup -c``; the topics' messages go with them."""
    group = "adm-gone"
    admin.update_sub_group(group)
    retry, dlq = retry_topic(group), dlq_topic(group)
    for topic in (retry, dlq):
        admin.update_topic(topic, read_queue_nums=1, write_queue_nums=1)
    produce(two_brokers.namesrv, retry, 4)
    dispatched(admin, retry, 4)
    assert admin.delete_sub_group(group) == ["broker-a", "broker-b"]
    assert retry not in admin.topic_list() and dlq not in admin.topic_list()
    admin.update_topic(retry, read_queue_nums=1, write_queue_nums=1)  # back, and empty
    produce(two_brokers.namesrv, retry, 1, prefix="fresh")
    got: list[bytes] = []
    with PullConsumer("adm-gone-check", two_brokers.namesrv,
                      consume_from_where="FIRST_OFFSET") as check:  # fmt: skip
        check.subscribe(retry)
        check.start()
        wait_for(lambda: got.extend(m.body for m in check.poll(0.5)) or got, interval=0,
                 what=f"a message of {retry}")  # fmt: skip
        got += [m.body for m in check.poll(1.0)]  # and nothing more
    assert got == [b"fresh0"]
    admin.delete_topic(retry)


# -- consumers ------------------------------------------------------------------------------------


def test_consumer_progress_lag_and_who_consumes(admin, two_brokers):
    admin.update_topic("AdmProgress", read_queue_nums=2, write_queue_nums=2)
    produce(two_brokers.namesrv, "AdmProgress", 20)
    dispatched(admin, "AdmProgress", 20)
    maxima = {q.message_queue: q.max_offset for q in admin.topic_status("AdmProgress")}
    committed = {}
    with QueueReader("adm-progress", two_brokers.namesrv) as reader:
        queues = reader.queues("AdmProgress")
        assert len(queues) == 4
        for mq in queues[:3]:  # 3 of 4 queues: two fully consumed, one partly
            committed[mq] = maxima[mq] if mq != queues[2] else maxima[mq] // 2
            reader.commit(mq, committed[mq])
    consumed = sum(committed.values())

    progress = admin.consumer_progress("adm-progress", "AdmProgress")
    assert isinstance(progress, ConsumerProgress) and progress.group == "adm-progress"
    assert [q.message_queue for q in progress.queues] == sorted(maxima)
    for q in progress.queues:
        assert q.broker_offset == maxima[q.message_queue]
        assert q.consumer_offset == committed.get(q.message_queue, 0)
        assert q.diff == q.broker_offset - q.consumer_offset
        assert (q.last_timestamp > 0) == (q.consumer_offset > 0)
    assert progress.diff_total == 20 - consumed
    as_json = progress.to_json()
    assert as_json["diffTotal"] == 20 - consumed and len(as_json["queues"]) == 4
    assert {"brokerOffset", "consumerOffset", "diff", "lastTimestamp"} <= as_json["queues"][
        0
    ].keys()
    # without a topic: every topic the group has offsets on, over both brokers
    assert admin.consumer_progress("adm-progress").queues == progress.queues

    with pytest.raises(ClientError, match="no consume stats of group adm-nobody"):
        admin.consumer_progress("adm-nobody")
    with pytest.raises(NoRouteError, match="NoSuchTopic"):
        admin.consumer_progress("adm-progress", "NoSuchTopic")
    assert admin.topic_consume_by_who("AdmProgress") == ["adm-progress"]


def test_consumer_connection_of_an_online_group(admin, two_brokers):
    with pytest.raises(ResponseError, match="adm-conn is not online") as err:
        admin.consumer_connection("adm-conn")
    assert err.value.code == Rc.CONSUMER_NOT_ONLINE
    address = two_brokers.brokers["broker-b"].address
    with online_consumer(address, "adm-conn", "AdmConnTopic", "10.0.0.9@123#0"):
        conn = admin.consumer_connection("adm-conn")
        assert [c["clientId"] for c in conn["connectionSet"]] == ["10.0.0.9@123#0"]
        assert conn["connectionSet"][0]["clientAddr"].startswith("127.0.0.1:")
        assert list(conn["subscriptionTable"]) == ["AdmConnTopic"]
        assert conn["messageModel"] == "CLUSTERING"
        assert conn["consumeFromWhere"] == "CONSUME_FROM_FIRST_OFFSET"

    # the broker forgets the member when its connection closes
    def forgotten() -> ResponseError | None:
        try:
            admin.consumer_connection("adm-conn")
        except ResponseError as exc:
            return exc
        return None

    assert wait_for(forgotten, what="the closed consumer offline").code == Rc.CONSUMER_NOT_ONLINE


@contextlib.contextmanager
def stuck_consumer(namesrv: str, group: str, topic: str) -> Iterator[tuple[PushConsumer, list]]:
    """A push consumer whose listener holds its first message until the block ends, so
    the rest of what it pulled stays cached in its process queues."""
    gate, got = threading.Event(), []

    def listener(msgs, _ctx):
        got.extend(msgs)
        gate.wait(30)
        return ConsumeResult.CONSUME_SUCCESS

    consumer = PushConsumer(
        group, namesrv, listener=listener, consume_thread_min=1, consume_thread_max=1,
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
    )  # fmt: skip
    consumer.subscribe(topic)
    consumer.start()
    try:
        wait_for(lambda: got, ignore=NOT_YET, what="a message in the listener")
        yield consumer, got
    finally:
        gate.set()
        consumer.shutdown()


def test_consumer_status_is_asked_of_each_member_through_its_broker(admin, two_brokers):
    """GET_CONSUMER_RUNNING_INFO: the broker passes it to the member over the connection
    the member heartbeats on, and answers with the member's ConsumerRunningInfo."""
    topic, group = "AdmStatus", "adm-status"
    admin.update_topic(topic, read_queue_nums=2, write_queue_nums=2)
    with Producer("adm-status-p", two_brokers.namesrv) as producer:
        for i in range(40):
            producer.send(Message(topic, f"m{i}".encode()))
    with stuck_consumer(two_brokers.namesrv, group, topic) as (consumer, _):
        wait_for(lambda: consumer.counters["pulled"] == 40, ignore=NOT_YET, what="all 40 pulled")
        infos = admin.consumer_status(group)
        assert list(infos) == [consumer.instance.client_id]
        info = infos[consumer.instance.client_id]
        props = info["properties"]
        assert props["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
        assert props["PROP_CONSUMEORDERLY"] == "false"
        assert abs(int(props["PROP_CONSUMER_START_TIMESTAMP"]) - time.time() * 1000) < 60_000
        assert {s["topic"] for s in info["subscriptionSet"]} == {topic, "%RETRY%" + group}
        mine = [q for q in info["mqTable"] if q["topic"] == topic]
        assert sorted((q["brokerName"], q["queueId"]) for q in mine) == [
            ("broker-a", 0), ("broker-a", 1), ("broker-b", 0), ("broker-b", 1)]  # fmt: skip
        # one message is in the listener, the others wait: all 40 are in the process queues
        assert sum(q["cachedMsgCount"] for q in mine) == 40
        assert all(q["commitOffset"] in (-1, 0) and not q["locked"] for q in mine)
        assert all(q["lastPullTimestamp"] > time.time() * 1000 - 60_000 for q in mine)
        assert info["userConsumerInfo"]["pulled"] == "40"
        assert "jstack" not in info
        dumped = admin.consumer_status(group, consumer.instance.client_id, jstack=True)
        assert "shmq-" in dumped[consumer.instance.client_id]["jstack"]  # its threads' names
        with pytest.raises(ResponseError, match="consumer nobody@1 of group adm-status") as err:
            admin.consumer_status(group, "nobody@1")
        assert err.value.code == Rc.CONSUMER_NOT_ONLINE
    # asked of a broker directly, for a member that is not online (RocketMQ's answer)
    with socket.create_connection(parse_addr(two_brokers.brokers["broker-a"].address)) as sock:
        fields = {"consumerGroup": group, "clientId": "gone@2"}
        request = RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO, fields)
        sock.sendall(request.encode())
        answer = read_frame(sock)
    assert (answer.code, answer.remark) == (
        Rc.SYSTEM_ERROR,
        "The Consumer <adm-status> <gone@2> not online",
    )


def test_consumer_offsets_are_what_each_member_holds(admin, two_brokers):
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (mqadmin getConsumerStatus): each broker asks
    its online members (GET_CONSUMER_STATUS_FROM_CLIENT) for their offsets on the topic."""
    topic, group = "AdmOffsets", "adm-offsets"
    admin.update_topic(topic, read_queue_nums=2, write_queue_nums=2)
    with pytest.raises(ResponseError, match=r"No Any Consumer online in the consumer group"):
        admin.consumer_offsets(group, topic)
    members = [PullConsumer(group, two_brokers.namesrv, auto_commit=False) for _ in range(2)]
    try:
        for member in members:
            member.subscribe(topic)
            member.start()
        wait_for(
            lambda: sorted(len(m.assignment()) for m in members) == [2, 2],
            ignore=NOT_YET,
            what="4 queues shared by 2 members",
        )
        for n, member in enumerate(members):
            member.commit({mq: 10 * n + mq.queue_id + 1 for mq in member.assignment()})
        held = admin.consumer_offsets(group, topic)
        assert held == {
            m.instance.client_id: {mq: 10 * n + mq.queue_id + 1 for mq in sorted(m.assignment())}
            for n, m in enumerate(members)
        }
        one = members[1].instance.client_id
        assert admin.consumer_offsets(group, topic, one) == {one: held[one]}
        assert admin.consumer_offsets(group, topic, "gone@1") == {}  # no such member
    finally:
        for member in members:
            member.close()


def test_a_member_that_does_not_answer_its_status_times_out(admin, two_brokers):
    address = two_brokers.brokers["broker-b"].address
    with online_consumer(address, "adm-mute", "AdmMuteTopic", "10.0.0.9@124#0"):
        started = time.monotonic()
        with pytest.raises(ResponseError, match=r"10\.0\.0\.9@124#0> Timeout") as err:
            admin.consumer_status("adm-mute")
        assert err.value.code == Rc.CONSUME_MSG_TIMEOUT
        assert time.monotonic() - started > 4.0  # the broker waited for it 5 s
        assert admin.consumer_connection("adm-mute")["connectionSet"]  # still online


def test_reset_offset_commits_and_tells_online_consumers(admin, two_brokers):
    topic, group = "AdmReset", "adm-reset"
    admin.update_topic(topic, read_queue_nums=2, write_queue_nums=2)
    first = produce(two_brokers.namesrv, topic, 10, "old")
    time.sleep(0.05)  # the clock moves on: ``middle`` lies strictly between the two
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    produce(two_brokers.namesrv, topic, 10, "new")
    dispatched(admin, topic, 20)
    maxima = {q.message_queue: q.max_offset for q in admin.topic_status(topic)}
    old_per_queue = {mq: sum(r.message_queue == mq for r in first) for mq in maxima}

    with pytest.raises(ResponseError, match="adm-reset has no offsets on topic AdmReset") as err:
        admin.reset_offset(group, topic, middle)
    assert err.value.code == Rc.CONSUMER_NOT_ONLINE
    with QueueReader(group, two_brokers.namesrv) as reader:
        # offsets on broker-b only: broker-a has nothing to move
        on_b = {mq: 1 for mq in maxima if mq.broker_name == "broker-b"}
        for mq, offset in on_b.items():
            reader.commit(mq, offset)
        assert admin.reset_offset(group, topic, 0) == dict.fromkeys(on_b, 0)
        for mq, end in maxima.items():
            reader.commit(mq, end)
        address = two_brokers.brokers["broker-a"].address
        with online_consumer(address, group, topic, "10.0.0.9@77#1") as sock:
            table = admin.reset_offset(group, topic, middle)
            assert table == old_per_queue
            assert {mq: reader.committed(mq) for mq in maxima} == old_per_queue
            frame = next_frame(sock, RequestCode.RESET_CONSUMER_CLIENT_OFFSET)
            assert frame.is_oneway
            assert frame.ext_fields == {
                "topic": topic, "group": group, "timestamp": str(middle), "isForce": "true"
            }  # fmt: skip
            assert frame.body.startswith(b'{"offsetTable":{{"brokerName":')  # RocketMQ's
            told = {  # ResetOffsetBody, read by the spec-written fastjson reader
                MessageQueue(mq["topic"], mq["brokerName"], mq["queueId"]): offset
                for mq, offset in (
                    (dict(key), offset)
                    for key, offset in wire_client.fastjson_loads(frame.body)["offsetTable"].items()
                )
            }
            assert told == {mq: off for mq, off in old_per_queue.items()
                            if mq.broker_name == "broker-a"}  # fmt: skip

            # without force, offsets only move back: -1 (the end) changes nothing ...
            assert admin.reset_offset(group, topic, -1, force=False) == old_per_queue
            # ... but time 0 moves every queue to its start
            assert set(admin.reset_offset(group, topic, 0, force=False).values()) == {0}
            assert admin.reset_offset(group, topic, -1) == maxima
            assert {mq: reader.committed(mq) for mq in maxima} == maxima
            frames = [next_frame(sock, RequestCode.RESET_CONSUMER_CLIENT_OFFSET) for _ in range(3)]
            assert [f.ext_fields["isForce"] for f in frames] == ["false", "false", "true"]
    progress = admin.consumer_progress(group, topic)
    assert progress.diff_total == 0
    with pytest.raises(NoRouteError, match="NoSuchTopic"):
        admin.reset_offset(group, "NoSuchTopic", 0)


# -- messages -------------------------------------------------------------------------------------


def test_query_messages_by_id_key_unique_key_and_time(admin, two_brokers):
    topic = "AdmQuery"
    admin.update_topic(topic, read_queue_nums=2, write_queue_nums=2)
    early = produce(two_brokers.namesrv, topic, 6, "early")
    time.sleep(0.05)  # the clock moves on: ``middle`` lies strictly between the two
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    late = produce(two_brokers.namesrv, topic, 6, "late")
    dispatched(admin, topic, 12)
    assert {r.message_queue.broker_name for r in early + late} == {"broker-a", "broker-b"}

    for r in (early[0], late[-1]):  # on both brokers: found by the store host in the id
        msg = admin.query_msg_by_id(r.offset_msg_id)
        assert msg["offsetMsgId"] == r.offset_msg_id and msg["msgId"] == r.msg_id
        assert msg["storeHost"] == two_brokers.brokers[r.message_queue.broker_name].address
    # a unique key given as the id: looked up as one when the topic is known
    assert admin.query_msg_by_id(late[2].msg_id, topic)["offsetMsgId"] == late[2].offset_msg_id
    with pytest.raises(ClientError, match=f"message id {late[2].msg_id}.*give its topic"):
        admin.query_msg_by_id(late[2].msg_id)
    with pytest.raises(ValueError, match=r"32 .* hex digits"):
        admin.query_msg_by_id("nonsense")

    def by_key():
        return admin.query_msg_by_key(topic, "late-key-3")

    wait_for(lambda: len(by_key()) == 1, ignore=NOT_YET, what="the index to have late-key-3")
    [found] = by_key()
    assert found["msgId"] == late[3].msg_id and found["keys"] == ["late-key-3"]
    assert admin.query_msg_by_key(topic, "no-such-key") == []
    assert admin.query_msg_by_key(topic, "late-key-3", end=middle) == []

    msg = admin.query_msg_by_unique_key(topic, early[4].msg_id)
    assert msg["offsetMsgId"] == early[4].offset_msg_id and msg["keys"] == ["early-key-4"]
    with pytest.raises(ClientError, match="no message of topic AdmQuery has the unique key"):
        admin.query_msg_by_unique_key(topic, "0" * 32)

    newer = admin.query_msg_by_time(topic, middle)
    assert sorted(m["msgId"] for m in newer) == sorted(r.msg_id for r in late)
    times = [m["storeTimestamp"] for m in newer]
    assert times == sorted(times) and times[0] >= middle
    assert len(admin.query_msg_by_time(topic, 0)) == 12
    assert len(admin.query_msg_by_time(topic, 0, max_num=5)) == 5
    older = admin.query_msg_by_time(topic, 0, middle)
    assert sorted(m["msgId"] for m in older) == sorted(r.msg_id for r in early)


# -- brokers --------------------------------------------------------------------------------------


def test_cluster_list_and_broker_status(admin, two_brokers):
    brokers = admin.cluster_list()
    assert [(b["cluster"], b["brokerName"], b["brokerId"]) for b in brokers] == [
        ("DefaultCluster", "broker-a", 0),
        ("DefaultCluster", "broker-b", 0),
    ]
    for b in brokers:
        assert b["address"] == two_brokers.brokers[b["brokerName"]].address
        assert b["status"]["broker"] == b["brokerName"]
    by_name = admin.broker_status("broker-b")
    by_addr = admin.broker_status(two_brokers.brokers["broker-b"].address)
    assert by_name["address"] == by_addr["address"] == two_brokers.brokers["broker-b"].address
    assert {"write_offset", "msgs_in", "agents"} <= by_name.keys()
    with pytest.raises(ClientError, match="broker broker-q is not registered"):
        admin.broker_status("broker-q")


# -- subscription groups (last: restarts broker-a) ---------------------------------------------


def test_sub_groups_update_delete_and_survive_a_restart(admin, two_brokers):
    configs = admin.update_sub_group("adm-sub", retry_max_times=3, consume_enable=False)
    assert set(configs) == {"broker-a", "broker-b"}
    for config in configs.values():
        assert config == {
            "groupName": "adm-sub",
            "consumeEnable": False,
            "consumeFromMinEnable": True,
            "consumeBroadcastEnable": True,
            "retryQueueNums": 1,
            "retryMaxTimes": 3,
            "brokerId": 0,
            "whichBrokerWhenConsumeSlowly": 1,
            "notifyConsumerIdsChangedEnable": True,
            "consumeMessageOrderly": False,
        }
    # a second update changes only what it names
    changed = admin.update_sub_group("adm-sub", broker="broker-a", retry_queue_nums=2)
    assert changed["broker-a"]["retryMaxTimes"] == 3 and changed["broker-a"]["retryQueueNums"] == 2
    assert admin.delete_sub_group("adm-sub", broker="broker-b") == ["broker-b"]
    assert list(admin.examine_sub_group("adm-sub")) == ["broker-a"]
    with pytest.raises(ResponseError, match="subscription group adm-sub does not exist") as err:
        admin.delete_sub_group("adm-sub", broker="broker-b")
    assert err.value.code == Rc.SUBSCRIPTION_GROUP_NOT_EXIST
    with pytest.raises(ConfigError, match=r"unknown subscription group setting.*retry_times"):
        admin.update_sub_group("adm-sub", retry_times=3)
    with pytest.raises(ResponseError, match=r"broker-a.*retryMaxTimes 5000 of group adm-sub"):
        admin.update_sub_group("adm-sub", broker="broker-a", retry_max_times=5000)
    with pytest.raises(ResponseError, match="illegal characters"):
        admin.update_sub_group("bad group", broker="broker-a")

    two_brokers.stop_broker("broker-a")
    path = os.path.join(two_brokers.store, "config", "subscriptionGroup.json")
    with open(path) as f:
        text = f.read()
    assert '\t\t"adm-sub":{\n' in text
    assert json.loads(text)["subscriptionGroupTable"]["adm-sub"]["retryQueueNums"] == 2
    two_brokers.start_broker("broker-a")
    wait_for(
        lambda: len(admin.cluster_list()) == 2, ignore=NOT_YET, what="broker-a registered again"
    )
    after = admin.examine_sub_group("adm-sub")
    assert after == {"broker-a": changed["broker-a"]}
    assert admin.delete_sub_group("adm-sub", remove_offset=True) == ["broker-a"]
    with pytest.raises(ResponseError, match="does not exist"):
        admin.examine_sub_group("adm-sub")
