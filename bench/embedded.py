"""Shared by the client benchmarks: a namesrv and a broker in the benchmark's own process
(the broker's agents are still separate processes) with a store in a temporary directory
removed afterwards, and the collection of the producer's and consumer's results."""

from __future__ import annotations

import contextlib
import logging
import queue
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator


@contextlib.contextmanager
def embedded_broker(topic: str, queues: int = 1, **config) -> Iterator[str]:
    """Start both, create ``topic`` with ``queues`` queues, yield the namesrv address."""
    from shmq.broker.broker_config import BrokerConfig
    from shmq.broker.supervisor import Broker
    from shmq.namesrv.server import NameServer
    from shmq.remoting.client import RemotingClient
    from shmq.remoting.protocol import RequestCode

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # clean up in `finally`
    tmp = tempfile.mkdtemp(prefix="shmq-bench-")
    namesrv = NameServer("127.0.0.1", 0)
    namesrv.start()
    settings = {
        "namesrv_addr": namesrv.address,
        "listen_port": 0,
        "store_path_root_dir": tmp,
        "mapped_file_size_commit_log": 256 << 20,
        "default_topic_queue_nums": queues,
        "ring_size": 16 << 20,
        **config,
    }
    broker = Broker(BrokerConfig().replace(**settings), log_level=logging.WARNING)
    try:
        broker.start()
        with RemotingClient() as client:
            client.invoke_json(
                broker.address,
                RequestCode.UPDATE_AND_CREATE_TOPIC,
                {"topic": topic, "readQueueNums": queues, "writeQueueNums": queues},
            )
        yield namesrv.address
    finally:
        broker.stop()
        namesrv.stop()
        shutil.rmtree(tmp, ignore_errors=True)


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
