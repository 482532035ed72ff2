"""Compressed bodies against a real broker: a record compressed as RocketMQ's Java producer
writes it (zlib level 5, sysFlag 0x301) reads back as the original body on every read path
(QueueReader over shared memory and TCP, one message and bulk, PushConsumer, SimpleConsumer
and its bulk receive, Spark's decode, the admin queries, the DLQ and its resend, the gRPC
proxy's message); a body that does not decompress is an error for that message only; LZ4
and ZSTD when their libraries are installed."""

from __future__ import annotations

import base64
import importlib.util
import json
import threading
import zlib

import pytest
from waiting import wait_for

from e2e_helpers import embedded, shmq
from shmq.body_compression import CompressionType, compression_sysflag
from shmq.client.admin.admin import Admin
from shmq.client.consumer.pop.simple import SimpleConsumer
from shmq.client.consumer.push import PushConsumer
from shmq.client.producer.producer import Producer
from shmq.client.producer.records import ONE_SYSFLAG, TopicRecords, one_record
from shmq.client.transport.queue_reader import QueueReader
from shmq.client.types import ConsumeResult, MessageQueue
from shmq.errors import BodyDecompressionError, ConfigError
from shmq.message import Message
from shmq.proxy.messages import incoming
from shmq.proxy.v2 import definition_pb2 as pb
from shmq.spark.scan import read_range
from shmq.spark.spec import ScanSpec, StoreLayout

THRESHOLD = 4096
# a body the way a Java producer sees one: text that compresses well, over the threshold
BIG = b"".join(b"order %06d paid; " % i for i in range(600))
SMALL = b"small body"
JAVA_ZLIB = 0x301
CQ_FILE_SIZE = 300_000 * 20


@pytest.fixture(scope="module")
def mq(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("compressed") / "store")
    with embedded(root, message_delay_level=" ".join(["1s"] * 18)) as broker:
        broker.store_root = root
        yield broker


def _read(reader: QueueReader, mq_: MessageQueue, count: int, bulk: bool = False):
    got: list = []

    def all_read() -> bool:
        if bulk:
            result = reader.pull_bulk(mq_, 0, count, timeout=0.5)
            got[:] = [result.batch] if result.batch is not None else []
            return bool(got) and len(got[0]) >= count
        got.extend(reader.pull(mq_, len(got), count - len(got), timeout=0.5).messages)
        return len(got) >= count

    wait_for(all_read, interval=0, what=f"{count} messages of {mq_}")
    return got[0] if bulk else got


def test_a_java_style_record_reads_back_on_every_read_path(mq):
    topic, group = "Compressed", "compressed-push"
    mq.create_topic(topic, 1)
    bodies = [BIG, SMALL, BIG[: THRESHOLD - 1], BIG[:THRESHOLD], BIG[: THRESHOLD + 1]]
    with Producer("compressed-p", mq.namesrv) as producer:
        sent = [producer.send(Message(topic, b, keys=[f"k{i}"])) for i, b in enumerate(bodies)]
    queue = MessageQueue(topic, "broker-a", 0)
    with QueueReader("compressed-r", mq.namesrv, transport="shm") as shm:
        stored = _read(shm, queue, len(bodies))
        # as the Java client stores it: zlib level 5, COMPRESSED | ZLIB type bits
        for msg, body in zip(stored, bodies, strict=True):
            if len(body) >= THRESHOLD:
                assert msg.sysflag & 0x701 == JAVA_ZLIB
                assert msg.stored_body == zlib.compress(body, 5)
            else:
                assert msg.sysflag & 0x701 == 0 and msg.stored_body == body
            assert msg.body == body
        assert [b.body(i) for b in [_read(shm, queue, 5, bulk=True)] for i in range(5)] == bodies
    with QueueReader("compressed-r", mq.namesrv, transport="tcp") as tcp:
        assert [m.body for m in _read(tcp, queue, len(bodies))] == bodies
        batch = _read(tcp, queue, len(bodies), bulk=True)
        assert list(batch) == bodies and batch.errors == {}

    got: list[bytes] = []
    done = threading.Event()

    def listener(msgs, ctx):
        got.extend(m.body for m in msgs)
        if len(got) >= len(bodies):
            done.set()
        return ConsumeResult.CONSUME_SUCCESS

    for transport in ("shm", "tcp"):
        got.clear()
        done.clear()
        pc = PushConsumer(f"{group}-{transport}", mq.namesrv, listener=listener,
                          transport=transport, consume_from_where="FIRST_OFFSET")  # fmt: skip
        pc.subscribe(topic)
        pc.start()
        try:
            assert done.wait(30)
        finally:
            pc.shutdown()
        assert sorted(got) == sorted(bodies)

    for transport in ("shm", "tcp"):
        for bulk in (False, True):
            assert sorted(_popped(mq, topic, transport, bulk, len(bodies))) == sorted(bodies)

    layout = StoreLayout(mq.store_root, 1 << 20, CQ_FILE_SIZE)
    spark = [b for rb in read_range(ScanSpec(layout, None, False, True), topic, 0, 0, 5)
             for b in rb.column("body").to_pylist()]  # fmt: skip
    assert spark == bodies

    with Admin(mq.namesrv) as admin:
        by_id = admin.query_msg_by_id(stored[0].offset_msg_id)
        assert base64.b64decode(by_id["body"]) == BIG and by_id["sysFlag"] & 1 == 0
        by_key = wait_for(lambda: admin.query_msg_by_key(topic, "k0"), what="indexed")
        assert base64.b64decode(by_key[0]["body"]) == BIG
        assert sent[0].msg_id == by_key[0]["msgId"]

    # the gRPC proxy hands the body as stored with GZIP, as RocketMQ's proxy does
    grpc_msg = incoming(stored[0], None)
    assert grpc_msg.system_properties.body_encoding == pb.GZIP
    assert zlib.decompress(grpc_msg.body) == BIG
    assert incoming(stored[1], None).system_properties.body_encoding == pb.IDENTITY


def _popped(mq, topic: str, transport: str, bulk: bool, count: int) -> list[bytes]:
    """The bodies a SimpleConsumer pops (``receive``, or ``receive_batch`` when ``bulk``)."""
    bodies: list[bytes] = []
    group = f"compressed-simple-{transport}-{bulk}"
    with SimpleConsumer(
        group,
        mq.namesrv,
        subscriptions={topic: "*"},
        await_duration=0.5,
        consume_from_where="FIRST_OFFSET",
        transport=transport,
    ) as consumer:
        consumer.start()

        def received() -> bool:
            if bulk:
                batch = consumer.receive_batch(32)
                bodies.extend(batch)
                consumer.ack_batch(batch)
            else:
                msgs = consumer.receive(32)
                bodies.extend(m.body for m in msgs)
                for m in msgs:
                    consumer.ack(m)
            return len(bodies) >= count

        wait_for(received, interval=0, what=f"{count} popped")
    return bodies


def test_the_dlq_shows_and_resends_the_original_body(mq):
    topic, group = "CompressedDlq", "compressed-dlq"
    mq.create_topic(topic, 1)
    failed = threading.Event()

    def listener(msgs, ctx):
        failed.set()
        return ConsumeResult.RECONSUME_LATER

    pc = PushConsumer(group, mq.namesrv, listener=listener, max_reconsume_times=0,
                      consume_from_where="CONSUME_FROM_FIRST_OFFSET")  # fmt: skip
    pc.subscribe(topic)
    pc.start()
    try:
        with Producer("compressed-dlq-p", mq.namesrv) as producer:
            producer.send(Message(topic, BIG))
        with Admin(mq.namesrv) as admin:
            dead = wait_for(lambda: admin.query_dlq(group), timeout=30, what="a DLQ message")
            assert base64.b64decode(dead[0]["body"]) == BIG
            assert admin.resend_dlq(group)[0].get("error") is None
    finally:
        pc.shutdown()
    with QueueReader("compressed-dlq-r", mq.namesrv) as reader:
        back = _read(reader, MessageQueue(topic, "broker-a", 0), 2)
        # resent by a producer as any send: compressed again, flag and body consistent
        assert [m.body for m in back] == [BIG, BIG]
        assert back[1].sysflag & 0x701 == JAVA_ZLIB


def _bad_record(producer: Producer, topic: str, body: bytes) -> None:
    """A record flagged ZLIB-compressed whose body is not zlib (what a broken client might
    store), sent through the producer's own record path."""
    one = one_record(TopicRecords(topic, topic.encode()), Message(topic, body), body,
                     producer._uniq, JAVA_ZLIB)  # fmt: skip
    assert one[ONE_SYSFLAG] == JAVA_ZLIB
    producer.send_record(topic, one)


def test_a_body_that_does_not_decompress_fails_that_message_only(mq):
    topic = "CompressedBad"
    mq.create_topic(topic, 1)
    with Producer("compressed-bad-p", mq.namesrv) as producer:
        producer.send(Message(topic, BIG))
        _bad_record(producer, topic, b"not zlib at all")
        producer.send(Message(topic, SMALL))
    queue = MessageQueue(topic, "broker-a", 0)
    for transport in ("shm", "tcp"):
        with QueueReader("compressed-bad-r", mq.namesrv, transport=transport) as reader:
            first, bad, last = _read(reader, queue, 3)
            assert first.body == BIG and last.body == SMALL
            with pytest.raises(BodyDecompressionError, match=f"{topic}:0@1.*ZLIB"):
                bad.body  # noqa: B018
            assert bad.stored_body == b"not zlib at all" and "not zlib" in repr(bad)
            batch = _read(reader, queue, 3, bulk=True)
            assert batch.body(0) == BIG and batch.body(2) == SMALL
            assert list(batch.errors) == [1] and batch.body(1) == b"not zlib at all"

    good: list[bytes] = []
    failures: list[str] = []
    done = threading.Event()

    def listener(msgs, ctx):
        try:
            good.extend(m.body for m in msgs)
        except BodyDecompressionError as exc:
            failures.append(str(exc))
            raise  # that message fails, and comes back from the retry topic
        finally:
            if {BIG, SMALL} <= set(good) and len(failures) >= 2:
                done.set()
        return ConsumeResult.CONSUME_SUCCESS

    pc = PushConsumer("compressed-bad-push", mq.namesrv, listener=listener,
                      consume_from_where="CONSUME_FROM_FIRST_OFFSET")  # fmt: skip
    pc.subscribe(topic)
    pc.start()
    try:
        assert done.wait(30), (good, failures)  # the consumer goes on; the bad one is retried
    finally:
        pc.shutdown()
    with Admin(mq.namesrv) as admin:
        found = wait_for(lambda: admin.query_msg_by_time(topic, 0), what="messages by time")
        assert "does not decompress as ZLIB" in found[1]["bodyError"]
        assert base64.b64decode(found[1]["body"]) == b"not zlib at all"


@pytest.mark.parametrize("name", ["LZ4", "ZSTD"])
def test_lz4_and_zstd_records(mq, name):
    package = {"LZ4": "lz4", "ZSTD": "zstandard"}[name]
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"{package} is not installed (the compression extra)")
    topic = f"Compressed{name.title()}"
    mq.create_topic(topic, 1)
    for transport in ("shm", "tcp"):
        with Producer(f"compressed-{name}-{transport}", mq.namesrv, compress_type=name,
                      transport=transport) as producer:  # fmt: skip
            producer.send(Message(topic, BIG))
            producer.send_async(Message(topic, BIG[:5000])).result(10)
            producer.send_oneway(Message(topic, BIG[:6000]))
    with QueueReader("compressed-r", mq.namesrv) as reader:
        msgs = _read(reader, MessageQueue(topic, "broker-a", 0), 6)
        flag = compression_sysflag(CompressionType[name])
        assert [m.sysflag & 0x701 for m in msgs] == [flag] * 6
        assert sorted(m.body for m in msgs) == sorted([BIG, BIG[:5000], BIG[:6000]] * 2)


def test_batches_are_not_compressed_and_bulks_only_when_asked(mq):
    topic = "CompressedBulk"
    mq.create_topic(topic, 1)
    queue = MessageQueue(topic, "broker-a", 0)
    for transport in ("shm", "tcp"):
        with Producer(f"compressed-bulk-{transport}", mq.namesrv, transport=transport) as p:
            p.send_batch([Message(topic, BIG), Message(topic, BIG)], sharding_key="q")
            p.send_bulk(topic, [BIG, SMALL])
            p.send_bulk(topic, [BIG, SMALL], compress=True)
    with QueueReader("compressed-bulk-r", mq.namesrv) as reader:
        msgs = _read(reader, queue, 12)
        assert [m.sysflag & 0x701 for m in msgs] == ([0] * 4 + [JAVA_ZLIB] * 2) * 2
        assert [m.body for m in msgs] == [BIG, BIG, BIG, SMALL, BIG, SMALL] * 2
        batch = _read(reader, queue, 12, bulk=True)
        assert list(batch) == [BIG, BIG, BIG, SMALL, BIG, SMALL] * 2 and not batch.errors


def test_async_tcp_sends_of_compressed_bodies_are_not_batched_with_plain_ones(mq):
    topic = "CompressedAsync"
    mq.create_topic(topic, 1)
    bodies = [BIG if i % 3 == 0 else b"plain %d" % i for i in range(60)]
    with Producer("compressed-async", mq.namesrv, transport="tcp") as producer:
        futures = [producer.send_async(Message(topic, b)) for b in bodies]
        for f in futures:
            f.result(10)
    with QueueReader("compressed-async-r", mq.namesrv) as reader:
        msgs = _read(reader, MessageQueue(topic, "broker-a", 0), len(bodies))
        # a compressed one goes alone, beside the batches: async sends keep no order
        assert sorted((m.body, m.sysflag & 0x701) for m in msgs) == sorted(
            (b, JAVA_ZLIB if b is BIG else 0) for b in bodies
        )


def test_bad_compression_options_are_refused():
    with pytest.raises(ConfigError, match="compress_type"):
        Producer("bad-compress", "127.0.0.1:1", compress_type="SNAPPY")
    with pytest.raises(ConfigError, match="compress_level"):
        Producer("bad-compress", "127.0.0.1:1", compress_level=10)
    with pytest.raises(ConfigError, match="compress_msg_body_over_howmuch"):
        Producer("bad-compress", "127.0.0.1:1", compress_msg_body_over_howmuch=-1)


def test_shmq_consume_prints_the_original_body(mq):
    """``shmq consume --json`` prints the decompressed body (and the flag cleared)."""
    topic = "CompressedCli"
    mq.create_topic(topic, 1)
    with Producer("compressed-cli-p", mq.namesrv) as producer:
        producer.send(Message(topic, BIG))
    done = shmq("consume", "-n", mq.namesrv, "--topic", topic, "--group", "compressed-cli",
                "--from", "first", "--count", "1", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    printed = json.loads(line)
    assert base64.b64decode(printed["body"]) == BIG and not printed["sysFlag"] & 1
