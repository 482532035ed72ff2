"""shmq itself: an embedded namesrv and broker (agents in their own processes, store on disk
in a temporary directory), ASYNC_FLUSH for W1–W4 (RocketMQ's default: durable once in the
CommitLog file, flushed within ``flushIntervalCommitLog``), SYNC_FLUSH for W5 (a send is
acknowledged only after the flush agent's group commit reached it).

Producers use the single-message APIs (``send_async``: one call per message, many in flight;
``send_oneway``: one call per message, no answer; ``send``: one call per message, waiting for
its answer) or the bulk path (``send_bulk`` of a uint8 buffer and int64 boundaries, encoded
by one kernel call). Like against like on the consumer side too: single-message sends are
consumed by a ``PushConsumer`` whose listener gets ``MessageExt`` objects (RocketMQ's
default of one message per listener call); ``send_bulk`` by ``QueueReader.pull_bulk`` (one
``MessageBatch`` of up to 16,384: bodies in one buffer). In paced runs the latency of a
pushed message ends when the listener gets it.
For W5 the row also reports messages per fsync: messages stored ÷ flushes, from the
broker's runtime stats over the case.
"""

from __future__ import annotations

import collections
import contextlib
import os
import threading
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.peers.base import Endpoint, Peer, Receiver, Sender
from bench.workloads import Api, Case, Workload

if TYPE_CHECKING:
    from shmq.client.types import MessageQueue

BROKER = "broker-a"
HANDOVER_S = 0.0005  # the receiver's wait for a listener's messages to accumulate
BULK = Api("send_bulk", batched=True, batch=16384)  # chunks of it are pipelined
SEND_ASYNC = Api("send_async")
SEND_ONEWAY = Api("send_oneway")
# a sync send waits for each answer (~20-50 µs here): fewer messages keep the run within its
# time budget; the row reports the count
SEND = Api("send", cap=100_000)
SETTLE_EVERY = 4096  # send_async futures collected before waiting for their answers
MAX_PULL = 1024
MAX_BULK_PULL = 16384


class ShmqPeer(Peer):
    system = "shmq"
    module = __name__
    durable = True
    apis = (SEND_ASYNC, SEND_ONEWAY, SEND, BULK)
    warmup_messages = 1  # one per producer, see _Sender.warm_up

    def unavailable(self) -> str | None:
        try:
            import shmq.client.producer.producer  # noqa: F401
        except ImportError as exc:
            return f"shmq cannot be imported ({exc})"
        return None

    def skip_reason(self, workload: Workload, quick: bool) -> str | None:
        return None

    def apis_for(self, workload: Workload) -> tuple[Api, ...]:
        """Throughput: every API, like against like in the report (sync ``send`` with one
        producer only). Latency: all four paced, ``send_bulk`` sending whatever is due.
        W5: ``send`` (eight synchronous producers, the classic RocketMQ sync send),
        ``send_async`` and ``send_bulk`` of 1,024, which put more messages into each group
        commit."""
        if workload.latency:
            return (SEND_ONEWAY, SEND_ASYNC, SEND, BULK)
        if workload.sync:
            return (SEND, SEND_ASYNC, Api("send_bulk", batched=True, batch=1024))
        if workload.producers > 1:
            return (SEND_ASYNC, SEND_ONEWAY, BULK)
        return self.apis

    @contextlib.contextmanager
    def server(self, flavor: str) -> Iterator[Endpoint]:
        from bench.embedded import embedded_broker

        flush = "SYNC_FLUSH" if flavor == "sync" else "ASYNC_FLUSH"
        with embedded_broker("BenchWarmup", 1, flush_disk_type=flush) as namesrv:
            yield {"namesrv": namesrv, "flush": flush}

    def prepare(self, endpoint: Endpoint, case: Case) -> Endpoint:
        from shmq.client.admin.admin import Admin

        queues = case.workload.producers
        topic = f"Bench_{case.name}"
        with Admin(endpoint["namesrv"]) as admin:
            admin.update_topic(topic, read_queue_nums=queues, write_queue_nums=queues)
            before = admin.broker_status(BROKER)
        return {**endpoint, "topic": topic, "before": _flush_counts(before)}

    def finish(self, endpoint: Endpoint, case_endpoint: Endpoint, case: Case) -> dict[str, Any]:
        from shmq.client.admin.admin import Admin

        if endpoint["flush"] != "SYNC_FLUSH":
            return {}
        with Admin(endpoint["namesrv"]) as admin:
            after = _flush_counts(admin.broker_status(BROKER))
        msgs, flushes = (a - b for a, b in zip(after, case_endpoint["before"], strict=True))
        return {"msgs_per_fsync": msgs / flushes if flushes else None}


def _flush_counts(stats: dict[str, Any]) -> tuple[int, int]:
    return int(stats["msgs_in"]), int(stats["flushes"])


class _Sender(Sender):
    def __init__(self, namesrv: str, topic: str, api: str) -> None:
        from shmq.client.producer.producer import Producer
        from shmq.message import Message

        self.producer = Producer(f"bench-producer-{os.getpid()}", namesrv)
        self.topic, self.message, self.api = topic, Message, api
        self.futures: list[Any] = []
        if api == "send":
            self.send = self._send_sync
        elif api == "send_oneway":
            self.send = self._send_oneway

    def warm_up(self, body: bytes) -> None:
        """One message through the API under test: connects the ring and loads that API's
        numba kernels (a first call costs ~0.3 s) before the clock starts."""
        if self.api == "send_bulk":
            self.send_prepared(self.prepare([body]))
        elif self.api == "send_async":
            self.producer.send_async(self.message(self.topic, body)).result(60)
        elif self.api == "send_oneway":
            self._send_oneway(body)
        else:
            self.producer.send(self.message(self.topic, body))

    def _send_oneway(self, body: bytes) -> None:
        self.producer.send_oneway(self.message(self.topic, body))

    def _send_sync(self, body: bytes) -> None:
        self.producer.send(self.message(self.topic, body))

    def send(self, body: bytes) -> None:
        self.futures.append(self.producer.send_async(self.message(self.topic, body)))
        if len(self.futures) >= SETTLE_EVERY:
            self.flush()

    def prepare(self, bodies: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
        data = np.frombuffer(b"".join(bodies), dtype=np.uint8)
        offsets = np.zeros(len(bodies) + 1, dtype=np.int64)
        np.cumsum([len(b) for b in bodies], out=offsets[1:])
        return data, offsets

    def send_prepared(self, batch: tuple[np.ndarray, np.ndarray]) -> None:
        self.producer.send_bulk(self.topic, batch)

    def flush(self) -> None:
        for f in self.futures:
            f.result(60)
        self.futures.clear()

    def close(self) -> None:
        self.producer.close()


class _PullReceiver(Receiver):
    """The bulk consumer: ``pull_bulk`` of each queue, long-polling when caught up."""

    def __init__(self, namesrv: str, topic: str, bodies: bool) -> None:
        from shmq.client.transport.queue_reader import QueueReader

        self.bodies = bodies  # only latency runs look inside; the others count messages
        self.reader = QueueReader(f"bench-consumer-{os.getpid()}", namesrv)
        self.queues = self.reader.queues(topic)
        self.offsets = {mq: self.reader.max_offset(mq) for mq in self.queues}

    def recv(self, timeout: float) -> Sequence[bytes]:
        offsets, out = self.offsets, []
        if len(self.queues) == 1:  # long-poll the one queue
            return self._pull(self.queues[0], timeout)
        for mq in self.queues:
            out += self._pull(mq, 0.0)
        if not out:
            self.reader.wait(offsets, timeout)
        return out

    def _pull(self, mq: MessageQueue, timeout: float) -> Sequence[bytes]:
        """What arrived on ``mq``: a ``MessageBatch`` (it iterates as bodies) or a list."""
        result = self.reader.pull_bulk(mq, self.offsets[mq], MAX_BULK_PULL, timeout=timeout)
        self.offsets[mq] = result.next_begin_offset
        if result.batch is None:
            return []
        return list(result.batch) if self.bodies else result.batch

    def close(self) -> None:
        self.reader.close()


class _PushReceiver(Receiver):
    """A ``PushConsumer`` of the case's topic (a group of its own, from the first offset):
    its listener hands each message over with the time it got it."""

    def __init__(self, namesrv: str, topic: str, bodies: bool) -> None:
        from shmq.client.consumer.push import PushConsumer
        from shmq.client.types import ConsumeResult

        self.bodies = bodies
        self.arrived: collections.deque = collections.deque()
        self.stamps: collections.deque = collections.deque()
        self.event = threading.Event()
        self.waiting = False  # the harness's thread waits in recv: wake it
        self._last_stamps: list[int] | None = None
        ok = ConsumeResult.CONSUME_SUCCESS

        def listener(msgs: list, ctx: Any) -> Any:
            if bodies:
                now = time.monotonic_ns()
                for m in msgs:  # the stamp first: ``recv`` takes one per arrival it sees
                    self.stamps.append(now)
                    self.arrived.append(m.body)
            else:
                self.arrived.extend(msgs)
            if self.waiting:
                self.event.set()
            return ok

        self.consumer = PushConsumer(
            f"bench-consumer-{os.getpid()}", namesrv, listener=listener,
            consume_from_where="FIRST_OFFSET",
        )  # fmt: skip
        self.consumer.subscribe(topic)
        self.consumer.start()
        deadline = time.monotonic() + 30
        while not self.consumer.assignment() and time.monotonic() < deadline:
            time.sleep(0.01)

    def recv(self, timeout: float) -> Sequence[Any]:
        if not self.arrived:
            # A moment for the listener to hand over more than one message, so the
            # harness's thread takes them in one wake-up (as a peer's ``get_many`` does) and
            # not one Event round trip per listener call: ~1 µs of the consumer process's
            # CPU per message, which the pushed messages would otherwise pay for the bench.
            # Latency is not affected: the listener stamps each message as it gets it.
            time.sleep(HANDOVER_S)
        if not self.arrived:
            self.event.clear()
            self.waiting = True
            if not self.arrived:
                self.event.wait(timeout)
            self.waiting = False
        out, arrived = [], self.arrived
        for _ in range(len(arrived)):
            out.append(arrived.popleft())
        if self.bodies:
            stamps = self.stamps
            self._last_stamps = [stamps.popleft() for _ in range(len(out))]
        return out

    def arrival_times(self) -> Sequence[int] | None:
        return self._last_stamps

    def close(self) -> None:
        self.consumer.shutdown()


def open_sender(endpoint: Endpoint, case: Case, index: int) -> Sender:
    return _Sender(endpoint["namesrv"], endpoint["topic"], case.api.label)


def open_receiver(endpoint: Endpoint, case: Case) -> Receiver:
    if case.api.batched:
        return _PullReceiver(endpoint["namesrv"], endpoint["topic"], case.workload.latency)
    return _PushReceiver(endpoint["namesrv"], endpoint["topic"], case.workload.latency)
