"""Orderly consumption with real processes: per-key order, one thread per queue across a
group whose members join and leave, broker queue locks, SUSPEND in place."""

from __future__ import annotations

import collections
import itertools
import os
import threading
import time

import pytest
from waiting import wait_for

import shmq
from e2e_helpers import cluster, read_json_lines, shm_entries, stop
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RemotingCommand, RequestCode


def orderly_member(c, name: str) -> tuple:
    out = os.path.join(c.tmp, f"{name}.jsonl")
    proc = c.client("push", "--topic", "Ordered", "--group", "ordered", "--out", out,
                    "--orderly", "--rebalance-interval", "60", "--persist-interval", "0.5",
                    log=f"{name}.log")  # fmt: skip
    return proc, out


def assignment(out: str) -> list[int]:
    """The queues a member holds now (its last assignment line)."""
    if not os.path.exists(out):
        return []
    found = [r["assignment"] for r in read_json_lines(out) if "assignment" in r]
    return found[-1] if found else []


def consumed(outs: list[str]) -> list[dict]:
    return [r for o in outs if os.path.exists(o) for r in read_json_lines(o) if "body" in r]


@pytest.mark.slow
def test_orderly_members_keep_key_order_and_never_share_a_queue(tmp_path):
    before = shm_entries()
    total, keys = 100_000, 100
    with cluster(tmp_path) as c:
        c.create_topic("Ordered", 8)
        members = [orderly_member(c, f"o{i}") for i in range(2)]
        outs = [out for _, out in members]
        with shmq.Producer("ordered-p", c.namesrv) as producer:
            futures = []
            for i in range(total):
                key = f"k{i % keys}"
                msg = shmq.Message("Ordered", f"{key}:{i}".encode())
                futures.append(producer.send_async(msg, sharding_key=key))
                if i == total // 3:  # a member joins while messages flow
                    members.append(orderly_member(c, "o2"))
                    outs.append(members[-1][1])
                    wait_for(
                        lambda: assignment(outs[-1]), timeout=120, what="the new member's queues"
                    )
            for f in futures:
                f.result(60)
        wait_for(
            lambda: len(consumed(outs)) >= 2 * total // 3, timeout=120, what="two thirds consumed"
        )
        assert stop(members[0][0]) == 0  # and one leaves
        wait_for(
            lambda: len({r["body"] for r in consumed(outs)}) >= total,
            timeout=180,
            what="all consumed",
        )
        time.sleep(1.0)  # a test of absence: a message twice would come by now
        for proc, _ in members[1:]:
            assert stop(proc) == 0
        rows = consumed(outs)
    bodies = collections.Counter(r["body"] for r in rows)
    assert len(bodies) == total
    assert max(bodies.values()) == 1  # members hand queues over at committed offsets
    per_key: dict[str, list[int]] = collections.defaultdict(list)
    per_queue: dict[int, list[tuple]] = collections.defaultdict(list)
    for r in sorted(rows, key=lambda r: (r["start"], r["offset"])):
        key, seq = r["body"].split(":")
        per_key[key].append(int(seq))
        per_queue[r["queue"]].append((r["start"], r["end"], r["pid"], r["thread"]))
    for key, seqs in per_key.items():
        assert seqs == sorted(seqs), f"key {key} consumed out of send order"
    for queue, spans in per_queue.items():  # one listener call at a time per queue
        calls = sorted(set(spans))
        for (s1, e1, *who1), (s2, _, *who2) in itertools.pairwise(calls):
            assert s2 >= e1 or (who1 == who2 and s1 == s2), (
                f"queue {queue}: {who1} and {who2} overlap")  # fmt: skip
    assert len({r["pid"] for r in rows}) == 3
    assert shm_entries() - before == set()


def test_a_queue_dropped_mid_batch_is_not_taken_back_before_its_release(broker):
    """A rebalance drops a queue while its listener runs and the next one allocates it
    here again: it is taken back only once the release has persisted its offset (and
    unlocked it), so it resumes after the messages consumed and nothing comes twice."""
    broker.create_topic("Regain", 1)
    with shmq.Producer("regain-p", broker.namesrv) as producer:
        for i in range(6):
            producer.send(shmq.Message("Regain", f"r{i}".encode()))
    seen: list[str] = []
    entered, go = threading.Event(), threading.Event()

    def listener(msgs, ctx):
        seen.extend(m.body.decode() for m in msgs)
        if msgs[0].body == b"r0":
            entered.set()
            go.wait(20)
        return shmq.ConsumeOrderlyStatus.SUCCESS

    consumer = shmq.PushConsumer("regain-g", broker.namesrv, listener=listener, orderly=True,
                                 consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                                 consume_message_batch_max_size=1)  # fmt: skip
    consumer.subscribe("Regain")
    consumer.start()
    try:
        assert entered.wait(20)
        (mq,) = [q for q in consumer._table if q.topic == "Regain"]
        consumer._apply_assignment("Regain", set())  # dropped while r0's listener runs
        consumer._apply_assignment("Regain", {mq})  # and allocated here again at once
        assert mq not in consumer._table and mq in consumer._orderly.wanted
        go.set()
        wait_for(lambda: len(seen) >= 6, timeout=20, what="the six messages")
        time.sleep(0.5)  # a test of absence: nothing comes twice
    finally:
        go.set()
        consumer.shutdown()
    assert seen == [f"r{i}" for i in range(6)]


def test_a_suspended_message_comes_again_in_place(broker):
    broker.create_topic("Suspend", 1)
    with shmq.Producer("suspend-p", broker.namesrv) as producer:
        for i in range(5):
            producer.send(shmq.Message("Suspend", f"s{i}".encode()))
    seen: list[tuple[str, int, float]] = []
    lock = threading.Lock()

    def listener(msgs, ctx):
        with lock:
            seen.extend((m.body.decode(), m.reconsume_times, time.monotonic()) for m in msgs)
            tries = sum(1 for s in seen if s[0] == "s2")
        if msgs[0].body == b"s2" and tries <= 2:
            ctx.suspend_current_queue_time_millis = 200
            return shmq.ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return shmq.ConsumeOrderlyStatus.SUCCESS

    consumer = shmq.PushConsumer("suspend-g", broker.namesrv, listener=listener, orderly=True,
                                 consume_from_where="CONSUME_FROM_FIRST_OFFSET")  # fmt: skip
    consumer.subscribe("Suspend")
    consumer.start()
    try:
        wait_for(lambda: len(seen) >= 7, timeout=20, what="5 messages, s2 three times")
        time.sleep(0.5)  # a test of absence: nothing more comes
    finally:
        consumer.shutdown()
    assert [(b, n) for b, n, _ in seen] == [
        ("s0", 0), ("s1", 0), ("s2", 0), ("s2", 1), ("s2", 2), ("s3", 0), ("s4", 0)
    ]  # fmt: skip
    assert seen[3][2] - seen[2][2] >= 0.19  # after the suspension the context asked for


@pytest.mark.parametrize("pace,listener_s", [("fast", 0.0), ("slow", 0.002)])
def test_only_a_fast_listener_runs_in_the_pull_thread_and_order_holds(broker, pace, listener_s):
    """A fast orderly listener is called by the pull thread itself once its pace is known
    (no hand-off to the pool); a slow one never is. Either way each queue's messages come
    in queue order."""
    topic, group, total = f"Pace{pace}", f"pace-{pace}", 600
    broker.create_topic(topic, 2)
    calls: list[tuple[str, int, int]] = []

    def listener(msgs, ctx):
        if listener_s:  # (a sleep of 0 still gives the GIL away)
            time.sleep(listener_s)
        calls.extend((threading.current_thread().name, ctx.message_queue.queue_id,
                      int(m.body)) for m in msgs)  # fmt: skip
        return shmq.ConsumeOrderlyStatus.SUCCESS

    consumer = shmq.PushConsumer(group, broker.namesrv, listener=listener, orderly=True,
                                 consume_from_where="CONSUME_FROM_FIRST_OFFSET")  # fmt: skip
    consumer.subscribe(topic)
    consumer.start()
    queue_of = {}
    try:
        with shmq.Producer("pace-p", broker.namesrv) as producer:
            for wave in (range(total // 2), range(total // 2, total)):  # the second: pace known
                for i in wave:
                    queue_of[i] = producer.send(shmq.Message(topic, b"%d" % i)).message_queue
                wait_for(
                    lambda wave=wave: len(calls) >= wave.stop, timeout=60, what="the wave consumed"
                )
    finally:
        consumer.shutdown()
    in_pull_thread = sum(1 for name, _, _ in calls if name == f"shmq-pull-{group}")
    assert (in_pull_thread > 0) == (pace == "fast"), collections.Counter(n for n, _, _ in calls)
    for q in (0, 1):
        got = [i for _, qid, i in calls if qid == q]
        assert got == sorted(i for i, mq in queue_of.items() if mq.queue_id == q)


def test_a_queue_lock_belongs_to_one_client_until_it_lapses(broker):
    broker.create_topic("Locked", 2)
    mqs = [{"topic": "Locked", "brokerName": "broker-a", "queueId": q} for q in (0, 1)]

    def lock(client_id: str, code=RequestCode.LOCK_BATCH_MQ) -> list[int]:
        body = {"consumerGroup": "lock-g", "clientId": client_id, "mqSet": mqs}
        with RemotingClient() as client:
            resp = client.invoke(broker.main.address, RemotingCommand.request(
                code, body=RemotingCommand.body_json(body)))  # fmt: skip
        assert resp.code == 0, resp.remark
        return sorted(e["queueId"] for e in (resp.json_body() or {}).get("lockOKMQSet", []))

    assert lock("a") == [0, 1]
    assert lock("b") == []  # held by a
    assert lock("a") == [0, 1]  # renewed
    lock("a", RequestCode.UNLOCK_BATCH_MQ)
    assert lock("b") == [0, 1]
    with RemotingClient() as client:  # a malformed body is an error answer, not a lock
        resp = client.invoke(broker.main.address, RemotingCommand.request(
            RequestCode.LOCK_BATCH_MQ, body=b'{"consumerGroup":"g","mqSet":[1]}'))  # fmt: skip
    assert resp.code != 0
