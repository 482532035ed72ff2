"""The last broker metrics of issue 54 against a real broker: the transaction half messages
without an outcome per real topic, and the record bytes consumers got
(``rocketmq_throughput_out``) over shared memory, in bulk, and over TCP."""

from __future__ import annotations

import pytest
from metrics_scrape import Samples, sample, scrape_endpoint
from waiting import wait_for

from e2e_helpers import embedded
from shmq import LocalTransactionState, TransactionProducer
from shmq.broker.transaction.half_table import HalfTable, OpenHalf
from shmq.broker.transaction.records import HalfRecord
from shmq.client.producer.producer import Producer
from shmq.client.transport.queue_reader import QueueReader
from shmq.client.types import MessageQueue
from shmq.message import Message
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode
from spec_decoder import read_consume_queue


@pytest.fixture(scope="module")
def mq(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("more") / "store")
    conf = {"metrics_exporter_type": "PROM", "metrics_prom_exporter_port": 0}
    with embedded(root, **conf) as mq:
        yield mq


def scrape(mq) -> Samples:
    return scrape_endpoint(mq.broker.metrics.address)


value = sample


class Undecided:
    """A local transaction that never decides: every half message stays open."""

    def execute_local_transaction(self, _msg, _arg):
        return LocalTransactionState.UNKNOW

    def check_local_transaction(self, _msg):
        return LocalTransactionState.UNKNOW


def end(mq, group: str, half, kind: int) -> None:
    """END_TRANSACTION of ``half`` (8: commit, 12: rollback), two-way so it is done when
    this returns."""
    fields = {
        "producerGroup": group,
        "tranStateTableOffset": half.queue_offset,
        "commitLogOffset": int(half.offset_msg_id[-16:], 16),
        "commitOrRollback": kind,
    }
    with RemotingClient() as client:
        resp = client.invoke(
            mq.broker.address, RemotingCommand.request(RequestCode.END_TRANSACTION, fields)
        )
    assert resp.code == ResponseCode.SUCCESS, resp.remark


def half(queue_offset: int, topic: str, identity: int | None = None) -> HalfRecord:
    identity = queue_offset if identity is None else identity
    return HalfRecord(1000 + queue_offset, queue_offset, identity, "G", topic, 0, 0, 0, 0,
                      f"id{identity}", None, None)  # type: ignore[arg-type]  # fmt: skip


def test_the_half_table_counts_its_open_transactions_per_real_topic():
    """Every way a transaction opens or closes moves the count of its real topic: a scan's
    half, a check-back copy (the same transaction: no new count), an op record read back,
    an outcome."""
    table = HalfTable()
    for k, topic in enumerate(("A", "A", "B", "A")):
        table.seen_half(half(k, topic))
    assert table.open_per_topic() == {"A": 3, "B": 1}
    table.checked(OpenHalf.of(half(4, "A", identity=0)))  # a copy of transaction 0
    table.seen_half(half(4, "A", identity=0))  # and the scan reading it
    assert table.open_per_topic() == {"A": 3, "B": 1}
    table.seen_op(1, 0)
    table.finished(2, -1)
    assert table.open_per_topic() == {"A": 2}
    table.finished(0, 1)
    table.finished(3, 2)
    assert table.open_per_topic() == {}


def test_half_messages_count_the_open_transactions_of_their_real_topic(mq):
    topic, other, group = "HalfA", "HalfB", "more-tx"
    mq.create_topic(topic, 1)
    mq.create_topic(other, 1)
    with TransactionProducer(group, mq.namesrv, listener=Undecided()) as tx:
        halves = [tx.send_message_in_transaction(Message(topic, b"h%d" % i)) for i in range(3)]
        tx.send_message_in_transaction(Message(other, b"other"))
    # the transaction service notes new half messages at its next scan (within a second)
    wait_for(lambda: value(scrape(mq), "rocketmq_half_messages", topic=topic) == 3,
             what="3 half messages of HalfA open")  # fmt: skip
    assert value(scrape(mq), "rocketmq_half_messages", topic=other) == 1
    end(mq, group, halves[0], 8)
    end(mq, group, halves[1], 12)
    found = scrape(mq)  # an outcome closes its transaction at once
    assert value(found, "rocketmq_half_messages", topic=topic) == 1
    assert value(found, "rocketmq_half_messages", topic=other) == 1
    assert value(found, "rocketmq_commit_messages_total", topic=topic) == 1
    assert value(found, "rocketmq_rollback_messages_total", topic=topic) == 1
    end(mq, group, halves[2], 12)
    assert value(scrape(mq), "rocketmq_half_messages", topic=topic) is None  # none left


@pytest.mark.parametrize("how", ["shm", "shm-bulk", "tcp"])
def test_throughput_out_is_the_bytes_of_the_records_got(mq, how):
    """N messages of one size read by a group: its bytes out are N times their record's
    size as the consume queue (read by the independent decoder) has it."""
    topic, group, sent = f"Out-{how}", f"more-out-{how}", 25
    mq.create_topic(topic, 1)
    with Producer(f"{topic}-p", mq.namesrv) as producer:
        for i in range(sent):
            producer.send(Message(topic, b"%04d" % i + b"x" * 296))
    mqueue = MessageQueue(topic, mq.broker.config.broker_name, 0)
    transport = "tcp" if how == "tcp" else "auto"
    with QueueReader(group, mq.namesrv, transport=transport) as reader:
        offset = read = 0
        while offset < sent:
            if how == "shm-bulk":
                result = reader.pull_bulk(mqueue, offset, 7, timeout=1.0)
                read += len(result.batch) if result.batch is not None else 0
            else:
                result = reader.pull(mqueue, offset, 7, timeout=1.0)
                read += len(result.messages)
            offset = result.next_begin_offset
    assert read == sent
    units = read_consume_queue(mq.store, topic, 0)
    assert len(units) == sent and len({u.size for u in units}) == 1
    labels = {"topic": topic, "consumer_group": group}
    wait_for(lambda: value(scrape(mq), "rocketmq_messages_out_total", **labels) == sent,
             what=f"{sent} messages out of {topic}")  # fmt: skip
    assert value(scrape(mq), "rocketmq_throughput_out_total", **labels) == sent * units[0].size
