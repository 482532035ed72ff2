"""What the broker's processors count as they answer, for the metrics endpoint.

RocketMQ 5 records these from its processors: the remoting server's request latency
(``rocketmq_rpc_latency``), transactions ended (``rocketmq_commit_messages_total``,
``rocketmq_rollback_messages_total``) and messages sent to a dead-letter queue
(``rocketmq_send_to_dlq_messages_total``), and where a TCP pull left each group's queues
(the pulled offset behind ``rocketmq_consumer_ready_messages`` and ``_inflight_messages``:
RocketMQ's broker keeps it as it answers a pull), the POP messages popped, not acked
(``pop_inflight``, set by the POP processor while a master serves POP) and the open
transactions per real topic (``half_messages``, set by the transaction service; read from
its table without its lock). They happen in the
supervisor's threads, so they are kept here, in its memory, and copied (``snapshot``) when
the metrics process asks (``metrics.supervisor_numbers``). Recording one costs a short lock
held for an increment (the latency: ``remoting.rpc_latency``), never a wait for a scrape.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from shmq.remoting.rpc_latency import RpcLatency, Snapshot


@dataclass
class EventCounts:
    """A copy of the counts (see the module docstring)."""

    rpc: Snapshot = field(default_factory=dict)
    commits: dict[str, int] = field(default_factory=dict)  # by real topic
    rollbacks: dict[str, int] = field(default_factory=dict)
    dlq: dict[tuple[str, str], int] = field(default_factory=dict)  # (group, topic)
    # (group, topic) -> queue id -> the offset the group's next TCP pull of it starts at
    pulled: dict[tuple[str, str], dict[int, int]] = field(default_factory=dict)
    popped: dict[tuple[str, str], int] = field(default_factory=dict)  # not acked yet
    halves: dict[str, int] = field(default_factory=dict)  # open transactions by real topic


class BrokerEvents:
    """The counts, kept while the broker runs (they restart at 0 with it, as counters);
    ``rpc`` is the control server's ``observe`` hook."""

    def __init__(self) -> None:
        self.rpc = RpcLatency()
        self._lock = threading.Lock()
        self._commits: Counter[str] = Counter()
        self._rollbacks: Counter[str] = Counter()
        self._dlq: Counter[tuple[str, str]] = Counter()
        self._pulled: dict[tuple[str, str], dict[int, int]] = {}
        self.pop_inflight: Callable[[], dict[tuple[str, str], int]] | None = None
        # the data server's requests waiting for a worker, by code, as it last reported
        # (``data_server.reports``): its part of the processor watermarks
        self.data_server_queued: dict[int, int] = {}
        self.half_messages: Callable[[], dict[str, int]] | None = None

    def ended(self, topic: str, committed: bool) -> None:
        """A transaction of ``topic`` was committed or rolled back."""
        with self._lock:
            (self._commits if committed else self._rollbacks)[topic] += 1

    def dead_lettered(self, group: str, topic: str, count: int = 1) -> None:
        """``count`` messages of ``group`` from ``topic`` went to its dead-letter queue."""
        with self._lock:
            self._dlq[(group, topic)] += count

    def pulled(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """A TCP pull of ``group`` left ``topic``'s queue at ``offset`` (its next pull's)."""
        with self._lock:
            self._pulled.setdefault((group, topic), {})[queue_id] = offset

    def snapshot(self) -> EventCounts:
        with self._lock:
            counts = dict(self._commits), dict(self._rollbacks), dict(self._dlq)
            pulled = {key: dict(queues) for key, queues in self._pulled.items()}
        popped = self.pop_inflight() if self.pop_inflight is not None else {}
        halves = self.half_messages() if self.half_messages is not None else {}
        return EventCounts(self.rpc.snapshot(), *counts, pulled, popped, halves)
