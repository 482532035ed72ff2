"""The remoting server's request latency as RocketMQ 5's ``rocketmq_rpc_latency``
histogram: the broker's and the namesrv's servers count it (``RemotingServer.observe``) and
their metrics endpoints export it.

A request is timed from its handling to its answer: a send answered once stored, a held
pull once answered (``is_long_polling``). Recording costs a clock read, a bisect and a
short lock held for two increments, never a wait for a scrape; ``snapshot`` copies it.
"""

from __future__ import annotations

import bisect
import itertools
import threading
import time

from prometheus_client.core import HistogramMetricFamily

from shmq.remoting.codes import RequestCode, ResponseCode

# RocketMQ 5's rocketmq_rpc_latency buckets (milliseconds)
BUCKETS_MS = (1, 3, 5, 7, 10, 100, 1000, 2000, 3000)
LABELS = ("protocol_type", "request_code", "response_code", "is_long_polling", "result")
# (request code, response code, is long polling, result) labels of answered requests →
# (the count in each bucket, the last one above 3 s; the sum of their milliseconds)
Snapshot = dict[tuple[str, str, str, str], tuple[list[int], float]]


def code_label(enum: type[RequestCode] | type[ResponseCode], code: int) -> str:
    """A code as RocketMQ's ``RemotingHelper`` labels it: its constant's name, lower case
    (the number for a code it does not know)."""
    try:
        return enum(code).name.lower()
    except ValueError:
        return str(code)


class RpcLatency:
    """The histogram's counts since the server started (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[tuple[int, int, bool, str], tuple[list[int], list[float]]] = {}

    def answered(
        self, request: int, response: int, started: float, long_polling: bool, result: str
    ) -> None:
        """The server's hook (``Observer``): ``request`` (a code) was answered with
        ``response`` (-1: none, a oneway request), ``started`` being the ``perf_counter``
        when its handling began."""
        ms = (time.perf_counter() - started) * 1000
        key = (request, response, long_polling, result)
        bucket = bisect.bisect_left(BUCKETS_MS, ms)
        with self._lock:
            row = self._rows.get(key)
            if row is None:
                row = self._rows[key] = ([0] * (len(BUCKETS_MS) + 1), [0.0])
            row[0][bucket] += 1
            row[1][0] += ms

    def drain(self) -> list[tuple[int, int, bool, str, list[int], float]]:
        """The counts since the last ``drain``, as rows (request, response, long polling,
        result, counts per bucket, milliseconds), and start again from 0: what another
        process's server counted, shipped to the one that exports it (``add``)."""
        with self._lock:
            rows, self._rows = self._rows, {}
        return [(*key, counts, total[0]) for key, (counts, total) in rows.items()]

    def add(self, rows: list[tuple[int, int, bool, str, list[int], float]]) -> None:
        """Add ``drain``'s rows to these counts."""
        with self._lock:
            for request, response, long_polling, result, counts, total in rows:
                key = (int(request), int(response), bool(long_polling), str(result))
                row = self._rows.get(key)
                if row is None:
                    row = self._rows[key] = ([0] * (len(BUCKETS_MS) + 1), [0.0])
                for i, n in enumerate(counts):
                    row[0][i] += int(n)
                row[1][0] += float(total)

    def snapshot(self) -> Snapshot:
        with self._lock:
            rows = [(key, list(counts), total[0]) for key, (counts, total) in self._rows.items()]
        return {
            (
                code_label(RequestCode, request),
                "" if response < 0 else code_label(ResponseCode, response),
                "true" if long_polling else "false",
                result,
            ): (counts, total)
            for (request, response, long_polling, result), counts, total in rows
        }


def histogram(snapshot: Snapshot, constant: dict[str, str]) -> HistogramMetricFamily:
    """``rocketmq_rpc_latency`` of ``snapshot``, each sample with the ``constant`` labels."""
    family = HistogramMetricFamily(
        "rocketmq_rpc_latency",
        "Milliseconds from a request's handling to its answer (a held pull's hold included).",
        labels=[*constant, *LABELS],
    )
    for (request, response, polling, result), (counts, total) in sorted(snapshot.items()):
        cumulative = list(itertools.accumulate(counts))
        buckets = [(str(float(b)), n) for b, n in zip(BUCKETS_MS, cumulative, strict=False)]
        buckets.append(("+Inf", cumulative[-1]))
        values = [*constant.values(), "remoting", request, response, polling, result]
        family.add_metric(values, buckets, total)
    return family
