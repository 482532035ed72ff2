"""What a new user meets at the terminal: the start lines, summaries, Ctrl-C, bad names,
bornHost, ``-v`` and a read-only store, with real commands against a daemon broker."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from e2e_helpers import env, free_port, shm_entries, shmq, small_tmpfs


@pytest.fixture(scope="module")
def namesrv(tmp_path_factory):
    before = shm_entries()
    store = str(tmp_path_factory.mktemp("first") / "store")
    ns_port, broker_port = free_port(), free_port()
    started = shmq("start", "--daemon", "--store", store, "--namesrv-port", str(ns_port),
                   "--broker-port", str(broker_port), "--mapped-file-size", "8M")  # fmt: skip
    try:
        assert started.returncode == 0, started.stderr
        assert f"store {store}: " in started.stdout
        assert "CommitLog files of 8.0 MiB are allocated whole" in started.stdout
        yield f"127.0.0.1:{ns_port}"
    finally:
        stopped = shmq("stop", "--store", store)
        assert stopped.returncode == 0, stopped.stderr
        assert shm_entries() - before == set()
    with open(os.path.join(store, "shmq.log")) as f:  # every line of the daemon's log is dated
        lines = f.read().splitlines()
    assert any("shmq started" in line for line in lines) and "shmq stopped" in lines[-1]
    assert all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", line) for line in lines), lines


def test_few_messages_are_listed_many_are_summed_up(namesrv):
    few = shmq("produce", "-n", namesrv, "-t", "Few", "--body", "x", "--count", "3")
    assert few.returncode == 0, few.stderr
    assert few.stdout.count("SendResult [sendStatus=SEND_OK") == 3
    many = shmq("produce", "-n", namesrv, "-t", "Few", "--body", "x", "--count", "1000")
    assert many.returncode == 0, many.stderr
    assert "SendResult" not in many.stdout
    assert many.stdout.startswith("sent 1000 messages to Few in ") and "msgs/s" in many.stdout
    one = shmq("consume", "-n", namesrv, "-t", "Few", "-g", "one", "--from", "first",
               "--count", "1", "--json")  # fmt: skip
    assert one.returncode == 0, one.stderr
    assert not json.loads(one.stdout)["bornHost"].endswith(":0")  # the client's own port
    rest = shmq("consume", "-n", namesrv, "-t", "Few", "-g", "rest", "--from", "first",
                "--timeout", "1")  # fmt: skip
    assert "received 1003 messages from Few in " in rest.stderr
    last = shmq("consume", "-n", namesrv, "-t", "Few", "-g", "rest", "--timeout", "0.5")
    assert last.returncode == 0 and "received 0 messages from Few\n" in last.stderr
    shmq("produce", "-n", namesrv, "-t", "Few", "--body", "y")
    single = shmq("consume", "-n", namesrv, "-t", "Few", "-g", "rest", "--timeout", "0.5")
    assert "received 1 message from Few in " in single.stderr
    assert "msgs/s" not in single.stderr  # no rate from one message


def test_invalid_names_are_usage_errors(namesrv):
    for command in (("consume",), ("produce", "--body", "x")):
        bad = shmq(*command, "-n", namesrv, "-t", "a b")
        assert bad.returncode == 2 and "topic 'a b' is invalid" in bad.stderr, bad.stderr
    bad_group = shmq("consume", "-n", namesrv, "-t", "T", "-g", "g/1")
    assert bad_group.returncode == 2 and "group 'g/1' is invalid" in bad_group.stderr


def test_verbose_produce_says_where_it_sends(namesrv):
    loud = shmq("-v", "produce", "-n", namesrv, "-t", "Loud", "--body", "x")
    assert loud.returncode == 0, loud.stderr
    assert "route of Loud: 4 writable queues on broker-a" in loud.stderr
    assert (
        "registered with broker broker-a" in loud.stderr and "born host 127.0.0.1:" in loud.stderr
    )


def _interrupted(namesrv: str, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.Popen([sys.executable, "-m", "shmq_cli.main", *args, "-n", namesrv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
                            stdin=subprocess.DEVNULL)  # fmt: skip
    try:
        time.sleep(4)  # started and working (imports, route, registration)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_ctrl_c_prints_the_count_and_exits_130(namesrv):
    produced = _interrupted(namesrv, "produce", "-t", "Slow", "--body", "x", "--count", "100000",
                            "--rate", "50")  # fmt: skip
    assert produced.returncode == 130, produced.stderr
    assert "sent " in produced.stderr and "interrupted: sent " in produced.stderr
    assert "Aborted" not in produced.stderr
    consumed = _interrupted(namesrv, "consume", "-t", "Slow", "-g", "ctrl-c", "--from", "first",
                            "--count", "100000", "--timeout", "60")  # fmt: skip
    assert consumed.returncode == 130, consumed.stderr
    assert "received " in consumed.stderr and "interrupted: offsets committed" in consumed.stderr


def test_a_read_only_store_is_a_clear_error(tmp_path):
    with small_tmpfs(tmp_path, "1m") as mnt:
        os.makedirs(os.path.join(mnt, "store"))
        subprocess.run(["mount", "-o", "remount,ro", mnt], check=True)
        done = shmq("start", "--store", os.path.join(mnt, "store"), "--demo")
    assert done.returncode == 1
    assert "cannot write the store directory" in done.stderr and "Read-only" in done.stderr
    assert "Traceback" not in done.stderr and "Errno" not in done.stderr
