"""The small interface every system under test implements, on both sides of ``spawn``.

Parent side, a ``Peer`` object: whether it can run at all (``unavailable``), which APIs it
offers per workload, the server it needs (``server``, a context manager that owns every
process, file and socket it creates), and per-case set-up (``prepare``) and results
(``finish``). Child side, module-level functions of the peer's module, found by name in the
``spawn``ed processes: ``open_sender(endpoint, case, index) -> Sender`` and
``open_receiver(endpoint, case) -> Receiver``. The harness (``bench.harness``) owns
everything the systems share: processes, pacing, batching, counting, timing and latency.

``durable`` means the system keeps a message in a file on disk once it acknowledges the
send, so the message survives the crash of any process (producer, consumer, broker); the
file may still be in the page cache, flushed within about a second (shmq's and RocketMQ's
default ASYNC_FLUSH, Redis ``appendfsync everysec``, RabbitMQ persistent messages with
publisher confirms), so an OS crash or power loss can lose that last second unless the
workload asks for SYNC_FLUSH (W5). In-memory queues (multiprocessing, faster-fifo, ZeroMQ)
are not durable: the messages die with the processes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from bench.workloads import Api, Case, Workload

Endpoint = dict[str, Any]  # picklable: what the child processes need to connect


class PeerUnavailable(Exception):
    """The system cannot run here; the message is the reason printed as ``skipped``."""


class Peer:
    """A system under test (parent side). Subclasses set the class attributes and override
    what differs; the defaults fit an in-process queue that needs no server."""

    system: str = ""
    module: str = ""  # the module holding open_sender / open_receiver
    durable: bool = False
    apis: tuple[Api, ...] = (Api("single"),)
    cap: int | None = None  # most messages per throughput case (time budget), None: all
    warmup_messages: int = 0  # messages each sender's warm-up puts in front of the consumer

    def unavailable(self) -> str | None:
        """Why the system cannot run here (package or server missing), or None."""
        return None

    def skip_reason(self, workload: Workload, quick: bool) -> str | None:
        """Why this system does not run ``workload``, or None."""
        if workload.sync and not self.durable:
            return "not durable (in memory only): W5 measures a synchronous flush to disk"
        return None

    def apis_for(self, workload: Workload) -> tuple[Api, ...]:
        """Paced latency runs use the one-message API only unless a peer says otherwise."""
        if workload.latency:
            return tuple(a for a in self.apis if not a.batched)[:1]
        return self.apis

    def server_key(self, flavor: str) -> str:
        """Flavors with the same key share one server for the whole run."""
        return flavor

    @contextlib.contextmanager
    def server(self, flavor: str) -> Iterator[Endpoint]:
        """Start what the system needs for ``flavor`` (``async`` / ``sync``, see
        ``Workload.flavor``), yield how to reach it, and stop and remove all of it."""
        yield {}

    def prepare(self, endpoint: Endpoint, case: Case) -> Endpoint:
        """Per-case set-up in the parent (a topic, a stream, a queue); the endpoint the
        case's processes get."""
        return dict(endpoint)

    def finish(self, endpoint: Endpoint, case_endpoint: Endpoint, case: Case) -> dict[str, Any]:
        """Per-case clean-up; extra row fields measured on the server side."""
        return {}


class Sender:
    """Child side of a producer. The harness calls ``warm_up`` before the clock starts,
    then ``send`` per message or ``send_prepared(prepare(bodies))`` per batch, then
    ``flush``: the clock stops when everything sent is accepted as the system promises
    (acknowledged, confirmed, or at least handed over)."""

    def warm_up(self, body: bytes) -> None:
        """Connect, and send ``Peer.warmup_messages`` copies of ``body`` (marked as not
        measured) where the first send pays for set-up the clock should not see."""

    def send(self, body: bytes) -> None:
        raise NotImplementedError

    def prepare(self, bodies: list[bytes]) -> Any:
        """The batch in the form ``send_prepared`` takes; done once before the clock for
        throughput runs, so peers are not charged for building the same batch again."""
        return bodies

    def send_prepared(self, batch: Any) -> None:
        for body in batch:
            self.send(body)

    def flush(self) -> None:
        """Wait until every sent message is accepted."""

    def close(self) -> None:
        """Release everything (sockets, connections); called even after a failure."""


class Receiver:
    """Child side of the consumer: ``recv`` returns the bodies that arrived (an empty list
    after ``timeout`` seconds without any), through the system's fastest public path. Only
    paced (latency) runs read the bodies; otherwise any sequence of the messages will do."""

    def recv(self, timeout: float) -> Sequence[Any]:
        raise NotImplementedError

    def arrival_times(self) -> Sequence[int] | None:
        """When each body of the last ``recv`` reached the user's code (monotonic ns), for
        a system that hands messages over in its own thread (a push consumer's listener);
        None: when ``recv`` returned them."""
        return None

    def close(self) -> None:
        """Release everything; called even after a failure."""
