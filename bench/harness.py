"""What every system's run shares: the processes, the payload, pacing, batching, counting,
timing and latency, so a peer module only adapts its library's send and receive calls.

A case runs one consumer process and ``producers`` producer processes (``spawn`` context,
as a user's separate programs would be). Order: the consumer connects and reports ready;
the producers connect, warm up and report ready; the parent sets ``go``; producers stay
connected until the consumer has received everything (``done``). Throughput is the
messages divided by the time from the first producer's start to the later of the
consumer's last receive and the last producer's ``flush`` (so a durable system's acks
count). Every body starts with ``STAMP``: the intended send time (``time.monotonic_ns``,
one clock for all processes of the host) and a sequence number; in a paced run the
consumer takes ``receive time − intended time`` for each message, so a sender that falls
behind shows it in the latency instead of hiding it (coordinated omission corrected).
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing as mp
import os
import queue
import resource
import struct
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.peers.base import Endpoint, Peer
from bench.workloads import Case

STAMP = struct.Struct("<qq")  # intended send time (monotonic ns), sequence (-1: warm-up)
READY_TIMEOUT_S = 120.0  # a process start (imports, numba cache) plus connecting
RECV_POLL_S = 0.2
SETTLE_S = 0.5  # between "all ready" and "go": the consumer takes the warm-up messages
SPIN_NS = 60_000  # paced sends sleep until this close to the intended time, then poll


def body(size: int, intended_ns: int = 0, seq: int = 0) -> bytes:
    """A ``size``-byte message body carrying its intended send time and sequence."""
    return STAMP.pack(intended_ns, seq).ljust(size, b"x")


@dataclass
class Outcome:
    """What one case measured (None where not measured)."""

    messages: int
    seconds: float
    producer_seconds: float  # first start to last flush: how long the sending side took
    p50_us: float | None = None
    p99_us: float | None = None
    p999_us: float | None = None
    consumer_cpu_us: float | None = None  # the consumer process's CPU per paced message
    library_cpu_us: float | None = None  # of it, the threads other than the harness's


class CaseFailed(Exception):
    """A case did not complete; the message says how far it got."""


# -- child processes --------------------------------------------------------------------


def producer_main(
    module: str, endpoint: Endpoint, case: Case, index: int, events: Any, go: Any, done: Any
) -> None:
    """One producer process: connect and warm up, wait for ``go``, send its share, report
    ``(start, end)`` in monotonic ns."""
    sender = importlib.import_module(module).open_sender(endpoint, case, index)
    try:
        size = case.workload.body_size
        sender.warm_up(body(size, 0, -1))
        batch_size = case.api.batch
        prepared = None
        if case.api.batched and not case.workload.latency:
            prepared = sender.prepare([body(size, 0, i) for i in range(batch_size)])
        events.put(("ready", f"producer {index}"))
        go.wait()
        start = time.monotonic_ns()
        if case.workload.latency:
            _paced(sender, case)
        elif prepared is None:
            send, one = sender.send, body(size)
            for _ in range(case.per_producer):
                send(one)
        else:
            full, rest = divmod(case.per_producer, batch_size)
            for _ in range(full):
                sender.send_prepared(prepared)
            if rest:
                sender.send_prepared(sender.prepare([body(size, 0, i) for i in range(rest)]))
        sender.flush()
        events.put(("producer", (start, time.monotonic_ns())))
        # stay connected until the consumer has everything: ZeroMQ drops what a PULL socket
        # has not read yet from a PUSH peer that disconnects, linger or not
        done.wait(READY_TIMEOUT_S + 600)
    finally:
        sender.close()


def wait_until(due_ns: int) -> None:
    """Sleep until ``SPIN_NS`` before ``due_ns`` (monotonic), then poll the clock with
    ``time.sleep(0)``, which releases the GIL: the library's own threads (a feeder, a
    completion thread, a connection's reader) must run while the sender waits, as in a
    real program."""
    gap = due_ns - time.monotonic_ns()
    if gap > SPIN_NS:
        time.sleep((gap - SPIN_NS) / 1e9)
    while time.monotonic_ns() < due_ns:
        time.sleep(0)


def _paced(sender: Any, case: Case) -> None:
    """Send at ``rate`` msgs/s from a fixed schedule: message ``i`` is due at
    ``t0 + i / rate``. One-message APIs send each when due; batched APIs send everything
    due at once (a sender that fell behind catches up in one call). The wait never spins
    holding the GIL: that starved the background threads of multiprocessing.Queue and of
    shmq's send_async (5 ms switch interval) and showed up as their latency."""
    n, size = case.per_producer, case.workload.body_size
    interval = 1e9 / (case.workload.rate / case.workload.producers)
    t0 = time.monotonic_ns() + 1_000_000
    i = 0
    while i < n:
        due = t0 + int(i * interval)
        wait_until(due)
        if not case.api.batched:
            sender.send(body(size, due, i))
            i += 1
            continue
        now = time.monotonic_ns()
        last = min(n, i + case.api.batch, int((now - t0) // interval) + 1)
        bodies = [body(size, t0 + int(j * interval), j) for j in range(i, max(last, i + 1))]
        sender.send_prepared(sender.prepare(bodies))
        i += len(bodies)


def cpu_seconds() -> float:
    """This process's CPU time, user and system, all threads (``getrusage``)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def consumer_main(module: str, endpoint: Endpoint, case: Case, expected: int, events: Any) -> None:
    """The consumer process: receive ``expected`` messages (warm-ups included), report how
    many arrived, when the last did, and of a paced run the latency percentiles and the
    process's CPU per message from the first paced message on: all of it (every thread
    of the library and this loop's bookkeeping), and that of the threads other than this
    one (a library's own threads: a push consumer's pull and consume threads)."""
    receiver = importlib.import_module(module).open_receiver(endpoint, case)
    try:
        latency = case.workload.latency
        lat = np.zeros(case.total if latency else 0, dtype=np.int64)
        k = received = 0
        last = 0
        cpu_from = None  # (process CPU, this thread's CPU, messages) at the first paced one
        events.put(("ready", "consumer"))
        idle_limit = time.monotonic() + READY_TIMEOUT_S  # until the first message
        while received < expected:
            bodies = receiver.recv(RECV_POLL_S)
            if not bodies:
                if time.monotonic() > idle_limit:
                    break
                continue
            last = time.monotonic_ns()
            received += len(bodies)
            idle_limit = time.monotonic() + 30.0
            if latency:
                arrived = receiver.arrival_times() or [last] * len(bodies)
                for b, at in zip(bodies, arrived, strict=True):
                    intended, seq = STAMP.unpack_from(b)
                    if seq >= 0 and k < lat.shape[0]:
                        lat[k] = at - intended
                        k += 1
                if cpu_from is None and k:
                    cpu_from = (cpu_seconds(), time.thread_time(), k)
        summary = None
        dump = os.environ.get("SHMQ_BENCH_DUMP_LATENCY")  # a directory: raw ns, in seq order
        if dump and k:
            np.save(os.path.join(dump, f"{case.name}.npy"), lat[:k])
        if k:
            us = lat[:k] / 1000.0
            summary = tuple(float(np.percentile(us, q)) for q in (50, 99, 99.9))
            if cpu_from is not None and k > cpu_from[2]:
                n = k - cpu_from[2]
                process = cpu_seconds() - cpu_from[0]
                library = process - (time.thread_time() - cpu_from[1])
                summary = (*summary, process * 1e6 / n, library * 1e6 / n)
        events.put(("consumer", (received, last, summary)))
    finally:
        receiver.close()


# -- parent -----------------------------------------------------------------------------


def run_case(peer: Peer, endpoint: Endpoint, case: Case, timeout_s: float) -> Outcome:
    """Run ``case`` in fresh processes; every one of them is stopped before this returns,
    whatever happens (failure, timeout, Ctrl-C)."""
    ctx = mp.get_context("spawn")
    events = ctx.Queue()
    go, done = ctx.Event(), ctx.Event()
    producers = case.workload.producers
    expected = case.total + producers * peer.warmup_messages
    procs: list[Any] = []
    finished = False
    try:
        consumer = ctx.Process(
            target=consumer_main,
            args=(peer.module, endpoint, case, expected, events),
            name=f"bench-consumer-{case.name}",
        )
        consumer.start()
        procs.append(consumer)
        results: dict[str, Any] = {}
        _collect(events, procs, results, 1, READY_TIMEOUT_S, case)
        for i in range(producers):
            p = ctx.Process(
                target=producer_main,
                args=(peer.module, endpoint, case, i, events, go, done),
                name=f"bench-producer-{case.name}-{i}",
            )
            p.start()
            procs.append(p)
        _collect(events, procs, results, 1 + producers, READY_TIMEOUT_S, case)
        time.sleep(SETTLE_S)
        go.set()
        _collect(events, procs, results, 2 + 2 * producers, timeout_s, case)
        done.set()
        received, last, summary = results["consumer"][0]
        if received < expected:
            raise CaseFailed(f"the consumer received {received:,} of {expected:,} messages")
        starts, ends = zip(*results["producer"], strict=True)
        seconds = (max(last, *ends) - min(starts)) / 1e9
        out = Outcome(case.total, seconds, (max(ends) - min(starts)) / 1e9)
        if summary is not None:
            out.p50_us, out.p99_us, out.p999_us = summary[:3]
            if len(summary) > 3:
                out.consumer_cpu_us, out.library_cpu_us = summary[3:]
        finished = True
        return out
    finally:
        done.set()
        _stop(procs, grace_s=5.0 if finished else 0.0)
        events.close()
        events.cancel_join_thread()


def _collect(
    events: Any, procs: list[Any], results: dict[str, Any], want: int, timeout_s: float, case: Case
) -> None:
    """Read events until ``want`` have arrived in all (ready signals and results), failing
    fast when a process dies or the time runs out."""
    deadline = time.monotonic() + timeout_s
    while sum(len(v) for v in results.values()) < want:
        try:
            kind, value = events.get(timeout=0.2)
        except queue.Empty:
            dead = [p for p in procs if p.exitcode not in (None, 0)]
            if dead:
                raise CaseFailed(f"{dead[0].name} exited with code {dead[0].exitcode}") from None
            if time.monotonic() > deadline:
                raise CaseFailed(f"{case.name}: no result within {timeout_s:.0f} s") from None
            continue
        results.setdefault(kind, []).append(value)


def _stop(procs: list[Any], grace_s: float) -> None:
    """Give finishing processes ``grace_s`` to exit (after a completed case: they are
    closing their connections), terminate the rest, kill what ignores SIGTERM."""
    deadline = time.monotonic() + grace_s
    for p in procs:
        p.join(timeout=max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=5)
        if p.is_alive():
            p.kill()
            p.join(timeout=5)
    for p in procs:
        with contextlib.suppress(ValueError):
            p.close()
