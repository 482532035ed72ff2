"""``shmq.SimpleConsumer`` (RocketMQ 5's POP consumption over remoting) against a real broker:
receive and ack, batch acks, invisibility changed and expired, long polling, the local
(shared-memory) and TCP paths giving the same messages, FIFO pops, and the CLI
(``shmq consume --pop``, ``shmq admin pop-status``); plus the client's receipt rebuild
rule (spec §2.4's worked example) and its header parsing under hypothesis."""

from __future__ import annotations

import contextlib
import json
import threading
import time

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from waiting import wait_for

import shmq
from e2e_helpers import embedded
from shmq.client.consumer.pop.receipt import PopHeader, changed
from shmq.client.consumer.pop.requests import bit_set
from shmq.errors import ShmqError
from shmq.message import PROPERTY_FIRST_POP_TIME, PROPERTY_POP_CK
from shmq.pop_receipt import parse_receipt
from shmq_cli.main import cli

WORKED = {"popTime": "1700000000000", "invisibleTime": "60000", "reviveQid": "3",
          "restNum": "0", "startOffsetInfo": "0 1 100",
          "msgOffsetInfo": "0 1 100,101,102"}  # fmt: skip


@pytest.fixture(scope="module")
def mq(tmp_path_factory):
    with embedded(str(tmp_path_factory.mktemp("pop") / "store")) as running:
        yield running


def send(mq, topic: str, n: int, queues: int = 4, **kw) -> list[str]:
    mq.create_topic(topic, queues)
    with shmq.Producer(f"{topic}-p", mq.namesrv) as producer:
        return [producer.send(shmq.Message(topic, f"{topic}-{i}", **kw)).msg_id
                for i in range(n)]  # fmt: skip


def consumer(mq, group: str, topic: str, **kw) -> shmq.SimpleConsumer:
    options = {"await_duration": 0.5, "consume_from_where": "FIRST_OFFSET", **kw}
    c = shmq.SimpleConsumer(group, mq.namesrv, subscriptions={topic: "*"}, **options)
    c.start()
    return c


def receive_all(c: shmq.SimpleConsumer, n: int, **kw) -> list[shmq.MessageExt]:
    got: list[shmq.MessageExt] = []

    def all_in() -> bool:
        got.extend(c.receive(32, **kw))
        return len(got) >= n

    wait_for(all_in, interval=0, what=f"{n} messages popped")
    return got


# -- the receipt rule and header parsing -----------------------------------------------------


def test_the_worked_example_of_the_rebuild_rule():
    header = PopHeader.parse(WORKED)
    receipt = header.receipt("broker-a", "0", 1, 101)
    assert receipt.encode() == "100 1700000000000 60000 3 0 broker-a 1 101"
    assert header.msg_offsets[("0", 1)] == [100, 101, 102]
    assert receipt.real_topic("T", "G") == "T"
    after = changed(receipt, {"popTime": "1700000005000", "invisibleTime": "30000",
                              "reviveQid": "3"})  # fmt: skip
    assert after.encode() == "101 1700000005000 30000 3 0 broker-a 1 101"
    retry = header.receipt("broker-a", "0", 1, 100)
    assert parse_receipt(retry.encode()) == retry


def test_order_counts_and_the_batch_ack_bit_set():
    header = PopHeader.parse({**WORKED, "reviveQid": "999",
                              "orderCountInfo": "0 qo1%101 2;0 1 0"})  # fmt: skip
    assert header.delivery_count("0", 1, 101) == 2
    assert header.delivery_count("0", 1, 100) == 0  # the queue's entry
    assert bit_set([0, 2]) == "BQ=="  # spec §2.2: offsets 100 and 102 of start 100
    assert bit_set([8]) == "AAE="


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(
    st.sampled_from(["popTime", "invisibleTime", "reviveQid", "restNum", "startOffsetInfo",
                     "msgOffsetInfo", "orderCountInfo"]),
    st.one_of(st.text(max_size=30), st.sampled_from(["0 1 100", "1 0 5,6", "0 qo1%2 3", "7"])),
))  # fmt: skip
def test_bad_headers_are_shmq_errors(ext):
    try:
        header = PopHeader.parse({**WORKED, **ext})
    except ShmqError:
        return
    for (flag, qid), offsets in header.msg_offsets.items():
        for offset in offsets:
            assert header.receipt("b", flag, qid, offset).queue_offset == offset


@given(st.text(max_size=80))
def test_bad_handles_are_shmq_errors(text):
    with contextlib.suppress(ShmqError):
        parse_receipt(text)


# -- against the broker --------------------------------------------------------------------


def test_receive_and_ack(mq):
    ids = send(mq, "PopAck", 10)
    with consumer(mq, "pop-ack", "PopAck") as c:
        got = receive_all(c, 10)
        assert sorted(m.msg_id for m in got) == sorted(ids)
        for m in got:
            assert m.topic == "PopAck" and m.delivery_attempt == 1
            assert m.receipt_handle == m.properties[PROPERTY_POP_CK]
            assert PROPERTY_FIRST_POP_TIME in m.properties
        for m in got[:5]:
            c.ack(m)
        c.ack_batch(got[5:])
        assert c.receive(32) == []
        with pytest.raises(ShmqError):
            c.ack(shmq.MessageExt("PopAck", 0, 0, 0, b"x", b"", 0, 0, b"\0" * 8, b"\0" * 8))
    with shmq.Admin(mq.namesrv) as admin:
        (row,) = admin.pop_status("pop-ack")
        assert (row["topic"], row["acked"], row["inFlight"]) == ("PopAck", 10, 0)
        assert admin.consumer_progress("pop-ack", "PopAck").diff_total == 0


def test_bulk_receive_and_batch_ack(mq):
    send(mq, "PopBulk", 100)
    with consumer(mq, "pop-bulk", "PopBulk") as c:
        bodies: list[bytes] = []

        def all_in() -> bool:
            batch = c.receive_batch(64)
            bodies.extend(batch)
            if len(batch):
                assert batch.receipt_handle(0).split(" ")[5] == "broker-a"
                c.ack_batch(batch)
            return len(bodies) >= 100

        wait_for(all_in, interval=0, what="100 messages in batches")
        assert sorted(bodies) == sorted(f"PopBulk-{i}".encode() for i in range(100))
        assert len(c.receive_batch(64)) == 0


def test_change_invisible_duration_and_expiry_bring_messages_back(mq):
    send(mq, "PopBack", 2, queues=1)
    with consumer(mq, "pop-back", "PopBack", invisible_duration=30) as c:
        first, second = receive_all(c, 2)
        old = first.receipt_handle
        c.change_invisible_duration(first, 1)
        assert first.receipt_handle != old
        assert parse_receipt(first.receipt_handle).start_offset == first.queue_offset
        c.change_invisible_duration(second, 1)
        again = receive_all(c, 2, invisible_duration=1)  # and not acked: they expire
        assert sorted(m.body for m in again) == [b"PopBack-0", b"PopBack-1"]
        assert {m.delivery_attempt for m in again} == {2}
        assert {m.topic for m in again} == {"PopBack"}
        third = receive_all(c, 2)
        assert {m.delivery_attempt for m in third} == {3}
        c.ack_batch(third)


def test_long_polling_wakes_on_send(mq):
    mq.create_topic("PopWake", 2)
    with consumer(mq, "pop-wake", "PopWake", await_duration=15,
                  consume_from_where="LAST_OFFSET") as c:  # fmt: skip
        out: list = []
        t = threading.Thread(target=lambda: out.append((c.receive(4), time.monotonic())))
        t.start()
        time.sleep(0.5)
        sent = time.monotonic()
        with shmq.Producer("pop-wake-p", mq.namesrv) as producer:
            producer.send(shmq.Message("PopWake", b"wake"))
        t.join(20)
        ((msgs, woke),) = out
        assert [m.body for m in msgs] == [b"wake"]
        assert woke - sent < 5.0


def test_local_and_tcp_paths_give_the_same_messages(mq):
    send(mq, "PopSame", 40, tags="A", keys=["k"], properties={"p": "v"})
    views = []
    for transport in ("auto", "tcp"):
        with consumer(mq, f"pop-same-{transport}", "PopSame", transport=transport) as c:
            got = receive_all(c, 40)
            c.ack_batch(got)
            views.append(sorted(
                (m.msg_id, m.body, m.queue_id, m.queue_offset, m.topic, m.tags, m.keys,
                 m.store_timestamp, m.born_host,
                 {k: v for k, v in m.properties.items() if k not in ("POP_CK", "1ST_POP_TIME")})
                for m in got))  # fmt: skip
    assert views[0] == views[1]


def test_fifo_pops_keep_each_message_group_in_order(mq):
    mq.create_topic("PopFifo", 2)
    keys = [f"g{i}" for i in range(4)]
    with shmq.Producer("pop-fifo-p", mq.namesrv) as producer:
        for seq in range(10):
            for key in keys:
                producer.send(shmq.Message("PopFifo", f"{key}:{seq}"), sharding_key=key)
    seen: dict[str, list[int]] = {k: [] for k in keys}
    lock = threading.Lock()

    def run(c: shmq.SimpleConsumer) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and sum(map(len, seen.values())) < 40:
            for m in c.receive(3, 10):
                key, seq = m.body.decode().split(":")
                with lock:
                    seen[key].append(int(seq))
                c.ack(m)

    members = [consumer(mq, "pop-fifo", "PopFifo", fifo=True) for _ in range(2)]
    try:
        threads = [threading.Thread(target=run, args=(c,)) for c in members]
        for t in threads:
            t.start()
        for t in threads:
            t.join(90)
    finally:
        for c in members:
            c.shutdown()
    assert seen == {k: list(range(10)) for k in keys}


def test_cli_consume_pop_and_pop_status(mq):
    send(mq, "PopCli", 6)
    runner = CliRunner()
    result = runner.invoke(cli, ["consume", "--pop", "-t", "PopCli", "-g", "pop-cli", "--from",
                                 "first", "--count", "6", "-n", mq.namesrv])  # fmt: skip
    assert result.exit_code == 0, (result.output, result.exception)
    lines = result.stdout.splitlines()
    assert len(lines) == 6 and all(line.startswith("PopCli q") for line in lines)
    assert sorted(line.split("body=")[1] for line in lines) == [f"PopCli-{i}" for i in range(6)]
    status = runner.invoke(cli, ["admin", "pop-status", "-g", "pop-cli", "--json",
                                 "-n", mq.namesrv])  # fmt: skip
    assert status.exit_code == 0, (status.output, status.exception)
    (row,) = json.loads(status.stdout)
    assert (row["group"], row["topic"], row["acked"], row["inFlight"]) == (
        "pop-cli", "PopCli", 6, 0)  # fmt: skip
    assert sum(row["popOffsets"].values()) == 6
    table = runner.invoke(cli, ["admin", "pop-status", "-g", "pop-cli", "-n", mq.namesrv])
    assert table.exit_code == 0 and "1 POP group(s)" in table.stdout
