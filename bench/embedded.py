"""Shared by the client benchmarks: ``shmq.EmbeddedBroker`` with the benchmarks' settings, and
the collection of the producer's and consumer's results."""

from __future__ import annotations

import contextlib
import queue
import signal
import sys
import time
from collections.abc import Iterator


@contextlib.contextmanager
def embedded_broker(topic: str, queues: int = 1, **config) -> Iterator[str]:
    """Start both, create ``topic`` with ``queues`` queues, yield the namesrv address."""
    from shmq.embedded import EmbeddedBroker

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # clean up in `finally`
    settings = {
        "mapped_file_size_commit_log": 256 << 20,
        "default_topic_queue_nums": queues,
        "ring_size": 16 << 20,
        **config,
    }
    with EmbeddedBroker(topics={topic: queues}, **settings) as mq:
        yield mq.namesrv


def gather_results(out, procs: list, label: str, timeout: float = 600.0) -> dict:
    """``{key: value}`` from the ``(key, value)`` pairs each of ``procs`` puts on the queue
    ``out``; kills them all and raises when one fails or ``timeout`` passes."""
    results: dict = {}
    deadline = time.monotonic() + timeout
    while len(results) < len(procs):
        if time.monotonic() > deadline or any(p.exitcode not in (None, 0) for p in procs):
            for p in procs:
                p.kill()
            raise RuntimeError(f"{label}: a client process failed or timed out")
        try:
            key, value = out.get(timeout=0.5)
        except queue.Empty:
            continue
        results[key] = value
    for p in procs:
        p.join(30)
    return results
