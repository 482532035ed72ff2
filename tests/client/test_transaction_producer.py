"""Transactional messages with real processes: a committed message is delivered once, a rolled
back one never, an UNKNOW one after the check-back's answer, also when the producer died and
another producer of the group answers; random sequences against a model."""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import sys
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from waiting import wait_for

import shmq
from e2e_helpers import cluster, read_json_lines, shm_entries, spawn
from shmq import half_messages as hm
from shmq.errors import InvalidMessageError
from spec_decoder import walk_commitlog

S = shmq.LocalTransactionState
TX_CONF = {"transactionTimeOut": 1000, "transactionCheckInterval": 500}
CLIENTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "transaction_clients.py")


class Outcomes:
    """A listener deciding by body: ``states[body]`` when executed; the check-back answers
    ``checks[body]`` (UNKNOW when absent) and records what it was asked."""

    def __init__(self, states=None, checks=None) -> None:
        self.states = dict(states or {})
        self.checks = dict(checks or {})
        self.asked: list[shmq.MessageExt] = []
        self.lock = threading.Lock()

    def execute_local_transaction(self, msg, arg):
        state = self.states[msg.body.decode()]
        if isinstance(state, Exception):
            raise state
        return state

    def check_local_transaction(self, msg):
        with self.lock:
            self.asked.append(msg)
            return self.checks.get(msg.body.decode(), S.UNKNOW)


@pytest.fixture(scope="module")
def c(tmp_path_factory):
    before = shm_entries()
    with cluster(tmp_path_factory.mktemp("tx"), **TX_CONF) as c:
        yield c
    assert shm_entries() - before == set()


def stored(c, topic: str) -> collections.Counter:
    """How often each body is stored in ``topic`` (read with the independent decoder)."""
    records, _ = walk_commitlog(os.path.join(c.store, "commitlog"))
    return collections.Counter(r["body"].decode() for r in records if r["topic"] == topic)


def producer(c, group: str, listener) -> shmq.TransactionProducer:
    return shmq.TransactionProducer(group, c.namesrv, listener=listener, heartbeat_interval=0.5)


def test_commit_is_delivered_once_and_rollback_never(c):
    c.create_topic("TxPay", 2)
    listener = Outcomes({"c1": S.COMMIT_MESSAGE, "r1": S.ROLLBACK_MESSAGE})
    got: list[shmq.MessageExt] = []
    consumer = shmq.PushConsumer("tx-readers", c.namesrv,
                                 listener=lambda msgs, _ctx: got.extend(msgs)
                                 or shmq.ConsumeResult.CONSUME_SUCCESS,
                                 consume_from_where="CONSUME_FROM_FIRST_OFFSET")  # fmt: skip
    consumer.subscribe("TxPay")
    consumer.start()
    try:
        with producer(c, "tx-pay", listener) as p:
            committed = p.send_message_in_transaction(shmq.Message("TxPay", b"c1", tags="T"), 7)
            rolled = p.send_message_in_transaction(shmq.Message("TxPay", b"r1"))
        wait_for(lambda: got, what="the commit delivered")
        time.sleep(2.5)  # a test of absence: past the timeout and a check interval, no check
    finally:
        consumer.shutdown()
    assert committed.local_transaction_state is S.COMMIT_MESSAGE
    assert rolled.local_transaction_state is S.ROLLBACK_MESSAGE
    assert committed.transaction_id == committed.msg_id
    assert committed.message_queue.topic == "TxPay"
    assert [m.body for m in got] == [b"c1"]
    assert got[0].msg_id == committed.msg_id and got[0].tags == "T"
    assert got[0].queue_id == committed.message_queue.queue_id
    assert listener.asked == []
    assert stored(c, "TxPay") == {"c1": 1}
    assert stored(c, hm.HALF_TOPIC) == {"c1": 1, "r1": 1}


def test_unknow_is_delivered_after_the_check_back_commits(c):
    c.create_topic("TxLater", 1)
    listener = Outcomes({"u1": S.UNKNOW, "u2": RuntimeError("db down"), "u3": S.UNKNOW},
                        {"u1": S.COMMIT_MESSAGE, "u2": S.COMMIT_MESSAGE,
                         "u3": S.ROLLBACK_MESSAGE})  # fmt: skip
    with producer(c, "tx-later", listener) as p:
        results = [p.send_message_in_transaction(shmq.Message("TxLater", b))
                   for b in (b"u1", b"u2", b"u3")]  # fmt: skip
        assert [r.local_transaction_state for r in results] == [S.UNKNOW] * 3
        time.sleep(0.5)  # a test of absence, before the 1 s transaction timeout
        assert stored(c, "TxLater") == {}  # not before the check-back
        wait_for(lambda: len(stored(c, "TxLater")) == 2, what="u1 and u2 committed")
        time.sleep(1.5)  # a test of absence: answered checks are not asked again
    assert stored(c, "TxLater") == {"u1": 1, "u2": 1}
    asked = collections.Counter(m.body.decode() for m in listener.asked)
    assert asked == {"u1": 1, "u2": 1, "u3": 1}
    msg = listener.asked[0]
    assert msg.topic == "TxLater" and msg.msg_id == results[0].msg_id
    assert msg.properties["PGROUP"] == "tx-later"


def test_a_transactional_message_has_no_delay(c):
    with producer(c, "tx-delay", Outcomes()) as p:
        for msg in (
            shmq.Message("TxPay", b"x", delay_level=2),
            shmq.Message("TxPay", b"x", deliver_time_ms=int(time.time() * 1000) + 9000),
        ):
            with pytest.raises(InvalidMessageError, match="delay_level or a deliver_time_ms"):
                p.send_message_in_transaction(msg)  # fmt: skip


def test_the_check_back_reaches_another_producer_when_the_first_died(c, tmp_path):
    c.create_topic("TxOrphan", 1)
    out = str(tmp_path / "dying.jsonl")
    dying = spawn([sys.executable, CLIENTS, "die-in-transaction", "--namesrv", c.namesrv,
                   "--group", "tx-orphans", "--topic", "TxOrphan", "--out", out],
                  str(tmp_path / "dying.log"))  # fmt: skip
    assert dying.wait(60) == -signal.SIGKILL
    dying.log_file.close()
    assert read_json_lines(out) == [{"body": "dying-0"}]  # it died in its local transaction
    assert stored(c, hm.HALF_TOPIC)["dying-0"] == 1
    listener = Outcomes(checks={"dying-0": S.COMMIT_MESSAGE})
    with producer(c, "tx-orphans", listener):
        wait_for(lambda: stored(c, "TxOrphan"), what="the check-back's commit")
        time.sleep(1.0)  # a test of absence: a second check-back would come by now
    assert stored(c, "TxOrphan") == {"dying-0": 1}
    assert [m.body for m in listener.asked] == [b"dying-0"]


OPS = st.lists(
    st.sampled_from(["commit", "rollback", "unknown-commit", "unknown-rollback", "crash"]),
    min_size=1,
    max_size=12,
)


@settings(max_examples=4, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(ops=OPS)
def test_random_transactions_and_broker_crashes_deliver_exactly_the_committed(c, ops):
    """A model: the local database says commit or rollback for each transaction (UNKNOW
    ones are answered from it by the check-back); ``crash`` SIGKILLs the broker, which
    then restarts. Whatever happens, the real topic ends up holding each message the
    database committed once, and nothing else."""
    topic = f"TxModel{time.monotonic_ns()}"
    c.create_topic(topic, 2)
    db: dict[str, str] = {}

    class Model:
        def execute_local_transaction(self, msg, arg):
            body = msg.body.decode()
            reported, _, outcome = arg.rpartition("-")
            db[body] = outcome
            return (
                S.UNKNOW
                if reported
                else {"commit": S.COMMIT_MESSAGE, "rollback": S.ROLLBACK_MESSAGE}[outcome]
            )

        def check_local_transaction(self, msg):
            outcome = db.get(msg.body.decode())
            return {"commit": S.COMMIT_MESSAGE, "rollback": S.ROLLBACK_MESSAGE}.get(
                outcome, S.UNKNOW)  # fmt: skip

    with producer(c, "tx-model", Model()) as p:
        for i, op in enumerate(ops):
            if op == "crash":
                crash_and_restart(c)
                continue
            with contextlib.suppress(shmq.ShmqError):  # the broker may still be coming back
                p.send_message_in_transaction(shmq.Message(topic, f"m{i}".encode()), op)
        committed = {body for body, outcome in db.items() if outcome == "commit"}
        wait_for(lambda: set(stored(c, topic)) >= committed, interval=0.2,
                 what="every committed message delivered")  # fmt: skip
        with shmq.Admin(c.namesrv) as admin:  # each half committed or rolled back: final
            wait_for(lambda: not admin.trans_status("tx-model"), interval=0.2,
                     what="no half message of tx-model pending")  # fmt: skip
    delivered = stored(c, topic)
    assert set(delivered) == committed
    assert max(delivered.values(), default=1) == 1


def crash_and_restart(c) -> None:
    c.kill_supervisor()
    c.start_broker()
