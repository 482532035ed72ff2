"""``shmq top`` and ``shmq status --watch`` against a real broker (``shmq start --daemon``):
the topic, the group and its lag (the backlog left after a partial consume) show up, found
through the store's ``shmq.json``, a namesrv or the broker's address; with no broker it
fails with one line saying why."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import pytest

from e2e_helpers import env, free_port, shm_entries, shmq

TOPIC, GROUP = "TopView", "top-readers"
SENT, READ = 900, 350


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """A daemon broker holding ``SENT`` messages of ``TOPIC``, ``READ`` of them consumed and
    committed by ``GROUP``: ``(store, namesrv, broker address)``; stopped at the end, with
    nothing left in /dev/shm."""
    before = shm_entries()
    store = str(tmp_path_factory.mktemp("top") / "store")
    ns_port, broker_port = free_port(), free_port()
    namesrv = f"127.0.0.1:{ns_port}"
    ports = ("--namesrv-port", str(ns_port), "--broker-port", str(broker_port))
    started = shmq("start", "--daemon", "--store", store, *ports, "--mapped-file-size", "8M")
    try:
        assert started.returncode == 0, started.stderr
        sent = shmq("produce", "-n", namesrv, "--topic", TOPIC, "--size", "50",
                    "--count", str(SENT))  # fmt: skip
        assert sent.returncode == 0, sent.stderr
        got = shmq("consume", "-n", namesrv, "--topic", TOPIC, "--group", GROUP, "--from",
                   "first", "--count", str(READ), "--timeout", "30")  # fmt: skip
        assert got.returncode == 0, got.stderr
        yield store, namesrv, f"127.0.0.1:{broker_port}"
    finally:
        stopped = shmq("stop", "--store", store)
    assert stopped.returncode == 0, stopped.stderr
    assert shm_entries() - before == set()


def last_snapshot(output: str) -> str:
    """The last of the plain snapshots ``shmq top`` prints to a pipe."""
    return output.split("--- ")[-1]


def group_lag(snapshot: str, group: str, topic: str) -> int:
    """The lag cell of ``group``'s row for ``topic`` in the consumer groups table."""
    for line in snapshot.splitlines():
        cells = [c.strip() for c in line.strip("│ ").split("│")]
        if cells[:2] == [group, topic]:
            return int(cells[2].replace(",", ""))
    raise AssertionError(f"no row of {group} on {topic} in:\n{snapshot}")


def test_top_shows_the_topic_the_group_and_its_lag(broker):
    store, _namesrv, address = broker
    done = shmq("top", "--store", store, "--iterations", "2", "--interval", "0.5", timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("--- ") == 2  # one plain snapshot per refresh, not a live screen
    view = last_snapshot(done.stdout)
    title = " ".join(view.split("┏")[0].split())  # the lines above the first table, unfolded
    assert f"broker broker-a ASYNC_MASTER at {address}, store {store}" in title
    assert "rates over" in title  # the second snapshot has rates against the first
    topic_row = next(line for line in view.splitlines() if f"│ {TOPIC} " in line)
    assert f"{SENT:,}" in topic_row
    assert group_lag(view, GROUP, TOPIC) == SENT - READ
    for agent in ("supervisor", "writer", "flush"):
        assert re.search(rf"│ {agent} +│ \d+ +│ yes ", view), agent
    assert "0 fenced" in view and "HA: no slave connected" in view


@pytest.mark.parametrize("where", ["namesrv", "name", "address"])
def test_top_finds_a_broker_by_namesrv_name_or_address(broker, where):
    _store, namesrv, address = broker
    args = {"namesrv": ["-n", namesrv], "name": ["-n", namesrv, "-b", "broker-a"],
            "address": ["-b", address]}[where]  # fmt: skip
    done = shmq("top", *args, "--iterations", "1", timeout=60)
    assert done.returncode == 0, done.stderr
    assert group_lag(last_snapshot(done.stdout), GROUP, TOPIC) == SENT - READ


def test_status_watch_refreshes_until_ctrl_c(broker):
    store, _namesrv, _address = broker
    proc = subprocess.Popen(
        [sys.executable, "-m", "shmq_cli.main", "status", "--watch", "--store", store,
         "--interval", "0.3"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        seen = ""
        while seen.count("--- ") < 2:  # two refreshes
            line = proc.stdout.readline()
            assert line, f"status --watch ended: {proc.stderr.read()}"
            seen += line
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err  # Ctrl-C is how a watch ends
    first = seen.split("--- ")[1]  # whole: the next one began after it
    assert group_lag(first, GROUP, TOPIC) == SENT - READ


def test_top_without_a_broker_fails_saying_why(tmp_path):
    store = tmp_path / "none"
    store.mkdir()
    local = shmq("top", "--store", str(store), "--iterations", "1")
    assert local.returncode == 1
    assert local.stderr.startswith("error: shmq is not running for") and not local.stdout
    port = free_port()
    for args in (["-b", f"127.0.0.1:{port}"], ["-n", f"127.0.0.1:{port}"]):
        remote = shmq("top", *args, "--iterations", "1")
        assert remote.returncode == 1, args
        assert "error:" in remote.stderr and f"127.0.0.1:{port}" in remote.stderr, args
    assert not os.listdir(store)
