"""A second local user cannot use or disturb the broker's shared memory and store: it cannot
read the store, cannot attach to a producer's ring or semaphore, and cannot make a new
client's registration fail by creating the names it would get first (slot names carry a
random generation, not a count another user could run ahead of). The other user is a real
uid (created with ``useradd``), its code a forked child that dropped root: runs as root only."""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import subprocess

import posix_ipc
import pytest

from e2e_helpers import embedded
from shmq.client.consumer.lite_pull import PullConsumer
from shmq.client.producer.producer import Producer
from shmq.client.transport.chooser import TransportChooser
from shmq.message import Message
from shmq.remoting.client import RemotingClient

OTHER = "shmq-test-other"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("useradd") is None,
    reason="needs root and useradd to act as a second user",
)


@pytest.fixture(scope="module")
def other_uid() -> int:
    try:
        return pwd.getpwnam(OTHER).pw_uid
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/bin/false", OTHER],
                       check=True)  # fmt: skip
        return pwd.getpwnam(OTHER).pw_uid


def as_other(uid: int, action) -> dict:
    """``action()``'s JSON-able result, run in a forked child that became ``uid``."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no exec, the modules are imported already
        os.close(read)
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            result = action()
        except BaseException as exc:  # reported to the parent
            result = {"error": repr(exc)}
        os.write(write, json.dumps(result).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    return json.loads(data)


def squat(prefixes: list[str], slots: int, gens: int) -> dict:
    """Create every name the old counted scheme would hand out next."""
    made = []
    for prefix in prefixes:
        for i in range(slots):
            for gen in range(1, gens):
                for name in (f"{prefix}.p{i}.{gen}", f"{prefix}.c{i}.{gen}"):
                    try:
                        posix_ipc.Semaphore(name, posix_ipc.O_CREX, 0o666).close()
                        made.append(name)
                    except posix_ipc.ExistentialError:
                        pass
                name = f"{prefix}.ring{i}.{gen}"
                try:
                    posix_ipc.SharedMemory(name, posix_ipc.O_CREX, 0o666, size=4096).close_fd()
                    made.append(name)
                except posix_ipc.ExistentialError:
                    pass
    return {"made": made}


def attach(names: list[tuple[str, bool]], store: str) -> dict:
    refused = {}
    for name, is_semaphore in names:
        try:
            if is_semaphore:
                posix_ipc.Semaphore(name).close()
            else:
                posix_ipc.SharedMemory(name).close_fd()
            refused[name] = False
        except posix_ipc.PermissionsError:
            refused[name] = True
    try:
        os.listdir(store)
        store_refused = False
    except PermissionError:
        store_refused = True
    return {"refused": refused, "store_refused": store_refused}


def transport_of(address: str) -> dict:
    """What a client of the other user decides for the broker (``auto``)."""
    with RemotingClient() as client:
        return {"tcp": TransportChooser(client, "auto").tcp(address)}


def shm_names() -> list[tuple[str, bool]]:
    """The broker's names in /dev/shm (as any user lists them), and which are semaphores."""
    return [("/" + n.removeprefix("sem."), n.startswith("sem."))
            for n in os.listdir("/dev/shm") if "shmq" in n]  # fmt: skip


def test_another_user_can_neither_attach_nor_squat_nor_read_the_store(tmp_path, other_uid):
    store = str(tmp_path / "store")
    with embedded(store, max_producers=16, max_consumers=8) as mq:
        mq.create_topic("Private", 1)
        made: list[str] = []
        try:
            with Producer("first", mq.namesrv) as first:
                first.send(Message("Private", b"one"))
                existing = shm_names()
                prefixes = sorted({n.split(".")[0] for n, _ in existing})
                seen = as_other(other_uid, lambda: attach(existing, store))
                assert seen.get("store_refused"), seen
                assert seen["refused"] and all(seen["refused"].values()), seen
                made = as_other(other_uid, lambda: squat(prefixes, 16, 40))["made"]
                assert made, "the squatter could create names in /dev/shm"
                # a client of the other user goes over TCP (and ACL), never shared memory
                address = mq.broker_address
                assert as_other(other_uid, lambda: transport_of(address)) == {"tcp": True}
                # every new client still registers, and messages go through
                producers = [Producer(f"p{i}", mq.namesrv) for i in range(4)]
                try:
                    for i, p in enumerate(producers):
                        p.send(Message("Private", f"p{i}".encode()))
                finally:
                    for p in producers:
                        p.shutdown()
            with PullConsumer("readers", mq.namesrv) as consumer:
                consumer.subscribe("Private", "*")
                consumer.start()
                got = []
                for _ in range(50):
                    got += [m.body for m in consumer.poll(1.0)]
                    if len(got) >= 5:
                        break
            assert sorted(got) == [b"one", b"p0", b"p1", b"p2", b"p3"]
        finally:  # before the broker's stop checks that nothing is left in /dev/shm
            for name in made:
                for kind in (posix_ipc.unlink_semaphore, posix_ipc.unlink_shared_memory):
                    with contextlib.suppress(posix_ipc.ExistentialError):
                        kind(name)
