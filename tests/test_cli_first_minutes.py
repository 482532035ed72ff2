"""What a new user meets at the terminal: the start lines, summaries, Ctrl-C, bad names,
bornHost, ``-v`` and a read-only store, with real commands against a daemon broker."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest
from waiting import wait_for

from e2e_helpers import env, free_port, shm_entries, shmq, small_tmpfs, stop


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


def _interrupted(namesrv: str, at_work, *args: str) -> subprocess.CompletedProcess:
    """``shmq ARGS -n NAMESRV`` interrupted with SIGINT once ``at_work()`` says it is past
    its imports, route and registration (an ``Admin``'s error before that is waited out)."""
    from shmq.errors import ClientError, RemotingError

    proc = subprocess.Popen([sys.executable, "-m", "shmq_cli.main", *args, "-n", namesrv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
                            stdin=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_for(at_work, ignore=(ClientError, RemotingError), interval=0.1,
                 what=f"shmq {args[0]} at work")  # fmt: skip
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_ctrl_c_prints_the_count_and_exits_130(namesrv):
    from shmq import Admin

    with Admin(namesrv) as admin:

        def sending() -> int:
            return sum(q.max_offset for q in admin.topic_status("Slow"))

        def committing() -> int:
            return sum(q.consumer_offset for q in admin.consumer_progress("ctrl-c", "Slow").queues)

        produced = _interrupted(namesrv, sending, "produce", "-t", "Slow", "--body", "x",
                                "--count", "100000", "--rate", "50")  # fmt: skip
        consumed = _interrupted(namesrv, committing, "consume", "-t", "Slow", "-g", "ctrl-c",
                                "--from", "first", "--count", "100000", "--timeout", "60",
                                "--persist-consumer-offset-interval", "0.2")  # fmt: skip
    assert produced.returncode == 130, produced.stderr
    assert "sent " in produced.stderr and "interrupted: sent " in produced.stderr
    assert "Aborted" not in produced.stderr
    assert consumed.returncode == 130, consumed.stderr
    assert "received " in consumed.stderr and "interrupted: offsets committed" in consumed.stderr


@contextlib.contextmanager
def _running(namesrv: str, *args: str) -> Iterator[subprocess.Popen]:
    """``shmq ARGS -n NAMESRV`` running, its stdout and stderr pipes (text); stopped at the
    end if it still runs (stdout closed first: a write blocked on it ends too)."""
    proc = subprocess.Popen([sys.executable, "-m", "shmq_cli.main", *args, "-n", namesrv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
                            stdin=subprocess.DEVNULL)  # fmt: skip
    try:
        yield proc
    finally:
        proc.stdout.close()
        stop(proc)
        proc.stderr.close()


def _positions(json_lines: list[str]) -> list[tuple[int, int]]:
    """(queue id, queue offset) of each ``shmq consume --json`` line."""
    rows = [json.loads(line) for line in json_lines if line.strip()]
    return [(r["queueId"], r["queueOffset"]) for r in rows]


def _quiet(stderr: str) -> bool:
    """No traceback, no ``error:`` line, nothing Python ignored at exit (a failed flush)."""
    return not any(s in stderr for s in ("Traceback", "Error", "error:", "Exception ignored"))


def test_sigterm_ends_consume_with_its_offsets_committed(namesrv):
    """SIGTERM (a service manager, ``kill``) ends consume as Ctrl-C does: status 143 and
    what it printed committed, so the group's next run gets only the rest, no repeats."""
    produced = shmq("produce", "-n", namesrv, "-t", "Term", "--size", "100", "--count", "3000")
    assert produced.returncode == 0, produced.stderr
    with _running(namesrv, "consume", "-t", "Term", "-g", "term", "--from", "first", "--json",
                  "--timeout", "60") as proc:  # fmt: skip
        printed = [proc.stdout.readline() for _ in range(10)]
        proc.send_signal(signal.SIGTERM)  # most likely blocked on the full pipe: its last line
        printed += proc.stdout.readlines()
        err = proc.stderr.read()
        assert proc.wait(60) == 128 + signal.SIGTERM, err
    assert "terminated: offsets committed" in err and _quiet(err), err
    first = _positions(printed)
    assert 10 <= len(first) < 3000 and len(set(first)) == len(first)
    rest = shmq("consume", "-n", namesrv, "-t", "Term", "-g", "term", "--json", "--timeout", "1")
    assert rest.returncode == 0, rest.stderr
    second = _positions(rest.stdout.splitlines())
    assert set(first).isdisjoint(second) and len(first) + len(set(second)) == 3000


def test_consume_commits_while_it_runs(namesrv):
    """Offsets reach the broker every persist interval, not only when consume exits:
    another process sees the group's progress while it still waits for messages."""
    from shmq import Admin
    from shmq.errors import ClientError

    produced = shmq("produce", "-n", namesrv, "-t", "Persist", "--body", "x", "--count", "20")
    assert produced.returncode == 0, produced.stderr
    with _running(namesrv, "consume", "-t", "Persist", "-g", "persist", "--from", "first",
                  "--json", "--timeout", "60", "--persist-consumer-offset-interval", "0.2",
                  ) as proc, Admin(namesrv) as admin:  # fmt: skip
        assert len(_positions([proc.stdout.readline() for _ in range(20)])) == 20

        def committed() -> int:
            progress = admin.consumer_progress("persist", "Persist")
            return sum(q.consumer_offset for q in progress.queues)

        wait_for(lambda: committed() == 20, ignore=ClientError, interval=0.1,
                 what="the 20 offsets committed")  # fmt: skip
        assert proc.poll() is None, "consume ended before the check"


def test_consume_into_head_commits_only_the_lines_written(namesrv):
    """``shmq consume | head -3``: once head has quit, the next line fails; consume ends
    quietly with status 0 and commits the three messages head got, not the one it failed to
    print: the group's next run starts right after the third."""
    produced = shmq("produce", "-n", namesrv, "-t", "Head", "--body", "x", "--count", "3")
    assert produced.returncode == 0, produced.stderr
    with _running(namesrv, "consume", "-t", "Head", "-g", "head", "--from", "first",
                  "--timeout", "60") as proc:  # fmt: skip
        shown = [proc.stdout.readline() for _ in range(3)]
        proc.stdout.close()  # as head -3 does
        more = shmq("produce", "-n", namesrv, "-t", "Head", "--body", "y", "--count", "5")
        assert more.returncode == 0, more.stderr
        err = proc.stderr.read()
        assert proc.wait(60) == 0, err
    assert all(line.startswith("Head q") and line.endswith(" body=x\n") for line in shown)
    assert _quiet(err), err
    rest = shmq("consume", "-n", namesrv, "-t", "Head", "-g", "head", "--json", "--timeout", "1")
    assert rest.returncode == 0, rest.stderr
    rows = [json.loads(line) for line in rest.stdout.splitlines()]
    assert [base64.b64decode(r["body"]) for r in rows] == [b"y"] * 5


def test_produce_into_a_closed_pipe_stops_quietly(namesrv):
    """``shmq produce --json | head -0``: the first SendResult finds no reader; produce
    stops after that send, says so on stderr, exit status 0, no traceback."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will read: every write fails with EPIPE
    try:
        proc = subprocess.Popen([sys.executable, "-m", "shmq_cli.main", "produce", "-n", namesrv,
                                 "-t", "Closed", "--body", "x", "--count", "5", "--json"],
                                stdout=write_end, stderr=subprocess.PIPE, text=True, env=env(),
                                stdin=subprocess.DEVNULL)  # fmt: skip
    finally:
        os.close(write_end)
    try:
        err = proc.communicate(timeout=120)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "stdout closed: sent 1 of 5" in err and _quiet(err), err


def test_a_read_only_store_is_a_clear_error(tmp_path):
    with small_tmpfs(tmp_path, "1m") as mnt:
        os.makedirs(os.path.join(mnt, "store"))
        subprocess.run(["mount", "-o", "remount,ro", mnt], check=True)
        done = shmq("start", "--store", os.path.join(mnt, "store"), "--demo")
    assert done.returncode == 1
    assert "cannot write the store directory" in done.stderr and "Read-only" in done.stderr
    assert "Traceback" not in done.stderr and "Errno" not in done.stderr
