"""``multiprocessing.Queue`` (spawn context): what the standard library offers.

Batched: a list of bodies per ``put`` (one pickle, one pipe write), the way a user would
batch it by hand; the consumer then gets lists back."""

from __future__ import annotations

import multiprocessing as mp
import queue
from collections.abc import Sequence
from typing import Any

from bench.peers.base import Endpoint, Peer, Receiver, Sender
from bench.workloads import Api, Case


class MpQueuePeer(Peer):
    system = "multiprocessing.Queue"
    module = __name__
    apis = (Api("put"), Api("put(list)", batched=True))

    def prepare(self, endpoint: Endpoint, case: Case) -> Endpoint:
        return {"queue": mp.get_context("spawn").Queue()}

    def finish(self, endpoint: Endpoint, case_endpoint: Endpoint, case: Case) -> dict[str, Any]:
        q = case_endpoint["queue"]
        q.close()
        q.join_thread()
        return {}


class _Sender(Sender):
    def __init__(self, q: Any) -> None:
        self.q = q
        self.send = q.put  # the bare call: no adapter in the loop

    def send_prepared(self, batch: list[bytes]) -> None:
        self.q.put(batch)

    def flush(self) -> None:
        self.q.close()
        self.q.join_thread()  # the feeder thread has written everything to the pipe


class _Receiver(Receiver):
    def __init__(self, q: Any) -> None:
        self.q = q

    def recv(self, timeout: float) -> Sequence[bytes]:
        try:
            item = self.q.get(timeout=timeout)
        except queue.Empty:
            return []
        return item if isinstance(item, list) else [item]


def open_sender(endpoint: Endpoint, case: Case, index: int) -> Sender:
    return _Sender(endpoint["queue"])


def open_receiver(endpoint: Endpoint, case: Case) -> Receiver:
    return _Receiver(endpoint["queue"])
