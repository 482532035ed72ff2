"""The exactly-once sink (``exactlyOnce=true``): a streaming query whose driver is SIGKILLed
in an epoch's commit (half of its ENDs sent) and restarted from its checkpoint, and one whose
broker
is SIGKILLed between commits and their op records, deliver every row exactly once (the sink
topic's multiset of bodies against the source's); a batch job run again with its
``jobId`` delivers nothing twice.

The module has its own namesrv and broker (the broker is killed; the namesrv keeps the
sink's ledger in a KV file of the test's own) with quick check-backs."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from waiting import wait_for

from e2e_helpers import cluster, env, shm_entries
from shmq import half_messages as hm
from shmq.client.admin.admin import Admin
from shmq.client.producer.producer import Producer
from shmq.client.transaction.types import LocalTransactionState as S
from shmq.errors import ConfigError
from shmq.message import Message
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RequestCode
from shmq.spark.options import DEFAULT_TRANSACTIONAL_GROUP, parse_write_options
from shmq.spark.transactional_sink import (
    EPOCH,
    KV_NAMESPACE,
    SCOPE,
    WRITE_ID,
    EpochChecker,
    Halves,
    Ledger,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TX_CONF = {"transactionTimeOut": 1000, "transactionCheckInterval": 500}

# A streaming query from topic argv[2] to topic argv[3] through the exactly-once sink, run
# until the source is drained (availableNow), in epochs of argv[5] rows, on master argv[7]
# (local[2, 3]: a failed task is tried again, up to 3 attempts).
DRIVER = textwrap.dedent(
    """
    import sys
    from pyspark.sql import SparkSession

    namesrv, source, sink, checkpoint, per_epoch, local, master = sys.argv[1:8]
    spark = (
        SparkSession.builder.master(master)
        .config("spark.ui.enabled", "false")
        .config("spark.local.dir", local)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    query = (
        spark.readStream.format("shmq").option("namesrv", namesrv).option("topic", source)
        .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", per_epoch)
        .load().select("body")
        .writeStream.format("shmq").option("namesrv", namesrv).option("topic", sink)
        .option("exactlyOnce", "true").option("writeBatchSize", "500")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True).start()
    )
    query.awaitTermination()
    print("drained", flush=True)
    spark.stop()
    """
)


@pytest.fixture(scope="module")
def eos_cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("eos-cluster")
    before = shm_entries()
    kv = ("--kv-config-path", str(tmp / "kvConfig.json"))
    with cluster(tmp, kv, defaultTopicQueueNums=4, **TX_CONF) as c:
        yield c
    assert shm_entries() - before == set()


def _produce(namesrv: str, topic: str, start: int, n: int) -> list[bytes]:
    bodies = [f"row-{i}".encode() for i in range(start, start + n)]
    with Producer("eos-test-source", namesrv) as producer:
        for a in range(0, n, 500):
            producer.send_bulk(topic, bodies[a : a + 500])
    return bodies


def _sink_bodies(spark, namesrv: str, topic: str) -> collections.Counter:
    rows = spark.read.format("shmq").option("namesrv", namesrv).option("topic", topic).load()
    return collections.Counter(bytes(r.body) for r in rows.select("body").collect())


def _epochs(namesrv: str) -> list[str]:
    with Admin(namesrv) as admin:
        return sorted(admin.kv_list(KV_NAMESPACE))


# Loaded by every Python process of a crashing run (a ``sitecustomize`` on its path), armed
# once (a file): with SHMQ_TEST_CRASH=commit, the sink's commit ends half of its half
# messages, then SIGKILLs the run's session (driver, JVM and workers: a crash of the
# driver in the middle of the commit); with SHMQ_TEST_CRASH=task, a task's Python worker
# SIGKILLs itself after storing its first chunk of half messages.
CRASH_HOOK = textwrap.dedent(
    """
    import os
    import signal

    from shmq.spark import transactional_sink as tx

    _end_halves = tx.end_halves

    def crash():
        # every process of the run's session (driver, JVM, workers), then this one
        session = os.getsid(0)
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) != os.getpid():
                try:
                    if os.getsid(int(name)) == session:
                        os.kill(int(name), signal.SIGKILL)
                except OSError:
                    pass
        os.kill(os.getpid(), signal.SIGKILL)

    def disarmed():
        try:
            os.remove(os.environ["SHMQ_TEST_CRASH_ARMED"])
            return True
        except FileNotFoundError:
            return False

    def end_halves(opts, halves, *, commit):
        if commit and halves and disarmed():
            _end_halves(opts, halves[: len(halves) // 2], commit=True)
            crash()
        return _end_halves(opts, halves, commit=commit)

    _send_chunk = tx.HalfSender._send_chunk

    def send_chunk(self, topic, chunk, tags):
        status = _send_chunk(self, topic, chunk, tags)
        if disarmed():
            os.kill(os.getpid(), signal.SIGKILL)
        return status

    if os.environ["SHMQ_TEST_CRASH"] == "commit":
        tx.end_halves = end_halves
    else:
        tx.HalfSender._send_chunk = send_chunk
    """
)


def _stream(c, tmp_path, source: str, sink: str, per_epoch: int, crash: str | None,
            master: str = "local[2]"):  # fmt: skip
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    args = [sys.executable, str(script), c.namesrv, source, sink, str(tmp_path / "ckpt"),
            str(per_epoch), str(tmp_path / "local"), master]  # fmt: skip
    environ = env()
    if crash:
        environ["SHMQ_TEST_CRASH"] = crash
        hook = tmp_path / "hook"
        hook.mkdir()
        (hook / "sitecustomize.py").write_text(CRASH_HOOK)
        (tmp_path / "armed").touch()
        environ["SHMQ_TEST_CRASH_ARMED"] = str(tmp_path / "armed")
        environ["PYTHONPATH"] = f"{hook}{os.pathsep}{environ['PYTHONPATH']}"
    log = tmp_path / ("crash.log" if crash else "restart.log")
    # its own session: killing the group kills the driver, its JVM and workers alike
    with open(log, "ab") as out:
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=environ,
                                start_new_session=True)  # fmt: skip


def _noted(tmp_path) -> list[str]:
    """The epochs Spark noted done in the query's checkpoint."""
    return sorted(n for n in os.listdir(tmp_path / "ckpt" / "commits") if n.isdigit())


def _kill_group(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(60)


@pytest.mark.crash
def test_driver_killed_in_a_commit_delivers_every_row_once(spark, eos_cluster, tmp_path):
    c = eos_cluster
    c.create_topic("EosDriverSrc", 4)
    c.create_topic("EosDriverSink", 4)
    sent = _produce(c.namesrv, "EosDriverSrc", 0, 12_000)
    before = set(_epochs(c.namesrv))
    first = _stream(c, tmp_path, "EosDriverSrc", "EosDriverSink", 4000, crash="commit")
    try:
        assert first.wait(300) == -signal.SIGKILL
    finally:
        _kill_group(first)
    assert not (tmp_path / "armed").exists()  # the crash came in a commit
    [entry] = set(_epochs(c.namesrv)) - before  # epoch 0's commit point passed, not noted
    query, epoch = entry.rsplit("@", 1)
    assert epoch == "0" and _noted(tmp_path) == []
    partial = _sink_bodies(spark, c.namesrv, "EosDriverSink")
    assert 0 < sum(partial.values()) < 4000  # half of epoch 0 delivered when it crashed
    second = _stream(c, tmp_path, "EosDriverSrc", "EosDriverSink", 4000, crash=None)
    try:
        assert second.wait(300) == 0, (tmp_path / "restart.log").read_text()[-3000:]
    finally:
        _kill_group(second)
    assert _sink_bodies(spark, c.namesrv, "EosDriverSink") == collections.Counter(sent)
    # epoch 0 replayed and committed once, then 1 and 2; a stream keeps its last 2 entries
    assert _noted(tmp_path) == ["0", "1", "2"]
    assert [k for k in _epochs(c.namesrv) if k.startswith(query)] == [f"{query}@1", f"{query}@2"]


@pytest.mark.crash
def test_a_task_killed_mid_write_is_tried_again_and_every_row_delivered_once(
    spark, eos_cluster, tmp_path
):
    c = eos_cluster
    c.create_topic("EosTaskSrc", 4)
    c.create_topic("EosTaskSink", 4)
    sent = _produce(c.namesrv, "EosTaskSrc", 0, 8000)
    run = _stream(c, tmp_path, "EosTaskSrc", "EosTaskSink", 4000, crash="task",
                  master="local[2,3]")  # fmt: skip
    try:
        assert run.wait(300) == 0, (tmp_path / "crash.log").read_text()[-3000:]
    finally:
        _kill_group(run)
    assert not (tmp_path / "armed").exists()  # a worker died after storing half messages
    # its attempt's halves are in no commit: only the retried attempt's rows are delivered
    assert _sink_bodies(spark, c.namesrv, "EosTaskSink") == collections.Counter(sent)


def _op_topic_writable(c, writable: bool) -> None:
    """The op topic read-only makes the broker store commits and refuse their op records:
    what a SIGKILL between the two leaves (the broker's restart makes it writable again)."""
    with RemotingClient() as client:
        client.invoke_json(c.main.address, RequestCode.UPDATE_AND_CREATE_TOPIC,
                           {"topic": hm.OP_TOPIC, "readQueueNums": 1, "writeQueueNums": 1,
                            "perm": 6 if writable else 4})  # fmt: skip


def _stream_in_session(spark, c, source: str, sink: str, checkpoint: str) -> None:
    query = (
        spark.readStream.format("shmq")
        .option("namesrv", c.namesrv)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        .load()
        .select("body")
        .writeStream.format("shmq")
        .option("namesrv", c.namesrv)
        .option("topic", sink)
        .option("exactlyOnce", "true")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert query.exception() is None


@pytest.mark.crash
def test_broker_killed_between_commits_and_op_records_delivers_every_row_once(
    spark, eos_cluster, tmp_path
):
    c = eos_cluster
    c.create_topic("EosBrokerSrc", 2)
    c.create_topic("EosBrokerSink", 2)
    checkpoint = str(tmp_path / "ckpt")
    sent = _produce(c.namesrv, "EosBrokerSrc", 0, 3000)
    _stream_in_session(spark, c, "EosBrokerSrc", "EosBrokerSink", checkpoint)
    _op_topic_writable(c, False)
    sent += _produce(c.namesrv, "EosBrokerSrc", 3000, 3000)
    try:
        _stream_in_session(spark, c, "EosBrokerSrc", "EosBrokerSink", checkpoint)
        assert _sink_bodies(spark, c.namesrv, "EosBrokerSink") == collections.Counter(sent)
    finally:
        c.kill_supervisor()
        c.start_broker()
    with open(c.main.proc.log_path) as f:  # type: ignore[union-attr]
        recovered = [line for line in f if "commit(s) given their op record" in line]
    assert recovered and " 0 commit(s)" not in recovered[-1]
    sent += _produce(c.namesrv, "EosBrokerSrc", 6000, 3000)
    _stream_in_session(spark, c, "EosBrokerSrc", "EosBrokerSink", checkpoint)
    assert _sink_bodies(spark, c.namesrv, "EosBrokerSink") == collections.Counter(sent)
    with Admin(c.namesrv) as admin:  # every half ended: nothing left to check back
        wait_for(lambda: not admin.trans_status("shmq-spark-eos-writer"), timeout=60,
                 what="no half message of the sink pending")  # fmt: skip


def test_batch_job_run_again_with_its_job_id_delivers_nothing_twice(spark, eos_cluster):
    c = eos_cluster
    c.create_topic("EosBatch", 4)
    df = spark.createDataFrame([(f"b-{i}".encode(),) for i in range(2000)], "body binary")
    for _ in range(2):  # the job retried whole: same jobId
        (
            df.write.format("shmq")
            .option("namesrv", c.namesrv)
            .option("topic", "EosBatch")
            .option("exactlyOnce", "true")
            .option("jobId", "nightly-42")
            .mode("append")
            .save()
        )
    got = _sink_bodies(spark, c.namesrv, "EosBatch")
    assert got == collections.Counter(f"b-{i}".encode() for i in range(2000))
    assert "job:nightly-42@0" in _epochs(c.namesrv)


def test_options_exactly_once_and_job_id():
    opts = parse_write_options({"namesrv": "127.0.0.1:9876", "exactlyOnce": "true"})
    assert opts.exactly_once and opts.job_id is None
    assert opts.producer_group == DEFAULT_TRANSACTIONAL_GROUP
    assert not parse_write_options({"namesrv": "127.0.0.1:9876"}).exactly_once
    job = parse_write_options({"namesrv": "n:1", "exactlyOnce": "true", "jobId": "etl.7:a-b"})
    assert job.job_id == "etl.7:a-b"
    for options, error in (
        ({"jobId": "j"}, "jobId is for exactlyOnce=true"),
        ({"exactlyOnce": "true", "jobId": "a b"}, "jobId must be"),
        ({"exactlyOnce": "yes"}, "exactlyOnce must be true or false"),
    ):
        with pytest.raises(ConfigError, match=error):
            parse_write_options({"namesrv": "127.0.0.1:9876", **options})


def test_the_ledger_keeps_half_locations_and_answers_check_backs(eos_cluster):
    opts = parse_write_options({"namesrv": eos_cluster.namesrv, "exactlyOnce": "true"})
    queue_offsets = np.arange(10_000, 30_000, dtype=np.int64)
    commit_log_offsets = np.cumsum(np.full(20_000, 171, dtype=np.int64)) + (1 << 33)
    ledger = Ledger(opts)
    try:
        ledger.put("q-ledger", 7, {"w1": [Halves("127.0.0.1:1", queue_offsets,
                                                  commit_log_offsets)]})  # fmt: skip
        [back] = ledger.get("q-ledger", 7)["w1"]
        assert ledger.get("q-ledger", 8) is None
    finally:
        ledger.close()
    assert back.broker == "127.0.0.1:1"
    assert np.array_equal(back.queue_offsets, queue_offsets)
    assert np.array_equal(back.commit_log_offsets, commit_log_offsets)
    checker = EpochChecker(opts)
    try:
        for epoch, write_id, state in (("7", "w1", S.COMMIT_MESSAGE),
                                       ("7", "w2", S.ROLLBACK_MESSAGE),
                                       ("8", "w1", S.UNKNOW)):  # fmt: skip
            marks = {SCOPE: "q-ledger", EPOCH: epoch, WRITE_ID: write_id}
            assert checker.check_local_transaction(Message("T", b"x", properties=marks)) is state
    finally:
        checker.close()
