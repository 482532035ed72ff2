"""The broker's transactions with real processes: bad end requests change nothing, checks
wait for a producer and give up after transactionCheckMax, and SIGKILLs of the broker
between a half message and its end, and between a commit and its op record, neither lose
a committed message nor deliver one twice (the store checked with the independent
decoder)."""

from __future__ import annotations

import collections
import json
import os
import random
import sys
import time

import pytest
from waiting import wait_for

import shmq
from e2e_helpers import cluster, read_json_lines, shm_entries, spawn, stop
from e2e_helpers import shmq as shmq_cli
from shmq import half_messages as hm
from shmq.broker.offset.consumer_offsets import ConsumerOffsetManager
from shmq.errors import ResponseError
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode
from spec_decoder import walk_commitlog

S = shmq.LocalTransactionState
TX_CONF = {"transactionTimeOut": 1000, "transactionCheckInterval": 500}
CLIENTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "client",
                       "transaction_clients.py")  # fmt: skip


class Listener:
    def __init__(self, execute=S.UNKNOW, check=S.UNKNOW) -> None:
        self.execute, self.check = execute, check
        self.asked: list[str] = []

    def execute_local_transaction(self, msg, arg):
        return self.execute(msg) if callable(self.execute) else self.execute

    def check_local_transaction(self, msg):
        self.asked.append(msg.body.decode())
        return self.check


def records(c) -> list[dict]:
    return walk_commitlog(os.path.join(c.store, "commitlog"))[0]


def bodies(c, topic: str) -> collections.Counter:
    return collections.Counter(r["body"].decode() for r in records(c) if r["topic"] == topic)


def progress(c, topic: str) -> int:
    """How far the transaction service's scans have read ``topic`` (its group's offset)."""
    with RemotingClient() as client:
        resp, _ = client.invoke_json(c.main.address, RequestCode.QUERY_CONSUMER_OFFSET,
                                     {"consumerGroup": hm.SYS_TRANS_GROUP, "topic": topic,
                                      "queueId": 0})  # fmt: skip
    return int(resp.ext_fields["offset"])


def answered(path: str) -> int:
    """Transactions the producer script finished (whole lines of its output)."""
    if not os.path.exists(path):
        return 0
    with open(path) as f:
        return f.read().count("\n")


def end(c, **fields) -> RemotingCommand:
    """A two-way END_TRANSACTION (RocketMQ's producers send it oneway)."""
    with RemotingClient() as client:
        return client.invoke(
            c.main.address, RemotingCommand.request(RequestCode.END_TRANSACTION, fields)
        )


def test_bad_end_requests_answer_an_error_and_write_nothing(tmp_path):
    before = shm_entries()
    with cluster(tmp_path, **TX_CONF) as c:
        c.create_topic("TxBad", 1)
        with shmq.Producer("plain", c.namesrv) as p:
            plain = p.send(shmq.Message("TxBad", b"plain"))
        with shmq.TransactionProducer("tx-bad", c.namesrv, listener=Listener()) as p:
            half = p.send_message_in_transaction(shmq.Message("TxBad", b"half"))
        half_offset = int(half.offset_msg_id[-16:], 16)
        good = {"producerGroup": "tx-bad", "tranStateTableOffset": half.queue_offset,
                "commitLogOffset": half_offset, "commitOrRollback": 8}  # fmt: skip
        written = c.runtime_info()["write_offset"]
        cases = [
            ({"commitLogOffset": 10**9}, "Find prepared transaction message failed"),
            ({"commitLogOffset": -1}, "Find prepared transaction message failed"),
            ({"commitLogOffset": half_offset + 7}, "Find prepared transaction message failed"),
            ({"commitLogOffset": int(plain.offset_msg_id[-16:], 16)}, "no half message"),
            ({"producerGroup": "someone-else"}, "The producer group wrong"),
            ({"tranStateTableOffset": half.queue_offset + 5}, "state table offset wrong"),
            ({"commitOrRollback": 3}, "is not 0, 8 or 12"),
        ]
        for change, remark in cases:
            resp = end(c, **{**good, **change})
            assert resp.code == ResponseCode.SYSTEM_ERROR, change
            assert remark in resp.remark, (change, resp.remark)
        assert c.runtime_info()["write_offset"] == written  # nothing written
        assert end(c, **good).code == ResponseCode.SUCCESS  # the commit
        # again: finished. Once the op record is written and the scan has passed the
        # transaction, the table forgets it and says so in other words
        finished = ("is already finished", "is finished or was discarded")
        for outcome in (8, 12):
            resp = end(c, **{**good, "commitOrRollback": outcome})
            assert resp.code == ResponseCode.SYSTEM_ERROR, outcome
            assert any(text in resp.remark for text in finished), (outcome, resp.remark)
        wait_for(lambda: bodies(c, "TxBad") == {"plain": 1, "half": 1}, what="the commit")
        wait_for(lambda: bodies(c, hm.OP_TOPIC) == {str(half.queue_offset): 1},
                 what="the commit's op record")  # fmt: skip
        wait_for(
            lambda: progress(c, hm.HALF_TOPIC) == progress(c, hm.OP_TOPIC) == 1,
            ignore=ResponseError,
            what="the check scan past the half and its op record",
        )
        assert c.stop_broker() == 0
        offsets = ConsumerOffsetManager(os.path.join(c.store, "config"))  # the progress
        assert offsets.query(hm.SYS_TRANS_GROUP, hm.HALF_TOPIC, 0) == 1
        assert offsets.query(hm.SYS_TRANS_GROUP, hm.OP_TOPIC, 0) == 1
        c.start_broker()  # after a restart, the op record still says finished
        resp = end(c, **good)
        assert resp.code == ResponseCode.SYSTEM_ERROR and "finished" in resp.remark
        assert bodies(c, "TxBad") == {"plain": 1, "half": 1}
    assert shm_entries() - before == set()


def test_checks_wait_for_a_producer_and_stop_after_transaction_check_max(tmp_path):
    before = shm_entries()
    with cluster(tmp_path, transactionCheckMax=2, **TX_CONF) as c:
        c.create_topic("TxWait", 1)
        with shmq.TransactionProducer("tx-wait", c.namesrv, listener=Listener()) as p:
            half = p.send_message_in_transaction(shmq.Message("TxWait", b"w"))
        n = ("-n", c.namesrv)
        time.sleep(2.5)  # a test of absence: past the timeout, several intervals: no check
        status = json.loads(shmq_cli("admin", "trans-status", *n, "--json").stdout)
        assert [(s["producerGroup"], s["pending"], s["maxCheckTimes"], s["producersOnline"])
                for s in status] == [("tx-wait", 1, 0, 0)]  # fmt: skip
        assert status[0]["transactionIds"] == [half.transaction_id]
        table = shmq_cli("admin", "trans-status", "-g", "tx-wait", *n)
        assert table.returncode == 0 and "tx-wait" in table.stdout
        listener = Listener(check=S.UNKNOW)
        with shmq.TransactionProducer("tx-wait", c.namesrv, listener=listener,
                                      heartbeat_interval=0.5):  # fmt: skip
            wait_for(lambda: not json.loads(
                shmq_cli("admin", "trans-status", *n, "--json").stdout), interval=0.2,
                     what="the half discarded after transactionCheckMax checks")  # fmt: skip
        assert listener.asked == ["w", "w"]  # transactionCheckMax checks, then discarded
        assert bodies(c, hm.CHECK_MAX_TIME_TOPIC) == {"w": 1}
        assert bodies(c, "TxWait") == {}
        resp = end(
            c,
            producerGroup="tx-wait",
            tranStateTableOffset=half.queue_offset,
            commitLogOffset=int(half.offset_msg_id[-16:], 16),
            commitOrRollback=8,
        )
        assert resp.code == ResponseCode.SYSTEM_ERROR  # discarded: closed  # fmt: skip

        # mqadmin resumeCheckHalfMessage: the discarded half (found by its transaction id)
        # goes back to the half queue with no check counted, and is checked again
        resumed = shmq_cli("admin", "resume-check-half-msg", "-i", half.transaction_id, *n)
        assert resumed.returncode == 0, resumed.stderr
        again = shmq_cli("admin", "resume-check-half-msg", "-i", half.transaction_id, *n)
        assert again.returncode != 0 and "put back already" in again.stderr, again.stderr
        committer = Listener(check=S.COMMIT_MESSAGE)
        with shmq.TransactionProducer("tx-wait", c.namesrv, listener=committer,
                                      heartbeat_interval=0.5):  # fmt: skip
            wait_for(lambda: bodies(c, "TxWait") == {"w": 1}, what="the resumed half committed")
        assert committer.asked == ["w"]
        (committed,) = [r for r in records(c) if r["topic"] == "TxWait"]
        with shmq.Admin(c.namesrv) as admin, pytest.raises(shmq.ShmqError, match="no discarded"):
            admin.resume_check_half_message(committed["offset_msg_id"])
    assert shm_entries() - before == set()


def test_a_broker_killed_between_half_and_end_checks_back_after_restart(tmp_path):
    before = shm_entries()
    with cluster(tmp_path, **TX_CONF) as c:
        c.create_topic("TxKill", 1)

        def kill_then_commit(_msg):
            c.kill_supervisor()  # the end request goes nowhere
            return S.COMMIT_MESSAGE

        listener = Listener(kill_then_commit, check=S.COMMIT_MESSAGE)
        with shmq.TransactionProducer("tx-kill", c.namesrv, listener=listener,
                                      heartbeat_interval=0.5) as p:  # fmt: skip
            p.send_message_in_transaction(shmq.Message("TxKill", b"k"))
            assert bodies(c, "TxKill") == {}
            c.start_broker()
            wait_for(lambda: bodies(c, "TxKill"), what="the check-back's commit")
            time.sleep(1.5)  # a test of absence: a second check-back would have come by now
        assert listener.asked == ["k"]
        assert bodies(c, "TxKill") == {"k": 1}
    assert shm_entries() - before == set()


def test_a_broker_killed_between_commit_and_op_record_commits_once(tmp_path):
    """The op topic made read-only: the commit is written, its op record refused, which is
    what a crash between the two leaves. After a SIGKILL and a restart (which makes the op
    topic writable again), the commit is found and given its op record: the check-back
    answers COMMIT, yet nothing is committed twice."""
    before = shm_entries()
    with cluster(tmp_path, **TX_CONF) as c:
        c.create_topic("TxHalfway", 1)
        with RemotingClient() as client:
            client.invoke_json(c.main.address, RequestCode.UPDATE_AND_CREATE_TOPIC,
                               {"topic": hm.OP_TOPIC, "readQueueNums": 1, "writeQueueNums": 1,
                                "perm": 4})  # fmt: skip
        listener = Listener(S.COMMIT_MESSAGE, check=S.COMMIT_MESSAGE)
        with shmq.TransactionProducer("tx-halfway", c.namesrv, listener=listener,
                                      heartbeat_interval=0.5) as p:  # fmt: skip
            p.send_message_in_transaction(shmq.Message("TxHalfway", b"h"))
            wait_for(lambda: bodies(c, "TxHalfway"), what="the commit")
            assert bodies(c, hm.OP_TOPIC) == {}
            c.kill_supervisor()
            c.start_broker()
            wait_for(lambda: bodies(c, hm.OP_TOPIC), what="the op record given after the restart")
            time.sleep(2.5)  # a test of absence: past the timeout and checks, no commit again
        assert bodies(c, "TxHalfway") == {"h": 1}
        assert bodies(c, hm.OP_TOPIC) == {"0": 1}
        assert listener.asked == []
        with open(c.main.proc.log_path) as f:  # type: ignore[union-attr]
            assert "1 commit(s) given their op record" in f.read()
    assert shm_entries() - before == set()


@pytest.mark.slow
@pytest.mark.crash
def test_sigkills_under_load_deliver_exactly_the_committed_messages(tmp_path):
    before = shm_entries()
    rng = random.Random(15)
    outcomes = ["commit", "rollback", "unknown-commit", "unknown-rollback"]
    plan = [(f"t{i}", rng.choice(outcomes)) for i in range(3000)]
    # checked every 0.5 s, a half is discarded 7.5 s after its timeout with the default
    # transactionCheckMax; a producer on a loaded machine can take longer to answer (CI
    # did), and a discarded commit is then rightly never delivered: not what this tests
    with cluster(tmp_path, **TX_CONF, transactionCheckMax=60) as c:
        c.create_topic("TxLoad", 4)
        plan_path, db, out = (str(tmp_path / n) for n in ("plan.txt", "db.txt", "out.jsonl"))
        with open(plan_path, "w") as f:
            f.writelines(f"{body} {outcome}\n" for body, outcome in plan)
        producer = spawn([sys.executable, CLIENTS, "transact", "--namesrv", c.namesrv,
                          "--group", "tx-load", "--topic", "TxLoad", "--plan", plan_path,
                          "--db", db, "--out", out], str(tmp_path / "producer.log"))  # fmt: skip
        c.procs.append(producer)
        for reached in (600, 1800):  # in the middle of the stream of transactions
            wait_for(
                lambda reached=reached: answered(out) > reached,
                timeout=120,
                what=f"{reached} transactions answered",
            )
            c.kill_supervisor()
            c.start_broker()
        wait_for(
            lambda: answered(out) == len(plan),
            timeout=300,
            interval=0.2,
            what="every transaction answered",
        )
        with open(db) as f:
            decided = [line.split() for line in f if line.strip()]
        committed = {body for _, body, outcome in decided if outcome == "commit"}
        assert len({body for _, body, _ in decided}) == len(decided) == len(plan)
        wait_for(
            lambda: set(bodies(c, "TxLoad")) >= committed,
            timeout=120,
            interval=0.2,
            what="every committed message delivered",
        )
        with shmq.Admin(c.namesrv) as admin:  # each half committed or rolled back: final
            wait_for(lambda: not admin.trans_status("tx-load"), interval=0.2,
                     what="no half message of tx-load pending")  # fmt: skip
        assert stop(producer) == 0
        c.procs.remove(producer)
        assert c.stop_broker() == 0
        delivered = bodies(c, "TxLoad")
        assert set(delivered) == committed
        assert max(delivered.values()) == 1
        rows = read_json_lines(out)
        assert not [r for r in rows if "error" in r]
        assert sum(r["failedAttempts"] > 0 for r in rows) >= 1  # sends met the killed broker
    assert shm_entries() - before == set()
