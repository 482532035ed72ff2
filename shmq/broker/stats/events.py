"""What the broker's processors count as they answer, for the metrics endpoint.

RocketMQ 5 records these from its processors: the remoting server's request latency
(``rocketmq_rpc_latency``), transactions ended (``rocketmq_commit_messages_total``,
``rocketmq_rollback_messages_total``) and messages sent to a dead-letter queue
(``rocketmq_send_to_dlq_messages_total``). They happen in the supervisor's threads, so they
are kept here, in its memory, and copied (``snapshot``) when the metrics process asks
(``metrics.supervisor_numbers``). Recording one costs a clock read and a short lock held
for an increment, never a wait for a scrape.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from shmq.remoting.codes import RequestCode, ResponseCode

# RocketMQ 5's rocketmq_rpc_latency buckets (milliseconds)
RPC_BUCKETS_MS = (1, 3, 5, 7, 10, 100, 1000, 2000, 3000)

# (request code, response code, is long polling, result) of an answered request
RpcKey = tuple[str, str, str, str]


def code_label(enum: type[RequestCode] | type[ResponseCode], code: int) -> str:
    """A code as RocketMQ's ``RemotingHelper`` labels it: its constant's name, lower case
    (the number for a code it does not know)."""
    try:
        return enum(code).name.lower()
    except ValueError:
        return str(code)


@dataclass
class EventCounts:
    """A copy of the counts (see the module docstring). ``rpc``: per key, the count in each
    bucket (the last one above 3 s) and the sum of the latencies in milliseconds."""

    rpc: dict[RpcKey, tuple[list[int], float]] = field(default_factory=dict)
    commits: dict[str, int] = field(default_factory=dict)  # by real topic
    rollbacks: dict[str, int] = field(default_factory=dict)
    dlq: dict[tuple[str, str], int] = field(default_factory=dict)  # (group, topic)


class BrokerEvents:
    """The counts, kept while the broker runs (they restart at 0 with it, as counters)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rpc: dict[tuple[int, int, bool, str], tuple[list[int], list[float]]] = {}
        self._commits: Counter[str] = Counter()
        self._rollbacks: Counter[str] = Counter()
        self._dlq: Counter[tuple[str, str]] = Counter()

    def answered(
        self, request: int, response: int, started: float, long_polling: bool, result: str
    ) -> None:
        """The remoting server's hook (``Observer``): ``request`` (a code) was answered
        with ``response`` (-1: none, a oneway request), ``started`` being the
        ``perf_counter`` when its handling began."""
        ms = (time.perf_counter() - started) * 1000
        key = (request, response, long_polling, result)
        bucket = bisect.bisect_left(RPC_BUCKETS_MS, ms)
        with self._lock:
            row = self._rpc.get(key)
            if row is None:
                row = self._rpc[key] = ([0] * (len(RPC_BUCKETS_MS) + 1), [0.0])
            row[0][bucket] += 1
            row[1][0] += ms

    def ended(self, topic: str, committed: bool) -> None:
        """A transaction of ``topic`` was committed or rolled back."""
        with self._lock:
            (self._commits if committed else self._rollbacks)[topic] += 1

    def dead_lettered(self, group: str, topic: str, count: int = 1) -> None:
        """``count`` messages of ``group`` from ``topic`` went to its dead-letter queue."""
        with self._lock:
            self._dlq[(group, topic)] += count

    def snapshot(self) -> EventCounts:
        with self._lock:
            rpc = {
                (
                    code_label(RequestCode, request),
                    "" if response < 0 else code_label(ResponseCode, response),
                    "true" if long_polling else "false",
                    result,
                ): (list(buckets), total[0])
                for (request, response, long_polling, result), (buckets, total) in (
                    self._rpc.items()
                )
            }
            return EventCounts(rpc, dict(self._commits), dict(self._rollbacks), dict(self._dlq))
