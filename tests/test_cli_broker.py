"""The README's main job as real commands: shmq start --daemon, produce, consume, status, stop."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from waiting import wait_for

from e2e_helpers import free_port, shm_entries, shmq


def test_start_produce_consume_status_stop(tmp_path):
    before = shm_entries()
    store = str(tmp_path / "store")
    ns_port, broker_port = free_port(), free_port()
    namesrv = f"127.0.0.1:{ns_port}"
    started = shmq(
        "start",
        "--daemon",
        "--store",
        store,
        "--namesrv-port",
        str(ns_port),
        "--broker-port",
        str(broker_port),
        "--mapped-file-size",
        str(8 << 20),
    )
    try:
        assert started.returncode == 0, started.stderr
        assert "started in the background" in started.stdout
        again = shmq("start", "--daemon", "--store", store)
        assert again.returncode == 1 and "already running" in again.stderr
        one = shmq(
            "produce",
            "-n",
            namesrv,
            "--topic",
            "Demo",
            "--body",
            "hello",
            "--tags",
            "A",
            "--keys",
            "k1 k2",
        )
        assert one.returncode == 0, one.stderr
        assert "sendStatus=SEND_OK" in one.stdout and "queueOffset=0" in one.stdout
        many = shmq("produce", "-n", namesrv, "--topic", "Demo", "--size", "100", "--count", "5000")
        assert many.returncode == 0, many.stderr
        assert "sent 5000 messages" in many.stdout
        got = shmq(
            "consume",
            "-n",
            namesrv,
            "--topic",
            "Demo",
            "--group",
            "g",
            "--from",
            "first",
            "--count",
            "5001",
            "--timeout",
            "10",
        )
        assert got.returncode == 0, got.stderr
        assert "received 5001 messages" in got.stdout
        # a group resumed with the default --from last still gets what its first run,
        # which stopped after 100 messages of the first queues, did not read
        part = shmq("consume", "-n", namesrv, "--topic", "Demo", "--group", "resume",
                    "--from", "first", "--count", "100")  # fmt: skip
        assert part.returncode == 0, part.stderr
        rest = shmq("consume", "-n", namesrv, "--topic", "Demo", "--group", "resume",
                    "--count", "4901", "--json", "--timeout", "10")  # fmt: skip
        assert rest.returncode == 0, rest.stderr
        rows = [json.loads(line) for line in rest.stdout.splitlines()]
        assert len({(r["queueId"], r["queueOffset"]) for r in rows}) == 4901
        tagged = shmq(
            "consume",
            "-n",
            namesrv,
            "--topic",
            "Demo",
            "--group",
            "tags",
            "--from",
            "first",
            "--tags",
            "A || B",
            "--count",
            "1",
            "--json",
            "--timeout",
            "5",
        )
        assert tagged.returncode == 0, tagged.stderr
        row = json.loads(tagged.stdout.splitlines()[0])
        assert row["tags"] == "A" and row["keys"] == ["k1", "k2"] and row["queueOffset"] == 0
        # the group's offsets were committed: nothing is left for it
        empty = shmq(
            "consume",
            "-n",
            namesrv,
            "--topic",
            "Demo",
            "--group",
            "g",
            "--count",
            "1",
            "--timeout",
            "1",
        )
        assert empty.returncode == 1 and "timeout: received 0 of 1" in empty.stderr
        status = shmq("status", "--store", store, "--json", "--interval", "0.1")
        assert status.returncode == 0, status.stderr
        info = json.loads(status.stdout)
        assert info["msgs_in"] == 5001 and info["msgs_dispatched"] == 5001
        # an ASYNC_FLUSH master's writer dispatches (dispatchInline): no reput process
        assert {p["role"] for p in info["processes"]} == {
            "supervisor", "writer", "flush", "cleaner", "schedule", "ha"
        }  # fmt: skip
        assert all(p["alive"] for p in info["processes"])
        missing = shmq(
            "produce", "-n", f"127.0.0.1:{free_port()}", "--topic", "Demo", "--body", "x"
        )
        assert missing.returncode == 1 and missing.stderr.startswith("error: ")
    finally:
        stopped = shmq("stop", "--store", store)
    assert stopped.returncode == 0, stopped.stderr
    assert not os.path.exists(os.path.join(store, "abort"))
    for path, _dirs, names in os.walk(store):  # private: topics, offsets, messages, the log
        assert os.stat(path).st_mode & 0o777 == 0o700, path
        for name in names:
            assert os.stat(os.path.join(path, name)).st_mode & 0o777 == 0o600, (path, name)
    assert shm_entries() - before == set()


def test_a_stale_pid_is_never_signalled(tmp_path):
    """After a crash or a reboot shmq.json may name a pid that now belongs to another
    program: stop and status must say so and leave that program alone."""
    store = tmp_path / "store"
    store.mkdir()
    other = subprocess.Popen(["sleep", "60"])
    try:
        (store / "shmq.json").write_text(
            json.dumps({"pid": other.pid, "pidStarted": 1, "broker": "127.0.0.1:1"})
        )
        stopped = shmq("stop", "--store", str(store))
        assert stopped.returncode == 1 and f"stale pid {other.pid}" in stopped.stderr
        assert other.poll() is None, "shmq stop signalled a process that is not the broker"
        status = shmq("status", "--store", str(store))
        assert status.returncode == 1 and "not running" in status.stderr
        assert "--store" in status.stderr  # the stale file is gone: say what to try
    finally:
        other.kill()
        other.wait()


def test_daemon_start_failures_say_why(tmp_path):
    import socket

    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    port = busy.getsockname()[1]
    try:
        failed = shmq("start", "--daemon", "--store", str(tmp_path / "s"), "--namesrv-port",
                      str(port), "--broker-port", str(free_port()))  # fmt: skip
    finally:
        busy.close()
    assert failed.returncode == 1
    assert "Address already in use" in failed.stderr and f"127.0.0.1:{port}" in failed.stderr


def test_daemon_start_on_a_locked_store_names_the_holder(tmp_path):
    from shmq.store.lock import StoreLock

    store = tmp_path / "locked"
    store.mkdir()
    lock = StoreLock(str(store))
    lock.acquire()  # this test process holds the store
    try:
        failed = shmq("start", "--daemon", "--store", str(store), "--namesrv-port",
                      str(free_port()), "--broker-port", str(free_port()))  # fmt: skip
    finally:
        lock.release()
    assert failed.returncode == 1
    assert "locked" in failed.stderr and f"pid {os.getpid()}" in failed.stderr


def test_sigterm_while_the_broker_starts_stops_it_cleanly(tmp_path):
    """A stop request that arrives once the broker has created its shared memory, while its
    agents still start, is honoured after the start: exit 0, nothing left in /dev/shm (a
    client may already take the broker for up: its control server answers early)."""
    before = shm_entries()
    conf = tmp_path / "broker.conf"
    conf.write_text(
        f"brokerName=broker-a\nnamesrvAddr=127.0.0.1:{free_port()}\nlistenPort={free_port()}\n"
        f"storePathRootDir={tmp_path / 'store'}\nmappedFileSizeCommitLog={1 << 20}\n"
    )
    cmd = [sys.executable, "-m", "shmq_cli.main", "broker", "-c", str(conf)]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            prefix = f"shmq-{proc.pid}-"

            def segments_made() -> bool:
                assert proc.poll() is None, proc.stderr.read()
                return any(prefix in n for n in os.listdir("/dev/shm"))

            wait_for(segments_made, timeout=120, interval=0.005, what="the broker's segments")
            proc.send_signal(signal.SIGTERM)  # its agents are being spawned now
            _, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, err
    assert not [n for n in os.listdir("/dev/shm") if prefix in n]
    assert shm_entries() <= before


def _foreground_broker(tmp_path) -> subprocess.Popen:
    """``shmq broker -c`` in the foreground, once it says it listens."""
    conf = tmp_path / "broker.conf"
    conf.write_text(
        f"brokerName=broker-a\nnamesrvAddr=127.0.0.1:{free_port()}\nlistenPort={free_port()}\n"
        f"storePathRootDir={tmp_path / 'store'}\nmappedFileSizeCommitLog={1 << 20}\n"
        "proxyEnable=false\n"
    )
    cmd = [sys.executable, "-m", "shmq_cli.main", "broker", "-c", str(conf)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert "listening on" in line, (line, proc.poll())
    return proc


def test_a_second_signal_during_the_clean_stop_changes_nothing(tmp_path):
    """Ctrl-C, then a service manager's SIGTERM while the clean stop runs (and again, in a
    burst): the broker still stops cleanly, exit 0, nothing left in /dev/shm. A signal
    handler that took a lock could deadlock on the lock the code it interrupted held."""
    before = shm_entries()
    proc = _foreground_broker(tmp_path)
    try:
        proc.send_signal(signal.SIGINT)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, err
    assert "a third signal stops at once" in err
    assert not [n for n in os.listdir("/dev/shm") if f"shmq-{proc.pid}-" in n]
    assert shm_entries() <= before


def test_a_third_signal_stops_at_once(tmp_path):
    proc = _foreground_broker(tmp_path)
    try:
        # two different signals: both are delivered even if neither was handled yet (two
        # pending SIGINTs would be one); the third goes once the second is acknowledged,
        # so a loaded host cannot let the clean stop finish before the three are counted
        proc.send_signal(signal.SIGINT)
        proc.send_signal(signal.SIGTERM)
        seen = ""
        while "a third signal stops at once" not in seen and proc.poll() is None:
            seen += proc.stderr.readline()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        err = seen + err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        # what the forced stop left, as the next start would remove it
        from shmq.ipc.segment import unlink_orphans

        unlink_orphans()
    assert proc.returncode == 128 + signal.SIGINT, err
    assert "stopped at once" in err
