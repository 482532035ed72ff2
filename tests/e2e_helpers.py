"""Real processes for end-to-end tests: a namesrv and brokers as subprocesses of the test
(``cluster``), or in this process (``embedded``, on ``shmq.EmbeddedBroker``), client scripts,
free ports, and a check that nothing is left in /dev/shm.

Every process started here is stopped (SIGTERM, then SIGKILL) when the context exits, also
when the test fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator

from waiting import wait_for

from shmq.client.transport.queue_reader import QueueReader
from shmq.client.types import MessageQueue
from shmq.embedded import EmbeddedBroker
from shmq.errors import RemotingError
from shmq.remoting.admin_bodies import runtime_stats
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode
from shmq.remoting.security.tls import TlsOptions

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


def alive(proc: subprocess.Popen) -> None:
    """Raise, with the end of its log, when ``proc`` exited: a wait on it would be in vain."""
    if proc.poll() is not None:
        raise RuntimeError(f"process exited with {proc.returncode}: {tail(proc)}")


def wait_port(port: int, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    def listening() -> bool:
        alive(proc)
        with socket.create_connection(("127.0.0.1", port), 0.2):
            return True

    wait_for(listening, timeout=timeout, ignore=OSError, what=f"a listener on port {port}")


def running(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie, dead but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


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
            "proxyEnable": "false",  # many brokers per host: no gRPC port 8081 each
            **conf,
        }
        self.broker_name = str(settings["brokerName"])
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

    def __init__(self, tmp: str, namesrv_args: tuple[str, ...] = (), *,
                 tls: TlsOptions | None = None, **conf: object) -> None:  # fmt: skip
        self.tmp = tmp
        self.tls = tls  # the test's own requests to the namesrv and brokers
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
        with RemotingClient(tls=self.tls) as client:

            def registered() -> bool:
                alive(broker.proc)
                _, info = client.invoke_json(self.namesrv, RequestCode.GET_BROKER_CLUSTER_INFO)
                tables = info.get("brokerAddrTable", {}).values()
                return any(broker.address in t.get("brokerAddrs", {}).values() for t in tables)

            wait_for(registered, timeout=timeout, ignore=(RemotingError, OSError),
                     what=f"{broker.name} to register with {self.namesrv}")  # fmt: skip

    def stop_broker(self, name: str = "broker-a") -> int:
        broker = self.brokers[name]
        assert broker.proc is not None
        self.procs.remove(broker.proc)
        return broker.stop()

    def kill_supervisor(self, name: str = "broker-a") -> None:
        """SIGKILL broker ``name``'s supervisor process alone, as a crash of it, and wait
        until its agents noticed and exited: a restart then finds the store free."""
        broker = self.brokers[name]
        agents = [a["pid"] for a in self.runtime_info(name)["agents"].values() if a["pid"]]
        broker.proc.kill()
        broker.proc.wait(30)
        self.procs.remove(broker.proc)
        broker.proc = None
        wait_for(lambda: not any(map(running, agents)), what=f"{name}'s agents to exit")

    def create_topic(self, topic: str, queues: int = 1, name: str = "broker-a") -> None:
        """Create ``topic`` on broker ``name`` and wait until the namesrv routes it there, so
        that a client started next finds it."""
        broker = self.brokers[name]
        with RemotingClient(tls=self.tls) as client:
            client.invoke_json(
                broker.address,
                RequestCode.UPDATE_AND_CREATE_TOPIC,
                {"topic": topic, "readQueueNums": queues, "writeQueueNums": queues},
            )

            def routed() -> bool:
                resp = client.invoke(self.namesrv, RemotingCommand.request(
                    RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))  # fmt: skip
                if resp.code != ResponseCode.SUCCESS:
                    return False
                queue_datas = resp.json_body()["queueDatas"]
                return any(q["brokerName"] == broker.broker_name for q in queue_datas)

            wait_for(routed, what=f"a route for {topic} on {broker.broker_name}")

    def runtime_info(self, name: str = "broker-a") -> dict:
        with RemotingClient(tls=self.tls) as client:
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
def cluster(tmp: str, namesrv_args: tuple[str, ...] = (), *, tls: TlsOptions | None = None,
            **conf: object) -> Iterator[Cluster]:  # fmt: skip
    """A namesrv (started with ``namesrv_args``) and ``broker-a`` (``conf``); the test's
    requests to them over TLS when ``tls`` is given."""
    c = Cluster(str(tmp), namesrv_args, tls=tls, **conf)
    try:
        c.start_namesrv()
        c.start_broker()
        yield c
    finally:
        c.close()


def shm_entries() -> set[str]:
    """The /dev/shm entries of shmq brokers this test may have made: named ``shmq-PID-...``
    after the broker's supervisor, where PID is this process, one of its descendants, or
    gone. A broker that another program runs (a test run beside this one on the machine)
    is not this test's leak; a dead one's leftovers are."""
    found = set()
    for name in os.listdir("/dev/shm"):
        if "shmq" not in name:
            continue
        pid = re.search(r"shmq-(\d+)-", name)
        if pid is None or not running(int(pid[1])) or _descends(int(pid[1])):
            found.add(name)
    return found


def _descends(pid: int) -> bool:
    """Whether ``pid`` is this process or a descendant of it (its parent chain in /proc)."""
    me = os.getpid()
    while pid > 1:
        if pid == me:
            return True
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (FileNotFoundError, ProcessLookupError, ValueError):
            return False
    return False


def read_json_lines(path: str) -> list[dict]:
    """The whole lines of a JSON-lines file (one still being written ends without its
    newline and is left out)."""
    with open(path) as f:
        text = f.read()  # at once: lines read one by one can meet the writer mid-line
    whole = text[: text.rfind("\n") + 1]
    return [json.loads(line) for line in whole.splitlines() if line.strip()]


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

    return wait_for(lambda: producer.send(message), timeout=timeout, interval=0.2,
                    ignore=SendError, what="the broker to take sends again")  # fmt: skip


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

        def all_came() -> bool:
            got.update(m.body for m in pc.poll(0.5))
            return wanted <= got

        wait_for(all_came, timeout=timeout, interval=0, what=f"{len(wanted)} messages of {topic}")
    return got


@contextlib.contextmanager
def embedded(root: str, host: str = "127.0.0.1", **conf: object) -> Iterator[EmbeddedBroker]:
    """A namesrv and a broker in this process (``shmq.EmbeddedBroker``; the broker's agents
    are processes) on the store ``root``, both on ``host``, with 1 MiB CommitLog files and
    ``conf``; stopped on exit, and then none of its shared memory may be left."""
    before = shm_entries()
    conf = {"mapped_file_size_commit_log": 1 << 20, **conf}
    with EmbeddedBroker(root, host=host, **conf) as mq:
        yield mq
    left = shm_entries() - before
    assert not left, f"left in /dev/shm: {sorted(left)}"


def tls_certs(directory: str) -> tuple[str, str]:
    """``(certificate, key)`` PEM paths in ``directory``: a self-signed pair for localhost
    and 127.0.0.1, its own CA (a client trusts it with ``TlsOptions(ca_file=certificate)``)."""
    from shmq.remoting.security.self_signed import self_signed

    cert, key = self_signed()
    paths = os.path.join(directory, "tls-cert.pem"), os.path.join(directory, "tls-key.pem")
    for path, pem in zip(paths, (cert, key), strict=True):
        with open(path, "wb") as f:
            f.write(pem)
    return paths


def read_all(c, topic: str, queue_id: int, count: int) -> list:
    """The first ``count`` messages of a queue of ``c``'s broker-a, read through shared
    memory."""
    with QueueReader("tcp-check", c.namesrv) as reader:
        mq = MessageQueue(topic, "broker-a", queue_id)
        out: list = []

        def all_read() -> bool:
            out.extend(reader.pull(mq, len(out), count - len(out), timeout=0.5).messages)
            return len(out) >= count

        wait_for(all_read, interval=0, what=f"{count} messages of {topic}:{queue_id}")
        return out


def listeners(port: int) -> list[tuple[str, int]]:
    """The listening sockets on ``port``: (local ip, socket inode)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            next(f)
            for line in f:
                cols = line.split()
                addr, state, inode = cols[1], cols[3], int(cols[9])
                host_hex, port_hex = addr.rsplit(":", 1)
                if state == "0A" and int(port_hex, 16) == port:
                    ip = socket.inet_ntoa(bytes.fromhex(host_hex)[::-1]) if len(host_hex) == 8 \
                        else host_hex  # fmt: skip
                    found.append((ip, inode))
    return found


def socket_inodes(pid: int) -> set[int]:
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def listening_pid(port: int) -> int:
    """The process that listens on ``port`` (the broker's: its data server)."""
    ((_, inode),) = listeners(port)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if inode in socket_inodes(int(pid)):
                return int(pid)
    raise AssertionError(f"no process listens on port {port}")
