"""faster-fifo: a shared-memory circular buffer behind the ``multiprocessing.Queue`` API,
with ``put_many`` / ``get_many`` for batches. The consumer always uses ``get_many`` (its
fastest path); the producer either ``put`` per message or ``put_many`` per batch."""

from __future__ import annotations

import queue
from collections.abc import Sequence
from typing import Any

from bench.peers.base import Endpoint, Peer, Receiver, Sender
from bench.workloads import Api, Case

BUFFER_BYTES = 64 << 20  # room for many 1 KiB batches; the default (1 MB) is one batch
TIMEOUT_S = 60.0


class FasterFifoPeer(Peer):
    system = "faster-fifo"
    module = __name__
    apis = (Api("put"), Api("put_many", batched=True))

    def unavailable(self) -> str | None:
        try:
            import faster_fifo  # noqa: F401
        except ImportError as exc:
            return f"faster-fifo is not installed ({exc}); pip install -e '.[bench]'"
        return None

    def prepare(self, endpoint: Endpoint, case: Case) -> Endpoint:
        from faster_fifo import Queue

        return {"queue": Queue(max_size_bytes=BUFFER_BYTES)}

    def finish(self, endpoint: Endpoint, case_endpoint: Endpoint, case: Case) -> dict[str, Any]:
        case_endpoint["queue"].close()
        return {}


class _Sender(Sender):
    def __init__(self, q: Any) -> None:
        self.q = q

    def send(self, body: bytes) -> None:
        self.q.put(body, timeout=TIMEOUT_S)

    def send_prepared(self, batch: list[bytes]) -> None:
        self.q.put_many(batch, timeout=TIMEOUT_S)


class _Receiver(Receiver):
    def __init__(self, q: Any) -> None:
        self.q = q

    def recv(self, timeout: float) -> Sequence[bytes]:
        try:
            return self.q.get_many(timeout=timeout, max_messages_to_get=4096)
        except queue.Empty:
            return []


def open_sender(endpoint: Endpoint, case: Case, index: int) -> Sender:
    return _Sender(endpoint["queue"])


def open_receiver(endpoint: Endpoint, case: Case) -> Receiver:
    return _Receiver(endpoint["queue"])
