"""What consumers read is what the broker counts as got (``broker.get_counts``): a local
consumer's reads through its shared-memory row, a TCP pull's messages once, and the rates
built on them (consumer-progress's consume TPS, cluster-list's out TPS, ``shmq status``'s
``msgs_out_per_s``)."""

from __future__ import annotations

import json
import threading
import time

import pytest
import wire_client as wc
from click.testing import CliRunner
from test_remoting_send import max_offset
from waiting import wait_for

from e2e_helpers import shm_entries
from shmq.broker.stats.get_counts import GetCounts
from shmq.broker.topic.config import TopicConfig
from shmq.client.admin.admin import Admin
from shmq.client.consumer.push import PushConsumer
from shmq.client.producer.producer import Producer
from shmq.client.transport.queue_reader import QueueReader
from shmq.client.types import ConsumeResult, MessageQueue
from shmq.ipc import consumer_gets as cg
from shmq.ipc import queue_table as qt
from shmq.ipc.segment import Segment, new_prefix
from shmq_cli.main import cli

VIEW_BROKER_STATS_DATA = 315


@pytest.fixture
def segments():
    """A queue table of 8 slots and the gets rows of 2 consumers, unlinked at teardown."""
    before = shm_entries()
    prefix = new_prefix()
    queues = Segment.create(f"{prefix}.queues", qt.segment_size(8))
    try:
        gets = Segment.create(f"{prefix}.gets", cg.segment_size(2, 8))
    except BaseException:
        queues.destroy()
        raise
    try:
        qt.init(queues.words, 8)
        cg.init(gets.words, 2, 8)
        yield queues, gets
    finally:
        gets.destroy()
        queues.destroy()
    assert shm_entries() - before == set()


def test_rows_fold_clamped_and_a_slot_changes_hands(segments):
    queues, gets = segments
    buf, words, maxima = queues.buf, queues.words, qt.max_offsets(queues.buf)
    for topic, qid in ((b"T", 0), (b"T", 1), (b"U", 0)):
        qt.add_queue(buf, words, topic, qid)
    maxima[:3] = (100, 100, 5)
    counts = GetCounts(gets, queues, 2)
    counts.hold(0, "g")
    both, other = cg.client_row(gets.words, 0), cg.client_row(gets.words, 1)
    row, size = both[cg.GOT_MESSAGES], both[cg.GOT_BYTES]
    row[:3] += (30, 20, 3)
    size[:3] += (3000, 2000, 300)
    other[:, 0] += 5  # a slot nobody holds: not counted
    counts.pulled("g", "T", 7, 700)  # a TCP pull
    counts.collect()
    assert counts.counts() == {("g", "T"): 57, ("g", "U"): 3}
    assert counts.sizes() == {("g", "T"): 5700, ("g", "U"): 300}
    size[2] += 5 * (1 << 31)  # more than 5 messages' largest records: clamped
    counts.collect()
    assert counts.sizes()[("g", "U")] == 300 + 5 * ((1 << 31) - 1)
    row[2] += 1000  # more than the queue holds: at most its max offset per look
    row[1] -= 50  # a row that went down counts nothing, what it grows by next does
    counts.collect()
    row[1] += 10
    counts.collect()
    assert counts.counts() == {("g", "T"): 67, ("g", "U"): 8}
    row[0] += 4  # read after the last look, before the holder unregistered
    counts.release(0)
    counts.hold(0, "h")  # the next holder counts from what the row holds
    row[0] += 2
    qt.add_queue(buf, words, b"V", 0)  # a queue published after the first look
    maxima[3] = 9
    row[3] += 9
    counts.collect()
    assert counts.counts() == {("g", "T"): 71, ("g", "U"): 8, ("h", "T"): 2, ("h", "V"): 9}
    assert counts.total() == 90


def make_topic(broker, topic: str, queues: int, messages: int) -> None:
    """``topic`` with ``messages`` sent through a ring, all dispatched."""
    broker.create_topic(TopicConfig(topic, queues, queues))
    with Producer("gets-producer", broker.config.namesrv_addr) as producer:
        producer.send_bulk(topic, [f"m{i}".encode() for i in range(messages)])
    wait_for(lambda: sum(max_offset(broker, topic, q) for q in range(queues)) == messages,
             what=f"{messages} messages of {topic} dispatched")  # fmt: skip


def group_get_nums(broker, topic: str, group: str) -> int:
    """The minute's GROUP_GET_NUMS of ``topic@group`` over the wire (0 before the item
    exists or its first 10 s snapshot)."""
    with wc.WireClient(broker.address) as c:
        resp = c.call(VIEW_BROKER_STATS_DATA, {"statsName": "GROUP_GET_NUMS",
                                               "statsKey": f"{topic}@{group}"})  # fmt: skip
    return json.loads(resp.body)["statsMinute"]["sum"] if resp.code == wc.SUCCESS else 0


def invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_a_cli_consumers_reads_are_its_groups_gets(shared_broker):
    broker, namesrv = shared_broker
    make_topic(broker, "GetsCli", 4, 600)
    invoke("consume", "-n", namesrv, "-t", "GetsCli", "-g", "gets-cli", "--from", "first",
           "--count", "600")  # fmt: skip
    # its slot was released as it closed: every read is counted
    assert broker.gets.counts()[("gets-cli", "GetsCli")] == 600

    def consume_tps() -> float:
        out = invoke("admin", "consumer-progress", "-g", "gets-cli", "-n", namesrv, "--json")
        return json.loads(out)["consumeTps"]

    wait_for(lambda: consume_tps() > 0, what="gets-cli's consume TPS")
    gets = wait_for(lambda: group_get_nums(broker, "GetsCli", "gets-cli"),
                    what="the GROUP_GET_NUMS snapshot of GetsCli@gets-cli")  # fmt: skip
    assert gets == 600


def test_a_push_consumers_reads_are_its_groups_gets(shared_broker):
    broker, namesrv = shared_broker
    make_topic(broker, "GetsPush", 4, 300)
    got = []

    def listener(msgs, _ctx) -> ConsumeResult:
        got.extend(msgs)
        return ConsumeResult.CONSUME_SUCCESS

    with PushConsumer("gets-push", namesrv, listener=listener, consume_from_where="FIRST_OFFSET",
                      persist_consumer_offset_interval=0.2) as consumer:  # fmt: skip
        consumer.subscribe("GetsPush")
        consumer.start()
        wait_for(lambda: len(got) == 300, what="300 messages consumed")
        # counted while it runs (the broker looks at its row every second)
        wait_for(lambda: broker.gets.counts().get(("gets-push", "GetsPush")) == 300,
                 what="300 gets of gets-push counted")  # fmt: skip
        with Admin(namesrv) as admin:
            wait_for(lambda: admin.consumer_progress("gets-push", "GetsPush").consume_tps > 0,
                     what="gets-push's consume TPS")  # fmt: skip
    assert broker.gets.counts()[("gets-push", "GetsPush")] == 300


def test_a_tcp_pull_is_counted_once(shared_broker):
    """Counted when the broker answers it, not again when the consumer commits."""
    broker, namesrv = shared_broker
    make_topic(broker, "GetsTcp", 1, 40)
    mq = MessageQueue("GetsTcp", broker.config.broker_name, 0)
    with QueueReader("gets-tcp", namesrv, transport="tcp") as reader:
        offset = 0
        while offset < 40:
            offset = reader.pull(mq, offset, 16, timeout=1.0).next_begin_offset
        reader.commit(mq, offset)
    with wc.WireClient(broker.address) as c:  # a pull carrying a commit: once too
        header = wc.pull_header("gets-tcp", "GetsTcp", 0, 30, max_nums=4, commit_offset=40,
                                sys_flag=wc.COMMIT_OFFSET | wc.SUBSCRIPTION)  # fmt: skip
        assert len(wc.pulled_records(c.call(wc.PULL_MESSAGE, header).body)) == 4
        # the data server answered the pulls and tells the broker after each answer, on the
        # client's link: a request it relays next on this connection comes after
        assert c.call(30, {"topic": "GetsTcp", "queueId": "0"}).code == wc.SUCCESS  # max offset
    key = ("gets-tcp", "GetsTcp")
    wait_for(lambda: broker.gets.counts()[key] >= 44, what="the pulls counted")
    assert broker.gets.counts()[key] == 44


def test_status_and_cluster_list_show_reads_while_a_consumer_reads(shared_broker):
    broker, namesrv = shared_broker
    make_topic(broker, "GetsWatched", 1, 50)
    stop, failed = threading.Event(), []

    def read() -> None:  # one message at a time, round the queue again and again
        try:
            with QueueReader("gets-watched", namesrv) as reader:
                mq = MessageQueue("GetsWatched", broker.config.broker_name, 0)
                offset = 0
                while not stop.is_set():
                    offset = reader.pull(mq, offset, 1, timeout=0.1).next_begin_offset % 50
                    time.sleep(0.001)
        except Exception as exc:  # the test says so, not a thread's traceback
            failed.append(exc)

    def status() -> dict:
        out = invoke("status", "--broker", broker.address, "--json", "--interval", "0.3")
        return json.loads(out)

    thread = threading.Thread(target=read)
    thread.start()
    try:
        wait_for(lambda: failed or status()["msgs_out_per_s"] > 0, what="msgs_out_per_s")
        assert not failed, failed

        def out_tps() -> float:
            [entry] = json.loads(invoke("admin", "cluster-list", "-n", namesrv, "--json"))
            return entry["status"]["get_tps"][0]

        wait_for(lambda: out_tps() > 0, what="cluster-list's get TPS")
    finally:
        stop.set()
        thread.join()
    assert not failed, failed
    stats = status()
    assert {"msgs_in_per_s", "msgs_dispatched_per_s", "msgs_out_per_s", "msgs_out"} <= set(stats)
