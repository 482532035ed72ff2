"""shmq.EmbeddedBroker: a namesrv and a broker in this process, topics created, a produce and a
consume through it, and nothing left behind (store directory, shared memory, agents)."""

from __future__ import annotations

import os

import pytest
from waiting import wait_for

import shmq
from e2e_helpers import free_port, shm_entries
from shmq.ipc.procs import pid_alive


def read_from_start(namesrv: str, topic: str, count: int) -> list:
    """The first ``count`` messages of ``topic`` from its first offset (or more)."""
    got: list = []
    with shmq.PullConsumer(f"{topic}-reader", namesrv, consume_from_where="FIRST_OFFSET") as pc:
        pc.subscribe(topic)
        pc.start()
        wait_for(lambda: got.extend(pc.poll(0.5)) or len(got) >= count, interval=0,
                 what=f"{count} messages of {topic}")  # fmt: skip
    return got


def test_embedded_broker_serves_a_produce_and_a_pull_then_cleans_up():
    before = shm_entries()
    with shmq.EmbeddedBroker(topics={"EmbeddedT": 2}) as mq:
        store = mq.store
        assert os.path.isdir(store)
        with shmq.Producer("embedded-p", mq.namesrv) as producer:
            results = [producer.send(shmq.Message("EmbeddedT", f"m{i}".encode())) for i in range(6)]
        assert {r.message_queue.queue_id for r in results} == {0, 1}
        got = read_from_start(mq.namesrv, "EmbeddedT", 6)
        assert sorted(m.body for m in got) == [f"m{i}".encode() for i in range(6)]
        agents = mq.stats()["agents"]
        pids = [a["pid"] for a in agents.values()]
    assert not os.path.exists(store)
    assert shm_entries() - before == set()
    assert not any(pid_alive(pid) for pid in pids)


def test_the_documented_maximum_message_goes_through_with_default_settings():
    body = bytes(range(256)) * (4 * 1024 * 1024 // 256)  # maxMessageSize: 4 MiB
    with shmq.EmbeddedBroker(topics={"Big": 1}) as mq:
        with shmq.Producer("big-p", mq.namesrv) as producer:
            sent = producer.send(shmq.Message("Big", body))
        assert sent.send_status is shmq.SendStatus.SEND_OK
        got = read_from_start(mq.namesrv, "Big", 1)
        assert [m.body == body for m in got] == [True]
        too_large = pytest.raises(shmq.MessageTooLargeError, match="maxMessageSize")
        with shmq.Producer("big-p2", mq.namesrv) as producer, too_large:
            producer.send(shmq.Message("Big", body + b"x"))


def test_a_stop_asked_for_before_the_start_ends_the_wait_once_started(tmp_path):
    """What ``shmq start``'s signal handlers rely on: a SIGTERM while the broker starts
    stops it once it is up (segments unlinked), on the ports and store it was given."""
    before = shm_entries()
    port = free_port()
    mq = shmq.EmbeddedBroker(str(tmp_path / "store"), namesrv_port=port,
                             mapped_file_size_commit_log=1 << 20)  # fmt: skip
    mq.request_stop()
    try:
        mq.start()
        assert mq.namesrv == f"127.0.0.1:{port}"
        mq.wait()  # at once
        assert mq.stop_reason == ""
    finally:
        mq.stop()
    assert os.path.isdir(tmp_path / "store" / "config")  # a given store stays
    assert shm_entries() - before == set()


def test_a_second_broker_joins_the_first_ones_namesrv(tmp_path):
    """``namesrv=``: a broker without a NameServer of its own (a slave beside its master,
    in ``bench/ha_bench.py``); stopping it leaves the other's NameServer running."""
    from shmq.remoting.client import RemotingClient
    from shmq.remoting.protocol import RequestCode

    def brokers(namesrv: str) -> set[str]:
        with RemotingClient() as client:
            _, info = client.invoke_json(namesrv, RequestCode.GET_BROKER_CLUSTER_INFO)
        return set(info["brokerAddrTable"])

    small = {"mapped_file_size_commit_log": 1 << 20}
    with shmq.EmbeddedBroker(str(tmp_path / "a"), **small) as first:
        with shmq.EmbeddedBroker(str(tmp_path / "b"), namesrv=first.namesrv,
                                 broker_name="broker-b", **small) as second:  # fmt: skip
            assert second.namesrv == first.namesrv
            assert brokers(first.namesrv) == {"broker-a", "broker-b"}
        assert brokers(first.namesrv) == {"broker-a"}  # unregistered; the NameServer runs on
