"""pyzmq PUSH → PULL over ``ipc://`` (a Unix socket): brokerless, in memory, ZeroMQ's own
background I/O thread batching small messages on the wire. The consumer binds, producers
connect; the consumer drains everything queued after each wake-up.

Found while building this: a PULL socket drops the messages it has not read yet from a
PUSH peer that disconnects (``close(linger=…)`` only covers the sender's own queue), so a
producer that exits as soon as it has sent loses its tail when the consumer is behind
(~400 of 250,000 per producer in W4). The harness keeps producers connected until the
consumer has everything, for every system."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

from bench.peers.base import Endpoint, Peer, Receiver, Sender
from bench.servers import temp_dir
from bench.workloads import Api, Case

DRAIN = 4096  # messages read per wake-up at most


class ZmqPeer(Peer):
    system = "pyzmq ipc"
    module = __name__
    apis = (Api("send"),)

    def unavailable(self) -> str | None:
        try:
            import zmq  # noqa: F401
        except ImportError as exc:
            return f"pyzmq is not installed ({exc}); pip install -e '.[bench]'"
        return None

    @contextlib.contextmanager
    def server(self, flavor: str) -> Iterator[Endpoint]:
        with temp_dir("shmq-bench-zmq-") as path:  # the sockets' directory
            yield {"dir": str(path)}

    def prepare(self, endpoint: Endpoint, case: Case) -> Endpoint:
        return {"addr": f"ipc://{endpoint['dir']}/{case.name}.sock"}


class _Sender(Sender):
    def __init__(self, addr: str) -> None:
        import zmq

        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.PUSH)
        self.sock.connect(addr)
        self.send = self.sock.send

    def close(self) -> None:
        self.sock.close(linger=5000)  # let queued messages reach the consumer
        self.ctx.term()


class _Receiver(Receiver):
    def __init__(self, addr: str) -> None:
        import zmq

        self.zmq = zmq
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.PULL)
        self.sock.bind(addr)

    def recv(self, timeout: float) -> Sequence[bytes]:
        if not self.sock.poll(int(timeout * 1000)):
            return []
        recv, flags, out = self.sock.recv, self.zmq.NOBLOCK, []
        with contextlib.suppress(self.zmq.Again):
            for _ in range(DRAIN):
                out.append(recv(flags))
        return out

    def close(self) -> None:
        self.sock.close(linger=0)
        self.ctx.term()


def open_sender(endpoint: Endpoint, case: Case, index: int) -> Sender:
    return _Sender(endpoint["addr"])


def open_receiver(endpoint: Endpoint, case: Case) -> Receiver:
    return _Receiver(endpoint["addr"])
