"""``shmq admin`` against a real namesrv and broker: --json output of every command, the
tables, timestamps, and failures as one ``error:`` line with exit status 1."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import time

import click
import pytest
from cli_admin_helpers import admin, admin_cluster, admin_json
from click.testing import CliRunner
from waiting import wait_for

from e2e_helpers import env
from shmq.client.consumer.lite_pull import PullConsumer
from shmq.client.producer.producer import Producer
from shmq.client.transport.queue_reader import QueueReader
from shmq.message import Message
from shmq_cli.admin.output import parse_timestamp
from shmq_cli.main import cli


@pytest.fixture(scope="module")
def c(tmp_path_factory):
    with admin_cluster(tmp_path_factory.mktemp("cli-admin")) as running:
        yield running


def test_topics_messages_progress_and_reset(c):
    created = admin_json(c, "update-topic", "-t", "CliAdm", "-r", "2", "-w", "2")
    assert created == {"topic": "CliAdm", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6,
                       "brokers": ["broker-a"]}  # fmt: skip
    text = admin(c, "update-topic", "-t", "CliAdm", "-r", "2", "-w", "2", "-b", "broker-a")
    assert "topic CliAdm created or updated on broker-a" in text.stdout
    assert "CliAdm" in admin_json(c, "topic-list")
    assert "CliAdm" in admin(c, "topic-list").stdout.split()
    route = admin_json(c, "topic-route", "-t", "CliAdm")
    assert [q["readQueueNums"] for q in route["queueDatas"]] == [2]
    assert "broker-a" in admin(c, "topic-route", "-t", "CliAdm").stdout

    with Producer("cli-admin-p", c.namesrv) as producer:
        sent = [producer.send(Message("CliAdm", f"body-{i}", keys=[f"k{i}"])) for i in range(6)]
        (ring,) = admin_json(c, "producer-connection", "-g", "cli-admin-p")["connectionSet"]
        assert ring["clientId"].endswith(f"@{os.getpid()}")
        assert "shared memory" in admin(c, "producer-connection", "-g", "cli-admin-p").stdout
    gone = admin(c, "producer-connection", "-g", "cli-admin-p", ok=False)
    assert gone.stderr.strip() == (
        "error: the producer group[cli-admin-p] not exist (response code 1)"
    )
    wait_for(
        lambda: sum(q["maxOffset"] for q in admin_json(c, "topic-status", "-t", "CliAdm")) == 6,
        what="6 messages of CliAdm dispatched",
    )
    assert "max offset" in admin(c, "topic-status", "-t", "CliAdm").stdout

    msg = admin_json(c, "query-msg-by-id", "-i", sent[1].offset_msg_id)
    assert msg["msgId"] == sent[1].msg_id and msg["keys"] == ["k1"]
    table = admin(c, "query-msg-by-id", "-i", sent[1].offset_msg_id).stdout
    assert "body-1" in table and "Store Host" in table
    unique = admin_json(c, "query-msg-by-unique-key", "-t", "CliAdm", "-i", sent[2].msg_id)
    assert unique["offsetMsgId"] == sent[2].offset_msg_id
    wait_for(
        lambda: len(admin_json(c, "query-msg-by-key", "-t", "CliAdm", "-k", "k4")) == 1,
        what="k4 in the index",
    )
    assert "body-4" in admin(c, "query-msg-by-key", "-t", "CliAdm", "-k", "k4").stdout
    assert len(admin_json(c, "query-msg-by-time", "-t", "CliAdm", "-b", "0")) == 6
    assert len(admin_json(c, "query-msg-by-time", "-t", "CliAdm", "-b", "0", "--max-num", "2")) == 2
    assert admin_json(c, "query-msg-by-time", "-t", "CliAdm", "-b", "now", "-e", "now") == []

    with QueueReader("cli-admin-g", c.namesrv) as reader:
        mq = reader.queues("CliAdm")[0]
        reader.commit(mq, 1)
    progress = admin_json(c, "consumer-progress", "-g", "cli-admin-g", "-t", "CliAdm")
    assert progress["diffTotal"] == 5 and len(progress["queues"]) == 2
    out = admin(c, "consumer-progress", "-g", "cli-admin-g").stdout
    assert "Diff Total: 5" in out and "CliAdm" in out

    reset = admin_json(c, "reset-offset-by-time", "-g", "cli-admin-g", "-t", "CliAdm", "-s", "now")
    assert sum(e["offset"] for e in reset) == 6
    assert admin_json(c, "consumer-progress", "-g", "cli-admin-g")["diffTotal"] == 0
    text = admin(c, "reset-offset-by-time", "-g", "cli-admin-g", "-t", "CliAdm", "-s", "0")
    assert "reset to 0" in text.stdout
    assert admin_json(c, "consumer-progress", "-g", "cli-admin-g")["diffTotal"] == 6
    admin(c, "reset-offset-by-time", "-g", "cli-admin-g", "-t", "CliAdm", "-s", "now")
    cloned = admin_json(c, "clone-group-offset", "-s", "cli-admin-g", "-d", "cli-admin-copy",
                        "-t", "CliAdm")  # fmt: skip
    assert cloned["brokers"] == ["broker-a"]
    copy = admin_json(c, "consumer-progress", "-g", "cli-admin-copy", "-t", "CliAdm")
    assert copy["diffTotal"] == 0 and len(copy["queues"]) == 2  # where the source stands
    stats = admin_json(c, "broker-consume-stats")["broker-a"]
    assert [q["diff"] for q in stats["groups"]["cli-admin-copy"]] == [0, 0]
    assert stats["totalDiff"] == sum(q["diff"] for g in stats["groups"].values() for q in g)
    text = admin(c, "broker-consume-stats", "-b", "broker-a", "-l", "1").stdout
    assert "Diff Total:" in text and "cli-admin-copy" not in text  # no lag: below -l 1

    assert admin_json(c, "delete-topic", "-t", "CliAdm") == {
        "topic": "CliAdm",
        "brokers": ["broker-a"],
    }
    assert "CliAdm" not in admin_json(c, "topic-list")


def test_brokers_and_subscription_groups(c):
    [entry] = admin_json(c, "cluster-list")
    assert (entry["cluster"], entry["brokerName"], entry["address"]) == (
        "DefaultCluster",
        "broker-a",
        c.main.address,
    )
    wide = CliRunner(env={"COLUMNS": "200"}).invoke(cli, ["admin", "cluster-list", "-n", c.namesrv])
    table = wide.stdout
    assert "broker-a" in table and "flush type" in table and "ASYNC_FLUSH" in table
    assert "in TPS" in table and "out TPS" in table
    assert len(entry["status"]["put_tps"]) == len(entry["status"]["get_tps"]) == 3
    assert "flush / error" not in table
    status = admin_json(c, "broker-status", "-b", c.main.address)
    assert status["broker"] == "broker-a" and "write_offset" in status
    assert "write_offset" in admin(c, "broker-status", "-b", "broker-a").stdout

    configs = admin_json(c, "update-sub-group", "-g", "cli-sub", "-r", "3", "-s", "false")
    assert configs["broker-a"]["retryMaxTimes"] == 3
    assert configs["broker-a"]["consumeEnable"] is False
    assert "retryMaxTimes" in admin(c, "update-sub-group", "-g", "cli-sub", "-q", "2").stdout
    assert admin_json(c, "delete-sub-group", "-g", "cli-sub") == {
        "group": "cli-sub",
        "brokers": ["broker-a"],
    }
    again = admin(c, "delete-sub-group", "-g", "cli-sub", ok=False)
    assert again.exit_code == 1
    assert again.stderr.strip() == (
        "error: subscription group cli-sub does not exist (response code 26)"
    )


def test_get_broker_config(c):
    (config,) = admin_json(c, "get-broker-config").values()
    assert config["brokerName"] == "broker-a" and config["flushDiskType"] == "ASYNC_FLUSH"
    assert config == admin_json(c, "get-broker-config", "-b", "broker-a")["broker-a"]
    assert "mappedFileSizeCommitLog" in admin(c, "get-broker-config").stdout
    nobody = admin(c, "get-broker-config", "-b", "broker-z", ok=False)
    assert nobody.exit_code == 1 and "broker-z" in nobody.stderr


def test_update_broker_config(c):
    live = admin(c, "update-broker-config", "-k", "slaveReadEnable", "-v", "true")
    assert live.stdout == "broker broker-a: slaveReadEnable=true applied\n"
    assert admin_json(c, "get-broker-config")["broker-a"]["slaveReadEnable"] == "true"
    admin(c, "update-broker-config", "-k", "slaveReadEnable", "-v", "false")
    # a key read at start goes to the broker's config file (the default value: harmless)
    later = admin_json(c, "update-broker-config", "-k", "flushConsumerOffsetInterval", "-v",
                       "5000")["broker-a"]  # fmt: skip
    assert later["remark"].startswith(f"flushConsumerOffsetInterval written to {c.conf_path}")
    with open(c.conf_path) as f:
        assert "flushConsumerOffsetInterval=5000" in f.read().splitlines()
    typo = admin(c, "update-broker-config", "-k", "slaveReadEnabled", "-v", "true", ok=False)
    assert typo.exit_code == 1
    assert (
        "unknown broker config key 'slaveReadEnabled' (did you mean 'slaveReadEnable'?)"
        in typo.stderr
    )


def test_consumer_status_shows_what_each_member_holds(c):
    import shmq

    with Producer("cli-status-p", c.namesrv) as producer:
        for i in range(6):
            producer.send(Message("CliStatus", f"m{i}".encode()))
    consumer = shmq.PushConsumer(
        "cli-status", c.namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        listener=lambda msgs, ctx: shmq.ConsumeResult.CONSUME_SUCCESS,
    )  # fmt: skip
    consumer.subscribe("CliStatus")
    consumer.start()
    try:
        wait_for(lambda: consumer.counters["consumed"] == 6, what="6 messages consumed")
        client_id = consumer.instance.client_id
        [info] = admin_json(c, "consumer-status", "-g", "cli-status").values()
        assert info["properties"]["consumerGroup"] == "cli-status"
        assert {q["queueId"] for q in info["mqTable"] if q["topic"] == "CliStatus"} == {0, 1}
        wide = CliRunner(env={"COLUMNS": "200"}).invoke(
            cli, ["admin", "consumer-status", "-g", "cli-status", "-n", c.namesrv, "-s"]
        )
        assert wide.exit_code == 0, wide.output
        assert client_id in wide.stdout and "CONSUME_PASSIVELY" in wide.stdout
        assert "subscriptions: " in wide.stdout and "CliStatus (*)" in wide.stdout
        assert "consumed 6" in wide.stdout and "MainThread" in wide.stdout  # -s: thread dump
    finally:
        consumer.shutdown()
    gone = admin(c, "consumer-status", "-g", "cli-status", "-i", client_id, ok=False)
    assert gone.exit_code == 1
    assert gone.stderr.startswith(f"error: the consumer {client_id} of group cli-status is not")


def test_query_cq_consume_time_span_and_system_topics(c):
    with Producer("cli-cq-p", c.namesrv) as producer:
        sent = [(producer.send(Message("CliCq", b"m", tags=tag)), tag) for tag in "ABAB"]
    on_0 = [r for r, _ in sent if r.message_queue.queue_id == 0]
    wait_for(lambda: admin_json(c, "query-cq", "-t", "CliCq", "-q", "0", "-i", "0")[
        "maxQueueIndex"] == len(on_0), what="CliCq:0 dispatched")  # fmt: skip
    with PullConsumer("cli-cq-g", c.namesrv, auto_commit=False) as member:
        member.subscribe("CliCq", "A")
        member.start()
        wait_for(
            lambda: (
                "cli-cq-g" in admin(c, "consumer-connection", "-g", "cli-cq-g", ok=False).stdout
            ),
            what="cli-cq-g online",
        )
        member.commit({sorted(member.assignment())[0]: 1})
        body = admin_json(c, "query-cq", "-t", "CliCq", "-q", "0", "-i", "0", "-g", "cli-cq-g")
        held = admin_json(c, "get-consumer-status", "-g", "cli-cq-g", "-t", "CliCq")
        assert list(held) == [member.instance.client_id]
        assert {"topic": "CliCq", "brokerName": "broker-a", "queueId": 0, "offset": 1} in (
            held[member.instance.client_id]
        )
        text = admin(c, "get-consumer-status", "-g", "cli-cq-g", "-t", "CliCq").stdout
        assert member.instance.client_id in text
    assert [u["physicOffset"] for u in body["queueData"]] == [
        int(r.offset_msg_id[16:], 16) for r in on_0
    ]
    assert body["subscriptionData"]["subString"] == "A"
    tags_0 = [tag for r, tag in sent if r.message_queue.queue_id == 0]
    assert [u["eval"] for u in body["queueData"]] == [tag == "A" for tag in tags_0]
    table = admin(c, "query-cq", "-t", "CliCq", "-q", "0", "-i", "1", "-c", "1").stdout
    assert "CliCq:0 offsets [0, 2)" in table and str(body["queueData"][1]["physicOffset"]) in table
    past = admin(c, "query-cq", "-t", "CliCq", "-q", "0", "-i", "9").stdout
    assert "Index 9 of 0@CliCq is not exist!" in past
    missing = admin(c, "query-cq", "-t", "CliCq", "-q", "5", "-i", "0", ok=False)
    assert missing.exit_code == 1 and "5@CliCq is not exist!" in missing.stderr

    spans = admin_json(c, "consume-time-span", "-t", "CliCq", "-g", "cli-cq-g")
    assert [s["message_queue"]["queue_id"] for s in spans] == [0, 1]
    assert spans[0]["consume_timestamp"] == spans[0]["min_timestamp"] > 0 < spans[0]["delay_ms"]
    assert spans[1]["consume_timestamp"] == spans[1]["min_timestamp"]  # none consumed there
    assert "last consumed" in admin(c, "consume-time-span", "-t", "CliCq", "-g", "cli-cq-g").stdout

    topics = admin_json(c, "system-topics")
    assert "SCHEDULE_TOPIC_XXXX" in topics and "broker-a" in topics
    assert "RMQ_SYS_TRANS_HALF_TOPIC" in admin(c, "system-topics", "-b", "broker-a").stdout


def test_errors_are_one_line_with_exit_status_1(c):
    result = admin(c, "consumer-connection", "-g", "cli-nobody", ok=False)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        "error: the consumer group cli-nobody is not online on any broker (response code 206)"
    ]
    bad_time = admin(c, "reset-offset-by-time", "-g", "g", "-t", "T", "-s", "yesterday", ok=False)
    assert bad_time.exit_code == 2 and "is not a timestamp" in bad_time.stderr
    out = subprocess.run(
        [sys.executable, "-m", "shmq_cli.main", "admin", "topic-route", "-t", "Nope", "--json",
         "-n", c.namesrv],
        capture_output=True, text=True, env=env(), timeout=60,
    )  # fmt: skip
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.strip().splitlines() == [
        f"error: No route info of this topic: Nope (namesrv {c.namesrv})"
    ]
    down = CliRunner().invoke(cli, ["admin", "topic-list", "-n", "127.0.0.1:1"])
    assert down.exit_code == 1
    assert down.stderr.startswith("error: no namesrv of 127.0.0.1:1 answered: cannot connect")


def test_timestamps():
    now = int(time.time() * 1000)
    assert abs(parse_timestamp("now") - now) < 5000
    assert parse_timestamp("1700000000123") == 1700000000123
    assert parse_timestamp("-1") == -1
    local = dt.datetime(2024, 5, 1, 12, 30, 15)
    assert parse_timestamp("20240501123015") == int(local.timestamp() * 1000)
    assert parse_timestamp("2024-05-01#12:30:15:250") == int(local.timestamp() * 1000) + 250
    assert parse_timestamp("2024-05-01T12:30:15") == int(local.timestamp() * 1000)
    assert parse_timestamp("2024-05-01T12:30:15+00:00") == 1714566615000
    with pytest.raises(click.BadParameter, match="'tomorrow' is not a timestamp"):
        parse_timestamp("tomorrow")


def test_admin_help_is_light_and_listed():
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0 and "admin" in result.output
    commands = CliRunner().invoke(cli, ["admin", "--help"]).output
    names = """update-topic delete-topic topic-list topic-route topic-status consumer-progress
        consumer-connection query-msg-by-id query-msg-by-key query-msg-by-unique-key
        query-msg-by-time reset-offset-by-time cluster-list broker-status update-sub-group
        delete-sub-group ha-status producer-connection get-broker-config update-broker-config
        clone-group-offset broker-consume-stats query-cq consume-time-span system-topics
        get-consumer-status clean-unused-topic"""
    for name in names.split():
        assert name in commands
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from shmq_cli.main import cli\n"
        "for args in (['admin', '--help'], ['admin', 'consumer-progress', '--help'],\n"
        "             ['admin', 'update-order-conf', '--help']):\n"
        "    r = CliRunner().invoke(cli, args)\n"
        "    assert r.exit_code == 0, r.output\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numba', 'numpy')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env()
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_an_admin_command_into_a_closed_pipe_ends_quietly(c):
    """`shmq admin topic-list | head -1` once printed `error: BrokenPipeError` and exited 1."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line
    try:
        run = subprocess.run([sys.executable, "-m", "shmq_cli.main", "admin", "topic-list",
                              "-n", c.namesrv], stdout=write_end, stderr=subprocess.PIPE,
                             env=env(), timeout=120)  # fmt: skip
    finally:
        os.close(write_end)
    assert run.returncode == 0, run.stderr
    assert run.stderr == b""
