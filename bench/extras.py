"""Measurements beside the workloads, for goals that compare with a floor or need no peer:

- the bare POSIX semaphore round trip between two processes (post, the other side wakes
  and posts back), paced like W3: what a sync send's request and answer cost at least here,
  and shmq's sync ``send`` timed the same way (the call, from the record into the ring to
  the broker's answer); and the CPU a parked process pays per paced wake-up alone, the
  floor of W3's consumer CPU;
- a ``PushConsumer`` with a no-op listener consuming a backlog (single-message records);
- the rate at which the CommitLog's writer can fill new pages of a mapped file, prefaulted
  as it does (W1 bulk's floor: every stored record lands on pages the CommitLog never had
  before).

Each returns result rows of the bench's schema (``bench.run.row``'s keys)."""

from __future__ import annotations

import multiprocessing as mp
import os
import resource
import tempfile
import threading
import time
from typing import Any

import numpy as np

SEM_SYSTEM = "posix semaphore (floor)"
SEM_API = "round trip; CPU: a wake-up alone"
SYNC_API = "send: call until answered"
BACKLOG_API = "PushConsumer, no-op listener, backlog"
PAGES_SYSTEM = "page cache (floor)"
PAGES_API = "writes to new, prefaulted file pages"
BULK_TOPIC = "Bench_W1_shmq_send_bulk"  # the W1 send_bulk case's topic (ShmqPeer.prepare)
WAKES = 2_000  # the wake-up floor's posts: its poster spins on a CPU between them


def _row(workload: str, system: str, api: str, durable: bool, **values: Any) -> dict[str, Any]:
    out = dict.fromkeys(("messages", "msgs_per_s", "mb_per_s", "p50_us", "p99_us", "p999_us",
                         "consumer_cpu_us", "library_cpu_us", "skipped",
                         "msgs_per_fsync"))  # fmt: skip
    out.update(workload=workload, system=system, api=api, durable=durable, **values)
    return out


def _echo(ping: str, pong: str, count: int, wakes: int, wake_cpu: Any) -> None:
    """``count`` round trips, then ``wakes`` wake-ups alone (posted, woken, nothing posted
    back): what a consumer parked between paced messages pays for each at least, put in
    ``wake_cpu`` (seconds of this process's CPU per wake-up)."""
    import posix_ipc

    a, b = posix_ipc.Semaphore(ping), posix_ipc.Semaphore(pong)
    try:
        for _ in range(count):
            a.acquire(10)
            b.release()
        start = _cpu_seconds()
        for _ in range(wakes):
            a.acquire(10)
        wake_cpu.value = (_cpu_seconds() - start) / wakes
        b.release()
    finally:
        a.close()
        b.close()


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def semaphore_round_trip(count: int, rate: float) -> dict[str, Any]:
    """``count`` round trips, one every ``1 / rate`` s (the waiter parked, as in W3), then
    up to ``WAKES`` paced posts that only wake it: the row's CPU per message is the woken
    process's per wake-up, the floor of W3's consumer CPU goal (a parked consumer is woken
    once per paced message). On this VM a wake-up on a CPU that sat idle costs ~10 µs of
    the woken process's CPU, one on the poster's own CPU after it sleeps ~4 µs; W3's
    consumer is woken by the writer in the middle of its pass, so the poster here spins."""
    import posix_ipc

    token = f"/shmq-bench-{os.getpid()}-{time.monotonic_ns() % 100000}"
    ping = posix_ipc.Semaphore(token + "-ping", posix_ipc.O_CREX, 0o600, 0)
    pong = posix_ipc.Semaphore(token + "-pong", posix_ipc.O_CREX, 0o600, 0)
    ctx = mp.get_context("spawn")
    wake_cpu = ctx.Value("d", 0.0)
    wakes = min(count, WAKES)
    proc = ctx.Process(target=_echo, args=(ping.name, pong.name, count, wakes, wake_cpu))
    try:
        proc.start()
        times = np.zeros(count, dtype=np.int64)
        gap = 1.0 / rate
        time.sleep(0.3)  # the child is parked on its semaphore
        for i in range(count):
            start = time.monotonic_ns()
            ping.release()
            pong.acquire(10)
            times[i] = time.monotonic_ns() - start
            time.sleep(max(0.0, gap - (time.monotonic_ns() - start) / 1e9))
        due = time.perf_counter()
        for _ in range(wakes):  # the poster stays on its CPU, as the writer finishing a
            due += gap  # pass does: the child wakes on the other one, from idle
            ping.release()
            while time.perf_counter() < due:
                pass
        pong.acquire(10)  # the child's CPU is in wake_cpu
        proc.join(10)
    finally:
        if proc.is_alive():
            proc.kill()
            proc.join(5)
        for sem in (ping, pong):
            sem.unlink()
            sem.close()
    us = times / 1000.0
    return _row("W3", SEM_SYSTEM, SEM_API, False, messages=count, msgs_per_s=None,
                p50_us=float(np.percentile(us, 50)), p99_us=float(np.percentile(us, 99)),
                p999_us=float(np.percentile(us, 99.9)),
                consumer_cpu_us=wake_cpu.value * 1e6 or None)  # fmt: skip


def _paced_sync_sends(namesrv: str, count: int, rate: float, out: Any) -> None:
    from shmq.client.producer.producer import Producer
    from shmq.message import Message

    with Producer("bench-sync-rt", namesrv) as producer:
        producer.send(Message("SyncRoundTrip", b"warm"))
        times = np.zeros(count, dtype=np.int64)
        body = b"x" * 100
        gap = 1.0 / rate
        for i in range(count):
            start = time.monotonic_ns()
            producer.send(Message("SyncRoundTrip", body))
            times[i] = time.monotonic_ns() - start
            time.sleep(max(0.0, gap - (time.monotonic_ns() - start) / 1e9))
        out.put(times)


def sync_send_round_trip(count: int, rate: float) -> dict[str, Any]:
    """``count`` sync sends from a producer process, one every ``1 / rate`` s, each timed
    from the call to its answer (ASYNC_FLUSH: stored in the CommitLog)."""
    from bench.embedded import embedded_broker

    ctx = mp.get_context("spawn")
    with embedded_broker("SyncRoundTrip", 1) as namesrv:
        out = ctx.Queue()
        proc = ctx.Process(target=_paced_sync_sends, args=(namesrv, count, rate, out))
        proc.start()
        try:
            times = out.get(timeout=120)
            proc.join(30)
        finally:
            if proc.is_alive():
                proc.kill()
                proc.join(5)
    us = times / 1000.0
    return _row("W3", "shmq", SYNC_API, True, messages=count, msgs_per_s=None,
                p50_us=float(np.percentile(us, 50)), p99_us=float(np.percentile(us, 99)),
                p999_us=float(np.percentile(us, 99.9)))  # fmt: skip


def push_consumer_backlog(messages: int) -> dict[str, Any]:
    """A backlog of ``messages`` 100-byte single-message records, then the time a
    ``PushConsumer`` with a listener that does nothing takes from its first message to the
    last."""
    from bench.embedded import embedded_broker
    from shmq.client.consumer.push import PushConsumer
    from shmq.client.producer.producer import Producer
    from shmq.client.types import ConsumeResult
    from shmq.message import Message

    with embedded_broker("Backlog", 1) as namesrv:
        with Producer("bench-backlog-p", namesrv) as producer:
            body = b"x" * 100
            for start in range(0, messages, 4096):
                futures = [producer.send_async(Message("Backlog", body))
                           for _ in range(min(4096, messages - start))]  # fmt: skip
                for f in futures:
                    f.result(60)
        done = threading.Event()
        seen = {"n": 0, "first": 0, "last": 0}
        lock = threading.Lock()  # the listener runs in several consume threads
        ok = ConsumeResult.CONSUME_SUCCESS

        def listener(msgs: list, ctx: Any) -> ConsumeResult:
            with lock:
                if not seen["first"]:
                    seen["first"] = time.monotonic_ns()
                seen["n"] += len(msgs)
                if seen["n"] >= messages:
                    seen["last"] = time.monotonic_ns()
                    done.set()
            return ok

        consumer = PushConsumer("bench-backlog-c", namesrv, listener=listener,
                                consume_from_where="FIRST_OFFSET")  # fmt: skip
        consumer.subscribe("Backlog")
        consumer.start()
        try:
            if not done.wait(120):
                return _row("C1", "shmq", BACKLOG_API, True, skipped=f"consumed {seen['n']} "
                            f"of {messages} in 120 s")  # fmt: skip
        finally:
            consumer.shutdown()
    rate = messages / ((seen["last"] - seen["first"]) / 1e9)
    return _row("C1", "shmq", BACKLOG_API, True, messages=messages, msgs_per_s=rate,
                mb_per_s=rate * 100 / 1e6)  # fmt: skip


def new_page_writes(megabytes: int) -> dict[str, Any]:
    """Sequential 1 MiB writes into a new CommitLog file, as the writer fills one: its
    pages prefaulted ahead the writer's way (``MappedFileQueue.prefault_ahead``, zeros
    ``pwrite`` into the page cache) and then written through the mapping. MB/s, and as
    messages and msgs/s the 100-byte ``send_bulk`` records those bytes hold and the most
    one writer could store at that rate. On this virtual machine a page the kernel freed a
    moment ago comes back in ~0.5 µs, a page the guest never used costs ~5 µs however it
    is brought in (``pwrite``, ``MADV_POPULATE_WRITE`` or the mapping's fault), so only a
    run longer than the recycled memory (a whole 1 GiB CommitLog file) shows the floor the
    bulk path meets: 0.6 GB/s, about 3 M records/s, for a writer doing nothing else."""
    from shmq.store.mapped_file_queue import MappedFileQueue

    size = megabytes << 20
    step = 1 << 20
    chunk = np.full(step, 0x5A, dtype=np.uint8)
    with tempfile.TemporaryDirectory(prefix="shmq-bench-pages-") as tmp:
        queue = MappedFileQueue(tmp, size)
        try:
            mf = queue.new_file(0)
            start = time.perf_counter()
            for at in range(0, size, step):
                mf.buf[at : at + step] = chunk
                mf.wrote_position = at + step
                queue.prefault_ahead()
            seconds = time.perf_counter() - start
        finally:
            queue.close()
    from shmq.codec.record import record_size

    rate = size / seconds
    record = record_size(100, len(BULK_TOPIC), 0)
    return _row("W1", PAGES_SYSTEM, PAGES_API, False, messages=size // record,
                msgs_per_s=rate / record, mb_per_s=rate / 1e6)  # fmt: skip
