"""SQL92 subscriptions against real brokers: a lite-pull and a push consumer on shared memory
and over TCP each get exactly the messages whose properties match; CHECK_CLIENT_CONFIG
accepts a good expression and refuses a bad one with its position; a broker without
``enablePropertyFilter`` refuses a SQL92 subscription on either path."""

from __future__ import annotations

import base64
import json
import threading
import time

import pytest
import wire_client as wc
from waiting import wait_for

from e2e_helpers import cluster, shm_entries, shmq
from shmq import MessageSelector
from shmq.client.consumer.lite_pull import PullConsumer
from shmq.client.consumer.pop.simple import SimpleConsumer
from shmq.client.consumer.push import PushConsumer
from shmq.client.producer.producer import Producer
from shmq.client.transport.queue_reader import QueueReader
from shmq.client.types import ConsumeResult, MessageQueue
from shmq.errors import ConfigError, FilterExpressionError, ResponseError
from shmq.message import Message
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RequestCode

TOPIC = "SqlOrders"
N = 60
EXPRESSION = "amount >= 20 AND region IN ('eu', 'us') AND TAGS <> 'Skip'"
REFUSED = "The broker does not support consumer to filter message by SQL92"


def region(i: int) -> str:
    return ("eu", "us", "cn")[i % 3]


def tag(i: int) -> str:
    return "Skip" if i % 7 == 0 else "Paid"


WANTED = {f"o{i}".encode() for i in range(N) if i >= 20 and region(i) != "cn" and tag(i) != "Skip"}


@pytest.fixture(scope="module")
def sql_broker(tmp_path_factory):
    before = shm_entries()
    with cluster(tmp_path_factory.mktemp("sql"), enablePropertyFilter="true") as c:
        c.create_topic(TOPIC, 2)
        with Producer("sql-p", c.namesrv) as producer:
            for i in range(N):
                props = {"amount": str(i), "region": region(i)}
                if i == 5:
                    props["amount"] = "not a number"  # an evaluation error: not matched
                producer.send(Message(TOPIC, f"o{i}", tags=tag(i), properties=props))
        yield c
    assert shm_entries() - before == set()


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_lite_pull_consumer_gets_exactly_the_matching_messages(sql_broker, transport):
    consumer = PullConsumer(f"sql-lite-{transport}", sql_broker.namesrv, transport=transport,
                            consume_from_where="FIRST_OFFSET")  # fmt: skip
    consumer.subscribe(TOPIC, MessageSelector.by_sql(EXPRESSION))
    consumer.start()
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + 60
        while set(got) != WANTED and time.monotonic() < deadline:
            got += [m.body for m in consumer.poll(0.5)]
        time.sleep(0.5)
        got += [m.body for m in consumer.poll(0.5)]
    finally:
        consumer.shutdown()
    assert sorted(got) == sorted(WANTED)


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_push_consumer_gets_exactly_the_matching_messages(sql_broker, transport):
    got: list[bytes] = []
    lock = threading.Lock()

    def listener(msgs, _ctx):
        with lock:
            got.extend(m.body for m in msgs)
        return ConsumeResult.CONSUME_SUCCESS

    consumer = PushConsumer(f"sql-push-{transport}", sql_broker.namesrv, listener=listener,
                            transport=transport, consume_from_where="FIRST_OFFSET")  # fmt: skip
    consumer.subscribe(TOPIC, MessageSelector.by_sql(EXPRESSION))
    consumer.start()
    try:
        wait_for(lambda: len(got) >= len(WANTED), timeout=60, what="the matching messages")
        time.sleep(0.5)
    finally:
        consumer.shutdown()
    assert sorted(got) == sorted(WANTED)


def test_check_client_config_accepts_sql_and_names_a_bad_expressions_position(sql_broker):
    address = f"127.0.0.1:{sql_broker.broker_port}"

    def check(expression: str) -> None:
        sub = {"topic": TOPIC, "subString": expression, "expressionType": "SQL92"}
        body = {"clientId": "x", "group": "sql-check", "subscriptionData": sub}
        with RemotingClient() as client:
            client.invoke_json(address, RequestCode.CHECK_CLIENT_CONFIG, {}, body)

    check("a > 5")
    with pytest.raises(ResponseError) as err:
        check("a > 5 AND (b = ")
    assert err.value.code == 23  # SUBSCRIPTION_PARSE_FAILED
    assert "at position 16" in err.value.remark


def wire_pull_all(c: wc.WireClient, header: dict) -> list[bytes]:
    """Every record a PULL_MESSAGE subscription gets of TOPIC's queues, pulling on from
    ``nextBeginOffset`` past PULL_RETRY_IMMEDIATELY (nothing matched) to the end."""
    out: list[bytes] = []
    for queue_id in (0, 1):
        offset = 0
        while True:
            ext = header | {"queueId": str(queue_id), "queueOffset": str(offset)}
            resp = c.call(wc.PULL_MESSAGE, ext)
            if resp.code not in (wc.SUCCESS, 12):  # 12: PULL_RETRY_IMMEDIATELY
                break
            out += [r["body"] for r in wc.pulled_records(resp.body)]
            offset = int(resp.ext["nextBeginOffset"])
    return out


def test_pull_message_with_sql92_from_the_header_and_from_the_heartbeat(sql_broker):
    """A 4.x client's PULL_MESSAGE names ``expressionType=SQL92``, or (sysFlag without the
    subscription bit) relies on the subscription of its heartbeat: the broker filters."""
    with wc.WireClient(f"127.0.0.1:{sql_broker.broker_port}") as c:
        header = wc.pull_header("sql-wire", TOPIC, 0, 0, sys_flag=wc.SUBSCRIPTION,
                                subscription=EXPRESSION) | {"expressionType": "SQL92"}  # fmt: skip
        assert sorted(wire_pull_all(c, header)) == sorted(WANTED)
        beat = {"clientID": "127.0.0.1@java", "producerDataSet": [], "consumerDataSet": [{
            "groupName": "sql-beat", "consumeType": "CONSUME_PASSIVELY",
            "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
            "unitMode": False, "subscriptionDataSet": [{
                "topic": TOPIC, "subString": EXPRESSION, "tagsSet": [], "codeSet": [],
                "subVersion": 7, "expressionType": "SQL92",
                "classFilterMode": False}]}]}  # fmt: skip
        assert c.call(34, {}, json.dumps(beat).encode()).code == wc.SUCCESS  # HEART_BEAT
        header = wc.pull_header("sql-beat", TOPIC, 0, 0, sys_flag=0)
        assert sorted(wire_pull_all(c, header)) == sorted(WANTED)
        bad = header | {"consumerGroup": "sql-wire", "sysFlag": str(wc.SUBSCRIPTION),
                        "subscription": "amount >", "expressionType": "SQL92"}  # fmt: skip
        assert c.call(wc.PULL_MESSAGE, bad).code == 23  # SUBSCRIPTION_PARSE_FAILED


def test_cli_consume_with_sql(sql_broker):
    args = ("consume", "-n", sql_broker.namesrv, "--topic", TOPIC, "--group", "sql-cli",
            "--from", "first", "--timeout", "3", "--json")  # fmt: skip
    done = shmq(*args, "--sql", EXPRESSION)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    bodies = sorted(base64.b64decode(json.loads(line)["body"]) for line in lines)
    assert bodies == sorted(WANTED)
    bad = shmq(*args, "--sql", "amount >")
    assert bad.returncode == 2 and "at position 9" in bad.stderr


def test_selectors_in_the_client():
    assert MessageSelector.by_tag("A || B").expression == "A || B"
    assert not MessageSelector.by_tag().is_sql and MessageSelector.by_sql("a > 1").is_sql
    with pytest.raises(FilterExpressionError, match="at position 3"):
        MessageSelector.by_sql("a > 'x'")


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_simple_consumer_pops_exactly_the_matching_messages(sql_broker, transport):
    """POP with ``expType=SQL92``: the broker pops only what matches and moves the group's
    offset past the rest (a second consumer of the group finds nothing left)."""
    group = f"sql-simple-{transport}"
    subs = {TOPIC: MessageSelector.by_sql(EXPRESSION)}
    got: list[bytes] = []
    consumer = SimpleConsumer(group, sql_broker.namesrv, subscriptions=subs,
                              transport=transport, consume_from_where="FIRST_OFFSET",
                              await_duration=0.5)  # fmt: skip
    consumer.start()
    with consumer:
        deadline = time.monotonic() + 60
        while len(got) < len(WANTED) and time.monotonic() < deadline:
            msgs = consumer.receive(32)
            got += [m.body for m in msgs]
            for m in msgs:
                consumer.ack(m)
        assert consumer.receive(32) == []
    assert sorted(got) == sorted(WANTED)


def test_pop_message_with_sql92_over_the_wire(sql_broker):
    """A RocketMQ 5 remoting client's POP_MESSAGE names ``expType=SQL92``; a bad expression
    is SUBSCRIPTION_PARSE_FAILED naming its position."""
    header = {"consumerGroup": "sql-pop-wire", "topic": TOPIC, "queueId": "-1",
              "maxMsgNums": "32", "invisibleTime": "60000", "pollTime": "0",
              "bornTime": str(int(time.time() * 1000)), "initMode": "0",
              "expType": "SQL92", "exp": EXPRESSION}  # fmt: skip
    got: list[bytes] = []
    with wc.WireClient(f"127.0.0.1:{sql_broker.broker_port}") as c:
        for _ in range(20):
            resp = c.call(200050, header)  # POP_MESSAGE
            if resp.code != wc.SUCCESS:
                break
            got += [r["body"] for r in wc.pulled_records(resp.body)]
        assert sorted(got) == sorted(WANTED)
        bad = c.call(200050, header | {"exp": "amount >"})
        assert bad.code == 23 and "at position 9" in bad.remark  # SUBSCRIPTION_PARSE_FAILED


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_a_broker_without_property_filters_refuses_sql(make_broker, transport):
    broker, namesrv = make_broker()
    with Producer("nosql-p", namesrv) as producer:
        producer.send(Message("NoSql", b"x", properties={"a": "9"}))
    mq = MessageQueue("NoSql", broker.config.broker_name, 0)
    with QueueReader("nosql-g", namesrv, transport=transport) as reader:
        wait_for(lambda: sum(reader.max_offset(q) for q in reader.queues("NoSql")) == 1,
                 what="the message dispatched")  # fmt: skip
        with pytest.raises(ResponseError) as err:
            reader.pull(mq, 0, 32, MessageSelector.by_sql("a > 1"))
        assert err.value.code == 1 and err.value.remark == REFUSED  # SYSTEM_ERROR
        assert reader.pull(mq, 0, 32, "*").next_begin_offset >= 0  # tags still work


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_bulk_pulls_and_a_bulk_push_consumer_get_exactly_the_matching_messages(
    sql_broker, transport
):
    selector = MessageSelector.by_sql(EXPRESSION)
    with QueueReader(f"sql-bulk-r-{transport}", sql_broker.namesrv, transport=transport) as r:
        got = []
        for queue_id in (0, 1):
            mq = MessageQueue(TOPIC, "broker-a", queue_id)
            offset = 0
            while offset < r.max_offset(mq):
                result = r.pull_bulk(mq, offset, 4096, selector)
                if result.batch is not None:
                    got += list(result.batch)
                offset = result.next_begin_offset
    assert sorted(got) == sorted(WANTED)
    bodies: list[bytes] = []
    lock = threading.Lock()

    def listener(batch, _ctx):
        with lock:
            bodies.extend(batch)
        return ConsumeResult.CONSUME_SUCCESS

    consumer = PushConsumer(f"sql-bulk-{transport}", sql_broker.namesrv, listener=listener,
                            bulk=True, transport=transport,
                            consume_from_where="FIRST_OFFSET")  # fmt: skip
    consumer.subscribe(TOPIC, selector)
    consumer.start()
    try:
        wait_for(lambda: len(bodies) >= len(WANTED), timeout=60, what="the matching messages")
        time.sleep(0.5)
    finally:
        consumer.shutdown()
    assert sorted(bodies) == sorted(WANTED)


@pytest.mark.parametrize("over_tcp", [False, True])
def test_the_spark_sources_sql_option_reads_exactly_the_matching_rows(sql_broker, over_tcp):
    """What an executor reads for option ``sql``: from the store's files, or pulled from the
    broker (either way the expression is evaluated on the records' properties)."""
    pytest.importorskip("pyarrow")
    from shmq.spark.options import parse_sql
    from shmq.spark.remote import read_range as pull_range
    from shmq.spark.scan import read_range
    from shmq.spark.spec import BrokerSource, ScanSpec, StoreLayout

    source = (BrokerSource(f"127.0.0.1:{sql_broker.broker_port}") if over_tcp
              else StoreLayout(sql_broker.store, 1 << 20, 20 * 1024))  # fmt: skip
    spec = ScanSpec(source, None, False, True, parse_sql(EXPRESSION))
    read = pull_range if over_tcp else read_range
    with QueueReader("sql-spark-ends", sql_broker.namesrv) as reader:
        ends = [reader.max_offset(MessageQueue(TOPIC, "broker-a", q)) for q in (0, 1)]
    rows = [body for queue_id in (0, 1) for batch in read(spec, TOPIC, queue_id, 0, ends[queue_id])
            for body in batch.column("body").to_pylist()]  # fmt: skip
    assert sorted(rows) == sorted(WANTED)
    with pytest.raises(ConfigError, match=r"option sql: .*at position 9"):
        parse_sql("amount >")
