"""A second local user cannot use or disturb the broker's shared memory and store: it cannot
read the store, cannot attach to a producer's ring or semaphore, and cannot make a new
client's registration fail by creating the names it would get first (slot names carry a
random generation, not a count another user could run ahead of). The other user is a real
uid (created with ``useradd``), its code a forked child that dropped root: runs as root only."""

from __future__ import annotations

import contextlib
import grp
import json
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
import traceback

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


def as_other(uid: int, action, groups: tuple[int, ...] = ()) -> dict:
    """``action()``'s JSON-able result, run in a forked child that became ``uid`` (in the
    supplementary ``groups``)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no exec, the modules are imported already
        os.close(read)
        try:
            os.setgroups(list(groups))
            os.setgid(uid)
            os.setuid(uid)
            result = action()
        except BaseException as exc:  # reported to the parent
            result = {"error": repr(exc), "where": traceback.format_exc(limit=-3)}
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
    """The embedded broker's names in /dev/shm (as any user lists them; its supervisor is
    this process), and which are semaphores."""
    mine = f"shmq-{os.getpid()}-"
    return [("/" + n.removeprefix("sem."), n.startswith("sem."))
            for n in os.listdir("/dev/shm") if mine in n]  # fmt: skip


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


SHARED = "shmq-test-clients"


@pytest.fixture(scope="module")
def shared_gid() -> int:
    try:
        return grp.getgrnam(SHARED).gr_gid
    except KeyError:
        subprocess.run(["groupadd", "--system", SHARED], check=True)
        return grp.getgrnam(SHARED).gr_gid


def local_round_trip(address: str, namesrv: str) -> dict:
    """As the other user: the transport chosen, then a send and a read through it."""
    with RemotingClient() as client:
        tcp = TransportChooser(client, "auto").tcp(address)
    with Producer("other-producer", namesrv, transport="shm") as producer:
        producer.send(Message("Shared", b"from the other user"))
    got = []
    with PullConsumer("other-readers", namesrv, transport="shm") as consumer:
        consumer.subscribe("Shared", "*")
        consumer.start()
        for _ in range(50):
            got += [m.body.decode() for m in consumer.poll(1.0)]
            if got:
                break
    return {"tcp": tcp, "got": got}


def test_a_local_client_group_lets_its_members_use_shared_memory(other_uid, shared_gid):
    """``localClientGroup``: the store, its segments and semaphores belong to the group, and
    a client of another user in it uses shared memory (a send through its ring, a read of
    the mapped files); the same user outside the group still cannot attach."""
    parent = tempfile.mkdtemp(prefix="shmq-shared-")  # pytest's tmp_path is root's alone
    os.chmod(parent, 0o755)
    store = os.path.join(parent, "store")
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(shutil.rmtree, parent, ignore_errors=True)
        mq = cleanup.enter_context(embedded(store, local_client_group=SHARED))
        mq.create_topic("Shared", 1)
        names = shm_names()
        for name, is_semaphore in names:
            path = "/dev/shm/" + ("sem." if is_semaphore else "") + name.lstrip("/")
            st = os.stat(path)
            assert (st.st_gid, stat.S_IMODE(st.st_mode)) == (shared_gid, 0o660), path
        st = os.stat(store)
        assert st.st_gid == shared_gid and st.st_mode & 0o2050 == 0o2050, oct(st.st_mode)
        outsider = as_other(other_uid, lambda: attach(names, store))
        assert outsider.get("store_refused") and all(outsider["refused"].values()), outsider
        address, namesrv = mq.broker_address, mq.namesrv
        # the client kernels loaded here first: the forked child cannot read root's cache
        assert local_round_trip(address, namesrv)["got"] == ["from the other user"]
        member = as_other(other_uid, lambda: local_round_trip(address, namesrv), (shared_gid,))
        assert member == {"tcp": False, "got": ["from the other user"]}, member
        for directory, _, files in os.walk(store):
            for name in files:
                st = os.stat(os.path.join(directory, name))
                assert st.st_gid == shared_gid and st.st_mode & 0o040, (directory, name)
