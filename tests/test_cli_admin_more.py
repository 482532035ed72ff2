"""``shmq admin``'s browsing, topic-permission, allocation, send-RT, backlog-skipping and
controller commands against a real namesrv and broker, through the CLI: their printed
fields, their ``--json``, and their failures as one ``error:`` line with exit status 1."""

from __future__ import annotations

import pytest
from cli_admin_helpers import admin, admin_cluster, admin_json
from waiting import wait_for

from e2e_helpers import cluster, shm_entries
from shmq.client.producer.producer import Producer
from shmq.client.transport.queue_reader import QueueReader
from shmq.message import Message

BROKER = "broker-a"


@pytest.fixture(scope="module")
def c(tmp_path_factory):
    with admin_cluster(tmp_path_factory.mktemp("cli-admin-more")) as running:
        yield running


def failed(c, *args: str) -> str:
    """The one ``error:`` line of a command that must fail with exit status 1."""
    result = admin(c, *args, ok=False)
    assert result.exit_code == 1, (result.output, result.exception)
    assert result.stderr.startswith("error: "), result.stderr
    return result.stderr


def stored(c, topic: str, count: int) -> None:
    wait_for(
        lambda: sum(q["maxOffset"] for q in admin_json(c, "topic-status", "-t", topic)) == count,
        what=f"{count} messages of {topic} dispatched",
    )


@pytest.fixture(scope="module")
def browsed(c):
    """Topic Browse (2 queues): six messages, tags TagA / TagB alternating, the last with
    a GBK body; their send results."""
    admin(c, "update-topic", "-t", "Browse", "-r", "2", "-w", "2")
    with Producer("cli-more-p", c.namesrv) as producer:
        sent = [producer.send(Message("Browse", f"body-{i}", tags="TagA" if i % 2 else "TagB"),
                              selector=lambda qs, _m, n: qs[n % len(qs)], arg=i)
                for i in range(5)]  # fmt: skip
        sent.append(producer.send(Message("Browse", "消息".encode("gbk"), tags="TagA"),
                                  selector=lambda qs, _m, _n: qs[1], arg=0))  # fmt: skip
    stored(c, "Browse", 6)
    return sent


def test_print_msg_reads_every_queue_in_a_time_range_and_charset(c, browsed):
    queues = admin_json(c, "print-msg", "-t", "Browse", "-c", "GBK")
    assert [(q["brokerName"], q["queueId"], q["minOffset"], q["maxOffset"]) for q in queues] == [
        (BROKER, 0, 0, 3), (BROKER, 1, 0, 3)]  # fmt: skip
    msgs = [m for q in queues for m in q["messages"]]
    assert sorted(m["msgId"] for m in msgs) == sorted(s.msg_id for s in browsed)
    assert "消息" in [m["bodyText"] for m in msgs]  # decoded in the charset asked for
    tag_a = admin_json(c, "print-msg", "-t", "Browse", "-s", "TagA", "-d", "false")
    assert sorted(m["tags"] for q in tag_a for m in q["messages"]) == ["TagA"] * 3
    assert all("bodyText" not in m for q in tag_a for m in q["messages"])
    after = admin_json(c, "print-msg", "-t", "Browse", "-b", "now")  # nothing stored since
    assert [(q["minOffset"], q["maxOffset"], q["messages"]) for q in after] == [(3, 3, [])] * 2
    text = admin(c, "print-msg", "-t", "Browse").stdout
    assert (
        "minOffset=0, maxOffset=3, MessageQueue [topic=Browse, brokerName=broker-a, queueId=0]: 3"
        in text
    )
    assert "body-2" in text and browsed[2].msg_id in text
    assert "NOT PRINT BODY" in admin(c, "print-msg", "-t", "Browse", "-d", "false").stdout
    bad = admin(c, "print-msg", "-t", "Browse", "-c", "NoSuchCharset", ok=False)
    assert bad.exit_code == 2 and "unknown charset 'NoSuchCharset'" in bad.stderr


def test_print_msg_by_queue_counts_by_tag(c, browsed):
    queue = admin_json(c, "print-msg-by-queue", "-t", "Browse", "-a", BROKER, "-i", "1",
                       "-f", "true")  # fmt: skip
    assert (queue["minOffset"], queue["maxOffset"], queue["count"]) == (0, 3, 3)
    assert queue["tagCounts"] == {"TagA": 3} and "messages" not in queue
    listed = admin_json(c, "print-msg-by-queue", "-t", "Browse", "-a", BROKER, "-i", "0",
                        "-p", "true", "-d", "true")  # fmt: skip
    assert [m["bodyText"] for m in listed["messages"]] == ["body-0", "body-2", "body-4"]
    text = admin(c, "print-msg-by-queue", "-t", "Browse", "-a", BROKER, "-i", "1", "-f", "true",
                 "-p", "true", "-d", "true", "-c", "GBK").stdout  # fmt: skip
    assert "Tag: TagA" in text and "Count: 3" in text and "消息" in text
    assert "queue 7" in failed(c, "print-msg-by-queue", "-t", "Browse", "-a", BROKER, "-i", "7")


def test_query_msg_by_offset_pulls_the_message_there(c, browsed):
    msg = admin_json(c, "query-msg-by-offset", "-t", "Browse", "-b", BROKER, "-i", "1", "-o", "2")
    assert (msg["msgId"], msg["queueOffset"], msg["tags"]) == (browsed[5].msg_id, 2, "TagA")
    assert msg["bodyText"] != "消息"  # UTF-8 unless -f names the charset
    gbk = admin(c, "query-msg-by-offset", "-t", "Browse", "-b", BROKER, "-i", "1", "-o", "2",
                "-f", "GBK").stdout  # fmt: skip
    assert "消息" in gbk and "Queue Offset" in gbk
    missing = failed(c, "query-msg-by-offset", "-t", "Browse", "-b", BROKER, "-i", "0", "-o", "9")
    assert "no message at offset 9 of Browse:0 on broker-a" in missing


def test_compressed_bodies_print_decompressed(c):
    admin(c, "update-topic", "-t", "Zipped", "-r", "1", "-w", "1")
    with Producer("cli-more-zip", c.namesrv, compress_msg_body_over_howmuch=16) as producer:
        producer.send(Message("Zipped", b"z" * 200))
    stored(c, "Zipped", 1)
    (msg,) = admin_json(c, "print-msg", "-t", "Zipped")[0]["messages"]
    assert msg["bodyText"] == "z" * 200
    one = admin_json(c, "query-msg-by-offset", "-t", "Zipped", "-b", BROKER, "-i", "0", "-o", "0")
    assert one["bodyText"] == "z" * 200


def test_update_topic_perm_keeps_the_queue_counts(c):
    admin(c, "update-topic", "-t", "PermT", "-r", "3", "-w", "3")
    (row,) = admin_json(c, "update-topic-perm", "-t", "PermT", "-p", "4")
    assert row == {"brokerName": BROKER, "brokerAddr": row["brokerAddr"], "oldPerm": 6,
                   "perm": 4, "readQueueNums": 3, "writeQueueNums": 3, "changed": True}  # fmt: skip
    (queues,) = admin_json(c, "topic-route", "-t", "PermT")["queueDatas"]
    assert (queues["perm"], queues["readQueueNums"], queues["writeQueueNums"]) == (4, 3, 3)
    same = admin(c, "update-topic-perm", "-t", "PermT", "-p", "4", "-b", BROKER).stdout
    assert "new perm equals to the old one!" in same
    back = admin(c, "update-topic-perm", "-t", "PermT", "-p", "6").stdout
    assert "update topic perm from 4 to 6 in broker-a" in back and "3 read / 3 write" in back
    assert admin(c, "update-topic-perm", "-t", "PermT", "-p", "5", ok=False).exit_code == 2
    assert "No route info of this topic: NoPermT" in failed(
        c, "update-topic-perm", "-t", "NoPermT", "-p", "6"
    )


def test_topic_cluster_list_and_allocate_mq(c):
    admin(c, "update-topic", "-t", "Shared", "-r", "3", "-w", "3")
    assert admin_json(c, "topic-cluster-list", "-t", "Shared") == ["DefaultCluster"]
    assert admin(c, "topic-cluster-list", "-t", "Shared").stdout.split() == ["DefaultCluster"]
    result = admin_json(c, "allocate-mq", "-t", "Shared", "-i", "10.0.0.1,10.0.0.2")["result"]
    assert {ip: [q["queueId"] for q in qs] for ip, qs in result.items()} == {
        "10.0.0.1": [0, 1], "10.0.0.2": [2]}  # fmt: skip
    assert all(q["topic"] == "Shared" and q["brokerName"] == BROKER
               for qs in result.values() for q in qs)  # fmt: skip
    assert "10.0.0.2" in admin(c, "allocate-mq", "-t", "Shared", "-i", "10.0.0.1,10.0.0.2").stdout
    assert admin(c, "allocate-mq", "-t", "Shared", "-i", " , ", ok=False).exit_code == 2


def test_skip_accumulated_message_moves_the_group_to_the_end(c):
    admin(c, "update-topic", "-t", "Backlog", "-r", "2", "-w", "2")
    with Producer("cli-more-skip-p", c.namesrv) as producer:
        for i in range(4):
            producer.send(Message("Backlog", f"b{i}"))
    stored(c, "Backlog", 4)
    with QueueReader("cli-more-skip", c.namesrv) as reader:
        reader.commit(reader.queues("Backlog")[0], 0)
    assert admin_json(c, "consumer-progress", "-g", "cli-more-skip")["diffTotal"] == 4
    skipped = admin_json(c, "skip-accumulated-message", "-g", "cli-more-skip", "-t", "Backlog")
    assert sum(e["offset"] for e in skipped) == 4 and len(skipped) == 2
    assert admin_json(c, "consumer-progress", "-g", "cli-more-skip")["diffTotal"] == 0
    text = admin(c, "skip-accumulated-message", "-g", "cli-more-skip", "-t", "Backlog",
                 "-c", "DefaultCluster").stdout  # fmt: skip
    assert "skipped to the end" in text
    assert "cluster NoCluster is not registered" in failed(
        c, "skip-accumulated-message", "-g", "cli-more-skip", "-t", "Backlog", "-c", "NoCluster"
    )


def test_send_rt_commands_time_each_send(c):
    rows = admin_json(c, "send-msg-status", "-b", BROKER, "-s", "64", "-c", "3")
    assert len(rows) == 3 and all(r["rtMs"] > 0 for r in rows)
    assert {(r["sendResult"]["sendStatus"], r["sendResult"]["topic"]) for r in rows} == {
        ("SEND_OK", BROKER)}  # fmt: skip
    assert "rt=" in admin(c, "send-msg-status", "-b", BROKER, "-c", "1").stdout

    admin(c, "update-topic", "-t", "RtTopic", "-r", "2", "-w", "2")
    checked = admin_json(c, "check-msg-send-rt", "-t", "RtTopic", "-a", "4", "-s", "16")
    assert [(s["brokerName"], s["queueId"], s["sendResult"]) for s in checked["sends"]] == [
        (BROKER, 0, True), (BROKER, 1, True), (BROKER, 0, True), (BROKER, 1, True)]  # fmt: skip
    assert checked["avgRtMs"] > 0
    assert "Avg RT:" in admin(c, "check-msg-send-rt", "-t", "RtTopic", "-a", "2").stdout

    (row,) = admin_json(c, "cluster-rt", "-a", "3", "--rounds", "1")
    assert (row["cluster"], row["brokerName"], row["successCount"], row["failCount"]) == (
        "DefaultCluster", BROKER, 3, 0)  # fmt: skip
    log = admin(c, "cluster-rt", "-a", "2", "-p", "true", "-m", "room1", "--rounds", "1").stdout
    assert "|room1|DefaultCluster|broker-a|" in log
    assert "cluster [Nope] not exist" in failed(c, "cluster-rt", "-c", "Nope", "--rounds", "1")


def test_controller_commands_say_controller_mode_is_off(c):
    off = "controller mode is not enabled there (enableControllerMode is false"
    assert off in failed(c, "get-controller-meta-data", "-a", c.namesrv)
    assert off in failed(c, "elect-master", "-a", c.namesrv, "-c", "DefaultCluster",
                         "-bn", BROKER, "-b", "0")  # fmt: skip
    assert off in failed(c, "clean-broker-metadata", "-a", c.namesrv, "-bn", BROKER)
    epoch = failed(c, "get-broker-epoch", "-c", "DefaultCluster")
    assert "broker broker-a" in epoch and "is not in controller mode" in epoch


def test_get_broker_epoch_in_controller_mode(tmp_path):
    """A broker in controller mode answers its epoch: the first master of its group opens
    epoch 1 (a cluster of its own: controller mode is a namesrv and broker setting); the
    namesrv's controller answers the controller commands."""
    before = shm_entries()
    controller = ("--enable-controller-in-namesrv", "--controller-store-path",
                  str(tmp_path / "controller"))  # fmt: skip
    with cluster(tmp_path, controller, enableControllerMode="true") as cm:
        pid = cm.main.proc.pid
        with Producer("cli-more-epoch", cm.namesrv) as producer:
            producer.send(Message(BROKER, b"e"))  # the broker's own topic
        (row,) = wait_for(
            lambda: [r for r in admin_json(cm, "get-broker-epoch", "-b", BROKER)
                     if r["epochList"] and r["maxOffset"] > 0],
            what="the broker's epoch",
        )  # fmt: skip
        assert (row["clusterName"], row["brokerName"], row["brokerId"]) == (
            "DefaultCluster", BROKER, 0)  # fmt: skip
        (entry,) = row["epochList"]
        assert (
            entry["epoch"] == 1 and entry["startOffset"] <= entry["endOffset"] == row["maxOffset"]
        )
        text = admin(cm, "get-broker-epoch", "-c", "DefaultCluster").stdout
        assert "#brokerName\tbroker-a" in text and "#Epoch: EpochEntry{epoch=1" in text
        meta = admin_json(cm, "get-controller-meta-data", "-a", cm.namesrv)
        assert meta["controllerLeaderAddress"] == cm.namesrv and meta["isLeader"] == "true"
        elected = admin_json(cm, "elect-master", "-a", cm.namesrv, "-c", "DefaultCluster",
                             "-bn", BROKER, "-b", "0")  # fmt: skip
        assert (elected["masterBrokerId"], elected["masterEpoch"]) == ("0", "1")
        refused = failed(cm, "elect-master", "-a", cm.namesrv, "-c", "DefaultCluster",
                         "-bn", BROKER, "-b", "5")  # fmt: skip
        assert "no replica with broker id 5" in refused
        assert "is alive" in failed(cm, "clean-broker-metadata", "-a", cm.namesrv, "-bn", BROKER)
    assert {e for e in shm_entries() - before if f"shmq-{pid}-" in e} == set()
