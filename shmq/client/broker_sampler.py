"""Snapshots of one running broker, for live views (``shmq top``, the dashboard).

A snapshot is what ``shmq status`` and ``shmq admin`` ask a broker (GET_BROKER_RUNTIME_INFO,
GET_BROKER_CONSUME_STATS, GET_BROKER_HA_STATUS, GET_ALL_TOPIC_CONFIG and
GET_TOPIC_STATS_INFO per topic), so it is the same for a broker on this host or another
one; a view turns successive snapshots into rates (a topic's in rate: the growth of its
queues' max offsets; a group's out rate: the growth of its committed offsets, over the last
``RATE_WINDOW_S``, since consumers commit every few seconds). Agent CPU comes from ``/proc``,
only for a broker whose processes run on this host.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from shmq.errors import ShmqError
from shmq.ipc.procs import cpu_seconds, descends

RATE_WINDOW_S = 5.0  # rates span at most this much of the snapshots kept


@dataclass
class Snapshot:
    """What one round of requests to the broker saw, at ``at`` (monotonic seconds)."""

    at: float
    runtime: dict[str, Any]  # runtime_stats' numbers (shmq status)
    disk_ratio: float | None  # commitLogDiskRatio: the store disk's used share
    topics: dict[str, tuple[int, int]]  # topic -> (queues, sum of the queues' max offsets)
    groups: dict[tuple[str, str], tuple[int, int]]  # (group, topic) -> (lag, committed)
    ha: dict[str, Any]  # GET_BROKER_HA_STATUS's answer
    cpu: dict[str, float] = field(default_factory=dict)  # process -> CPU seconds (local only)


class BrokerSampler:
    """Takes snapshots of the broker at ``addr`` over one connection (``options``: the
    ``RemotingClient``'s ``credentials=`` and ``tls=``)."""

    def __init__(
        self, addr: str, timeout: float = 5.0, options: dict[str, Any] | None = None
    ) -> None:
        from shmq.remoting.client import RemotingClient

        self.addr = addr
        self._client = RemotingClient(default_timeout=timeout, **(options or {}))

    def close(self) -> None:
        self._client.close()

    def _ask(self, code: int, fields: dict[str, Any] | None = None) -> Any:
        return self._client.invoke_json(self.addr, code, fields)[1]

    def sample(self) -> Snapshot:
        from shmq.names import is_system_topic
        from shmq.remoting.admin_bodies import queue_entries, runtime_stats
        from shmq.remoting.protocol import RequestCode

        raw = self._ask(RequestCode.GET_BROKER_RUNTIME_INFO)
        try:
            runtime = runtime_stats(raw)
        except ValueError as exc:
            raise ShmqError(f"broker {self.addr}: {exc}") from None
        ratio = raw["table"].get("commitLogDiskRatio")
        at = time.monotonic()
        configs = self._ask(RequestCode.GET_ALL_TOPIC_CONFIG).get("topicConfigTable", {})
        hidden = set(self._ask(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)["topicList"])
        topics = {}
        for topic in sorted(t for t in configs if t not in hidden and not is_system_topic(t)):
            table = self._ask(RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic})["offsetTable"]
            entries = queue_entries(table)
            topics[topic] = (len(entries), sum(int(e["maxOffset"]) for e in entries))
        stats = self._ask(RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": False})
        groups: dict[tuple[str, str], tuple[int, int]] = {}
        for entry in stats["consumeStatsList"]:
            for group, per_topic in entry.items():
                for topic_stats in per_topic:
                    for e in queue_entries(topic_stats["offsetTable"]):
                        if is_system_topic(e["topic"]):
                            continue
                        lag, done = groups.get((group, e["topic"]), (0, 0))
                        broker, committed = int(e["brokerOffset"]), int(e["consumerOffset"])
                        groups[(group, e["topic"])] = (lag + broker - committed, done + committed)
        ha = self._ask(RequestCode.GET_BROKER_HA_STATUS)
        return Snapshot(at, runtime, None if ratio is None else float(ratio), topics, groups,
                        ha, local_cpu(runtime))  # fmt: skip


def local_cpu(runtime: dict[str, Any]) -> dict[str, float]:
    """CPU seconds of the broker's supervisor and agents, by role, when they run on this
    host: an agent that does not descend from the supervisor's pid is another host's pid
    that happens to exist here, and then nothing is shown."""
    supervisor = int(runtime["pid"])
    seconds = cpu_seconds(supervisor)
    if seconds is None:
        return {}
    out = {"supervisor": seconds}
    for kind, agent in runtime.get("agents", {}).items():
        pid = int(agent.get("pid") or 0)
        found = cpu_seconds(pid)
        if found is None:
            continue
        if not descends(pid, supervisor):
            return {}
        out[kind] = found
    return out
