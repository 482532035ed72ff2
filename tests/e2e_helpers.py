"""Real processes for end-to-end tests: a namesrv and brokers as subprocesses of the test,
client scripts, free ports, and a check that nothing is left in /dev/shm.

Every process started here is stopped (SIGTERM, then SIGKILL) when the context exits, also
when the test fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

from shmq.remoting.admin_bodies import runtime_stats
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RequestCode

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CLIENTS = os.path.join(HERE, "e2e_clients.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = ROOT + os.pathsep + HERE + os.pathsep + e.get("PYTHONPATH", "")
    return e


def spawn(args: list[str], log_path: str) -> subprocess.Popen:
    log = open(log_path, "ab")  # noqa: SIM115 (closed with the process)
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env())
    proc.log_file = log  # type: ignore[attr-defined]
    proc.log_path = log_path  # type: ignore[attr-defined]
    return proc


def stop(proc: subprocess.Popen, timeout: float = 60.0) -> int:
    """SIGTERM, wait, then SIGKILL; returns the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    with contextlib.suppress(Exception):
        proc.log_file.close()  # type: ignore[attr-defined]
    return proc.returncode


def wait_port(port: int, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode}: {tail(proc)}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port} after {timeout} s: {tail(proc)}")


def tail(proc: subprocess.Popen) -> str:
    try:
        with open(proc.log_path) as f:  # type: ignore[attr-defined]
            return f.read()[-3000:]
    except OSError:
        return ""


class BrokerProc:
    """One broker of a cluster: its ``broker.conf``, store and (when running) process."""

    def __init__(self, tmp: str, name: str, namesrv: str, **conf: object) -> None:
        self.tmp = tmp
        self.name = name
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.store = os.path.join(tmp, "store" if name == "broker-a" else f"store-{name}")
        self.conf_path = os.path.join(tmp, "broker.conf" if name == "broker-a" else f"{name}.conf")
        settings = {
            "brokerName": name,
            "namesrvAddr": namesrv,
            "listenPort": self.port,
            "storePathRootDir": self.store,
            "mappedFileSizeCommitLog": 1 << 20,
            "mappedFileSizeConsumeQueue": 20 * 1024,
            "registerNameServerPeriod": 1000,
            **conf,
        }
        with open(self.conf_path, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in settings.items())
        self.proc: subprocess.Popen | None = None

    def start(self) -> subprocess.Popen:
        cmd = [sys.executable, "-m", "shmq_cli.main", "-v", "broker", "-c", self.conf_path]
        log = "broker.log" if self.name == "broker-a" else f"{self.name}.log"
        self.proc = spawn(cmd, os.path.join(self.tmp, log))
        wait_port(self.port, self.proc)
        return self.proc

    def stop(self) -> int:
        assert self.proc is not None
        code = stop(self.proc)
        self.proc = None
        return code


class Cluster:
    """A namesrv and brokers (``broker.conf`` written from ``conf``) as subprocesses; the
    first broker, ``broker-a``, is started by ``cluster()``, more with ``add_broker``."""

    def __init__(self, tmp: str, namesrv_args: tuple[str, ...] = (), **conf: object) -> None:
        self.tmp = tmp
        self.conf = conf
        self.namesrv_args = namesrv_args
        self.namesrv_port = free_port()
        self.namesrv = f"127.0.0.1:{self.namesrv_port}"
        self.procs: list[subprocess.Popen] = []
        self.brokers: dict[str, BrokerProc] = {}
        self.main = self.add_broker("broker-a", start=False)

    @property
    def broker_port(self) -> int:
        return self.main.port

    @property
    def store(self) -> str:
        return self.main.store

    @property
    def conf_path(self) -> str:
        return self.main.conf_path

    @property
    def broker_proc(self) -> subprocess.Popen | None:
        return self.main.proc

    def add_broker(self, name: str, *, start: bool = True, **conf: object) -> BrokerProc:
        """Another broker of the same cluster, registered with the same namesrv."""
        broker = BrokerProc(self.tmp, name, self.namesrv, **{**self.conf, **conf})
        self.brokers[name] = broker
        if start:
            self.start_broker(name)
        return broker

    def start_namesrv(self) -> None:
        cmd = [sys.executable, "-m", "shmq_cli.main", "namesrv", "--port", str(self.namesrv_port),
               *self.namesrv_args]  # fmt: skip
        proc = spawn(cmd, os.path.join(self.tmp, "namesrv.log"))
        self.procs.append(proc)
        wait_port(self.namesrv_port, proc)

    def start_broker(self, name: str = "broker-a") -> None:
        """Start ``name`` and wait until the namesrv lists it: its port opens before its
        first registration (as RocketMQ's broker does), and a test that asks the namesrv
        for brokers at once would otherwise find none."""
        broker = self.brokers[name]
        self.procs.append(broker.start())
        self.wait_registered(broker)

    def wait_registered(self, broker: BrokerProc, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        with RemotingClient() as client:
            while True:
                with contextlib.suppress(Exception):
                    _, info = client.invoke_json(self.namesrv, RequestCode.GET_BROKER_CLUSTER_INFO)
                    for data in info.get("brokerAddrTable", {}).values():
                        if broker.address in data.get("brokerAddrs", {}).values():
                            return
                if time.monotonic() > deadline or broker.proc.poll() is not None:
                    raise RuntimeError(
                        f"{broker.name} did not register with {self.namesrv}: {tail(broker.proc)}"
                    )
                time.sleep(0.05)

    def stop_broker(self, name: str = "broker-a") -> int:
        broker = self.brokers[name]
        assert broker.proc is not None
        self.procs.remove(broker.proc)
        return broker.stop()

    def create_topic(self, topic: str, queues: int = 1, name: str = "broker-a") -> None:
        with RemotingClient() as client:
            client.invoke_json(
                self.brokers[name].address,
                RequestCode.UPDATE_AND_CREATE_TOPIC,
                {"topic": topic, "readQueueNums": queues, "writeQueueNums": queues},
            )

    def runtime_info(self, name: str = "broker-a") -> dict:
        with RemotingClient() as client:
            _, info = client.invoke_json(
                self.brokers[name].address, RequestCode.GET_BROKER_RUNTIME_INFO
            )
        return runtime_stats(info)

    def client(self, *args: str, log: str) -> subprocess.Popen:
        cmd = [sys.executable, CLIENTS, *args, "--namesrv", self.namesrv]
        proc = spawn(cmd, os.path.join(self.tmp, log))
        self.procs.append(proc)
        return proc

    def close(self) -> None:
        for proc in reversed(self.procs):
            stop(proc)
        self.procs.clear()


@contextlib.contextmanager
def cluster(tmp: str, namesrv_args: tuple[str, ...] = (), **conf: object) -> Iterator[Cluster]:
    """A namesrv (started with ``namesrv_args``) and ``broker-a`` (``conf``)."""
    c = Cluster(str(tmp), namesrv_args, **conf)
    try:
        c.start_namesrv()
        c.start_broker()
        yield c
    finally:
        c.close()


def shm_entries() -> set[str]:
    return {n for n in os.listdir("/dev/shm") if "shmq" in n}


def read_json_lines(path: str) -> list[dict]:
    """The whole lines of a JSON-lines file (one still being written ends without its
    newline and is left out)."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.endswith("\n") and line.strip()]


@contextlib.contextmanager
def small_tmpfs(tmp_path, size: str) -> Iterator[str]:
    """A tmpfs of ``size`` (e.g. "16m") mounted under ``tmp_path`` for disk-full tests,
    unmounted afterwards; the test is skipped where mounting is not permitted."""
    import pytest

    mnt = os.path.join(str(tmp_path), "mnt")
    os.makedirs(mnt, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", mnt],
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", mnt], check=False)


def until_sent(producer, message, timeout: float = 20.0):
    """Send ``message`` again and again until the broker takes it (puts refused for a
    while, e.g. a full disk); its SendResult."""
    from shmq.errors import SendError

    deadline = time.monotonic() + timeout
    while True:
        try:
            return producer.send(message)
        except SendError:
            assert time.monotonic() < deadline, "sends were not accepted again"
            time.sleep(0.2)


def shmq(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    """Run the ``shmq`` CLI in a subprocess (no stdin), its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "shmq_cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env(),
        stdin=subprocess.DEVNULL,
    )


def pull_all(namesrv: str, group: str, topic: str, wanted: set[bytes], timeout: float = 60.0):
    """The bodies a new PullConsumer of ``group`` reads from the first offset of ``topic``,
    read until all of ``wanted`` came or ``timeout`` passed."""
    from shmq import PullConsumer

    got: set[bytes] = set()
    with PullConsumer(group, namesrv, consume_from_where="FIRST_OFFSET") as pc:
        pc.subscribe(topic)
        pc.start()
        deadline = time.monotonic() + timeout
        while not wanted <= got and time.monotonic() < deadline:
            got.update(m.body for m in pc.poll(0.5))
    return got


def start_broker(root: str, ip: str = "127.0.0.1", **conf) -> tuple:
    """A namesrv and an in-process broker (its agents are processes) on ``root``, both on
    ``ip``, with 1 MiB CommitLog files: ``(broker, namesrv)``, to be stopped by the caller."""
    from shmq.broker.config.broker_config import BrokerConfig
    from shmq.broker.supervisor import Broker
    from shmq.namesrv.server import NameServer

    ns = NameServer(ip, 0)
    ns.start()
    cfg = BrokerConfig().replace(
        namesrv_addr=ns.address,
        listen_port=0,
        broker_ip1=ip,
        store_path_root_dir=root,
        mapped_file_size_commit_log=1 << 20,
        **conf,
    )
    broker = Broker(cfg)
    try:
        broker.start()
    except BaseException:
        ns.stop()
        raise
    return broker, ns
