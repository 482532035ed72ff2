"""The broker's metrics as a ``prometheus_client`` collector, read at scrape time.

Names and labels are RocketMQ 5's broker metrics (``BrokerMetricsConstant``,
``DefaultStoreMetricsConstant``) where shmq has the number, and ``shmq_`` ones for what is
shmq's own (agents, rings, the CommitLog's positions, HA rows). Every sample carries the
constant labels ``cluster``, ``node_type=broker``, ``node_id`` and ``metricsLabel``'s pairs.

Sources, none of them a lock on the data path: the counters segment, the topic table (its
seqlock), the queue table's maxima, the HA table, the consume queues' units
(``topic_traffic``), ``/proc`` for the agents' CPU time, and the supervisor's own numbers
(``supervisor_numbers``, asked for over the pipe; the last answer is used when the
supervisor is slow to give one), and the schedule agent's progress files (``delayOffset.json``,
``timercheck``: the progress as of the agent's last persist, a fraction of a second old;
the timing wheel's live state is in the counters, published by the agent as it works).
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import Connection

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from shmq import __version__
from shmq.broker.config.broker_config import BrokerConfig
from shmq.broker.metrics.supervisor_numbers import ASK, SupervisorNumbers
from shmq.broker.metrics.topic_traffic import SIZE_BUCKETS, TopicTraffic
from shmq.broker.schedule.delay_levels import FILE_NAME as DELAY_OFFSETS_FILE
from shmq.broker.schedule.delay_levels import DelayLevels
from shmq.broker.stats.events import EventCounts
from shmq.broker.subscription.groups import SYSTEM_GROUPS
from shmq.ipc import counters as cn
from shmq.ipc import ha_table as ht
from shmq.ipc import queue_table as qt
from shmq.ipc import topic_table as tt
from shmq.ipc.procs import cpu_seconds
from shmq.ipc.segment import Segment
from shmq.names import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    TIMER_TOPIC,
    is_system_topic,
)
from shmq.remoting import rpc_latency
from shmq.store.timer import wheel

# housekeeping answers at once when woken; past this the last answer serves (an answer left
# unread would hold up housekeeping's next one, so the wait is generous)
ANSWER_WAIT_S = 2.0
STORAGE = {"storage_type": "local", "storage_medium": "disk"}
# each agent's parks counter: the three hot agents have their own line's word
PARK_WORDS = {
    "writer": cn.WRITER_PARKS,
    "reput": cn.REPUT_PARKS,
    "flush": cn.FLUSH_PARKS,
    "ha": cn.agent_word("ha", cn.AGENT_PARKS),
}


def flag(value: bool) -> str:
    """A boolean label value as RocketMQ writes it."""
    return "true" if value else "false"


def group_flags(group: str, topic: str) -> tuple[str, str]:
    """A consumer group's ``is_retry`` and ``is_system`` labels for ``topic``."""
    return (
        flag(topic.startswith(RETRY_GROUP_TOPIC_PREFIX)),
        flag(group in SYSTEM_GROUPS or is_system_topic(topic)),
    )


def is_retry_or_dlq(topic: str) -> bool:
    return topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX))


class Families:
    """The metric families of one scrape, each sample given the constant labels."""

    def __init__(self, constant: dict[str, str]) -> None:
        self.constant = constant
        self.names = list(constant)
        self.values = list(constant.values())
        self.made: list[Metric] = []

    def counter(self, name: str, doc: str, labels: Sequence[str] = ()) -> CounterMetricFamily:
        return self._add(CounterMetricFamily(name, doc, labels=self.names + list(labels)))

    def gauge(self, name: str, doc: str, labels: Sequence[str] = ()) -> GaugeMetricFamily:
        return self._add(GaugeMetricFamily(name, doc, labels=self.names + list(labels)))

    def histogram(self, name: str, doc: str, labels: Sequence[str] = ()) -> HistogramMetricFamily:
        return self._add(HistogramMetricFamily(name, doc, labels=self.names + list(labels)))

    def add(self, family: Metric, value: float, *labels: str) -> None:
        family.add_metric(self.values + list(labels), value)

    def _add(self, family: Metric) -> Metric:
        self.made.append(family)
        return family


class BrokerCollector(Collector):
    """Collects one broker's metrics from its shared memory (``segments``: counters, topics,
    queues, HA table) and the supervisor's answers on ``channel`` (``wake_supervisor``
    posts its housekeeping after a question, so the answer comes in milliseconds, not at
    its next 100 ms round)."""

    def __init__(
        self,
        config: BrokerConfig,
        segments: dict[str, Segment],
        traffic: TopicTraffic,
        channel: Connection,
        wake_supervisor: Callable[[], None],
    ) -> None:
        self.config = config
        self.words = segments["counters"].words
        self.topic_seg = segments["topics"]
        self.queue_seg = segments["queues"]
        self.ha_words = segments["ha"].words
        self.traffic = traffic
        self.channel = channel
        self.wake_supervisor = wake_supervisor  # its housekeeping answers at once
        self.constant = {
            "cluster": config.broker_cluster_name,
            "node_type": "broker",
            "node_id": config.broker_name,
            **config.metrics_labels,
        }
        self._lock = threading.Lock()  # scrapes may come on several server threads
        self._asked = False
        self._numbers = SupervisorNumbers(permission=config.broker_permission)
        self._directory = qt.QueueDirectory(self.queue_seg.buf, self.queue_seg.words)
        self._maxima = qt.max_offsets(self.queue_seg.buf)
        root = config.store.store_path_root_dir
        self._delay_levels = DelayLevels(
            os.path.join(root, "config", DELAY_OFFSETS_FILE),
            config.store.delay_levels_ms,
            traffic.reader,
            self._directory,
            self._maxima,
        )
        self._timer_checkpoint = wheel.paths(root)[2]

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            numbers = self._supervisor_numbers()
            self.traffic.update()
            out = Families(self.constant)
            self._broker(out, numbers)
            self._traffic(out, numbers)
            self._consumers(out, numbers)
            self._storage(out)
            self._agents(out)
            self._rings(out, numbers)
            self._ha(out)
            self._events(out, numbers.events)
            self._watermarks(out, numbers.watermarks)
            self._schedule(out)
            self._timer(out)
        yield from out.made

    def _supervisor_numbers(self) -> SupervisorNumbers:
        """The supervisor's latest answer: one question outstanding at a time."""
        try:
            if not self._asked:
                self.channel.send(ASK)
                self._asked = True
                self.wake_supervisor()
            if self.channel.poll(ANSWER_WAIT_S):
                self._numbers = self.channel.recv()
                self._asked = False
        except (EOFError, OSError):  # the supervisor is stopping: it stops this process next
            pass
        return self._numbers

    def _broker(self, out: Families, numbers: SupervisorNumbers) -> None:
        out.add(
            out.gauge("rocketmq_broker_permission", "The broker's permission."), numbers.permission
        )
        _, topics = tt.read_topics(self.topic_seg.buf, self.topic_seg.words)
        out.add(out.gauge("rocketmq_topic_number", "Topics."), len(topics))
        out.add(out.gauge("rocketmq_consumer_group_number", "Subscription groups."), numbers.groups)

    def _traffic(self, out: Families, numbers: SupervisorNumbers) -> None:
        labels = ("topic", "message_type", "is_system")
        msgs = out.counter("rocketmq_messages_in", "Messages stored.", labels)
        throughput = out.counter("rocketmq_throughput_in", "Record bytes stored.", labels)
        sizes = out.histogram("rocketmq_message_size", "Stored record sizes (bytes).", labels)
        for topic, counts in sorted(self.traffic.topics.items()):
            if is_retry_or_dlq(topic):  # as RocketMQ: a retry or DLQ message is no put
                continue
            values = [topic, "normal", flag(is_system_topic(topic))]
            out.add(msgs, counts.messages, *values)
            out.add(throughput, counts.bytes, *values)
            cumulative = counts.buckets.cumsum()
            buckets = [
                (str(float(b)), int(n)) for b, n in zip(SIZE_BUCKETS, cumulative, strict=False)
            ]
            buckets.append(("+Inf", int(cumulative[-1])))
            sizes.add_metric(out.values + values, buckets, counts.bytes)
        out_labels = ("topic", "consumer_group", "is_retry", "is_system")
        for name, doc, counts in (
            ("rocketmq_messages_out", "Messages consumers got.", numbers.gets),
            ("rocketmq_throughput_out", "Record bytes consumers got.", numbers.got_bytes),
        ):
            family = out.counter(name, doc, out_labels)
            for (group, topic), n in sorted(counts.items()):
                out.add(family, n, topic, group, *group_flags(group, topic))

    def _consumers(self, out: Families, numbers: SupervisorNumbers) -> None:
        connections: dict[tuple[str, ...], int] = {}
        for c in numbers.consumers:
            key = (
                c.group,
                c.language,
                c.version,
                c.consume_mode,
                "remoting",
                flag(c.group in SYSTEM_GROUPS),
            )
            connections[key] = connections.get(key, 0) + 1
        family = out.gauge(
            "rocketmq_consumer_connections",
            "Consumer clients connected.",
            ("consumer_group", "language", "version", "consume_mode", "protocol_type", "is_system"),
        )
        for key, n in sorted(connections.items()):
            out.add(family, n, *key)
        producers = Counter(("python", __version__, "shm") for r in numbers.rings
                            if not r.own and not r.fenced)  # fmt: skip
        producers.update((language, version, "remoting")
                         for language, version in numbers.tcp_producers)  # fmt: skip
        family = out.gauge(
            "rocketmq_producer_connections",
            "Producers connected: over TCP (remoting), or on this host with a ring (shm).",
            ("language", "version", "protocol_type"),
        )
        for key, n in sorted(producers.items()):
            out.add(family, n, *key)
        lag = out.gauge(
            "rocketmq_consumer_lag_messages",
            "Messages stored past the group's committed offsets.",
            ("consumer_group", "topic", "is_retry", "is_system"),
        )
        latency = out.gauge(
            "rocketmq_consumer_lag_latency",
            "Milliseconds since the oldest message the group has not consumed was stored.",
            ("consumer_group", "topic", "is_retry", "is_system"),
        )
        self._directory.refresh()
        now_ms = time.time() * 1000
        for (group, topic), committed in sorted(numbers.offsets.items()):
            behind, oldest = 0, None
            for queue_id, offset in committed.items():
                slot = self._directory.slot(topic.encode(), queue_id)
                if slot < 0 or int(self._maxima[slot]) <= offset:
                    continue
                behind += int(self._maxima[slot]) - offset
                stored = self.traffic.reader.store_timestamp(topic, queue_id, offset)
                if stored is not None and (oldest is None or stored < oldest):
                    oldest = stored
            labels = (group, topic, *group_flags(group, topic))
            out.add(lag, behind, *labels)
            out.add(latency, 0 if oldest is None else max(now_ms - oldest, 0), *labels)
        self._ready_and_inflight(out, numbers)

    def _ready_and_inflight(self, out: Families, numbers: SupervisorNumbers) -> None:
        """RocketMQ's ready (stored, not pulled) and inflight (pulled, not committed) messages
        of each group's queues with a committed offset. A TCP pull's next offset is the
        pulled offset (clamped between the committed and the max offset); a queue no TCP
        pull read (a local consumer reads the files itself, a POP group's pops commit the
        offset) counts as pulled up to its committed offset, so its lag is ready; a POP
        group's inflight is what it popped and did not ack (the POP processor's count)."""
        labels = ("consumer_group", "topic", "is_retry", "is_system")
        ready = out.gauge(
            "rocketmq_consumer_ready_messages", "Messages stored, not pulled yet.", labels
        )
        inflight = out.gauge(
            "rocketmq_consumer_inflight_messages", "Messages pulled, not committed yet.", labels
        )
        pulled, popped = numbers.events.pulled, numbers.events.popped
        for key in sorted(set(numbers.offsets) | set(popped)):
            group, topic = key
            waiting, taken = 0, popped.get(key, 0)
            queues = pulled.get(key, {})
            for queue_id, committed in numbers.offsets.get(key, {}).items():
                slot = self._directory.slot(topic.encode(), queue_id)
                if slot < 0:
                    continue
                top = max(int(self._maxima[slot]), committed)
                at = min(max(queues.get(queue_id, committed), committed), top)
                waiting += top - at
                taken += at - committed
            values = (group, topic, *group_flags(group, topic))
            out.add(ready, waiting, *values)
            out.add(inflight, taken, *values)

    def _storage(self, out: Families) -> None:
        w = self.words
        write = cn.load(w, cn.WRITE_OFFSET)
        disk = os.statvfs(self.config.store.store_path_root_dir)
        used = (disk.f_blocks - disk.f_bfree) * disk.f_frsize
        out.add(
            out.gauge("rocketmq_storage_size", "Bytes used on the store's disk.", tuple(STORAGE)),
            used,
            *STORAGE.values(),
        )
        behind = (("flush", cn.FLUSHED_OFFSET), ("dispatch", cn.DISPATCHED_OFFSET))
        for what, field in behind:
            doc = f"CommitLog bytes written, not yet {what}ed."
            family = out.gauge(f"rocketmq_storage_{what}_behind_bytes", doc, tuple(STORAGE))
            out.add(family, max(write - cn.load(w, field), 0), *STORAGE.values())
        position = out.gauge("shmq_commitlog_offset_bytes", "CommitLog positions.", ("position",))
        for name, field in (
            ("write", cn.WRITE_OFFSET),
            ("flushed", cn.FLUSHED_OFFSET),
            ("dispatched", cn.DISPATCHED_OFFSET),
            ("confirmed", cn.CONFIRMED_OFFSET),
            ("min", cn.MIN_PHYSICAL_OFFSET),
        ):
            out.add(position, cn.load(w, field), name)
        for name, field, doc in (
            ("shmq_messages_stored", cn.MSGS_IN, "Messages the writer appended."),
            ("shmq_messages_dispatched", cn.MSGS_DISPATCHED, "Messages reput dispatched."),
            ("shmq_puts_rejected", cn.REJECTED, "Records the writer refused."),
            ("shmq_flushes", cn.FLUSHES, "CommitLog flushes."),
            ("shmq_flush_errors", cn.FLUSH_ERRORS, "CommitLog flushes that failed."),
        ):
            out.add(out.counter(name, doc), cn.load(w, field))
        used_ratio = out.gauge("shmq_disk_used_ratio", "The store disk's used share (cleaner).")
        out.add(used_ratio, cn.load(w, cn.DISK_USED_PERMILLE) / 1000)
        refusing = out.gauge("shmq_store_refusing_puts", "1 while the store refuses puts.")
        out.add(refusing, int(bool(cn.refuse_reason(w))))

    def _agents(self, out: Families) -> None:
        w = self.words
        up = out.gauge("shmq_agent_up", "1 while the agent's process runs.", ("agent",))
        restarts = out.gauge(
            "shmq_agent_restarts", "Agent restarts in the last minute.", ("agent",)
        )
        cpu = out.counter("shmq_agent_cpu_seconds", "CPU time of the agent's process.", ("agent",))
        parks = out.counter(
            "shmq_agent_parks", "Times the agent parked on its semaphore.", ("agent",)
        )
        for kind in cn.AGENT_KINDS:
            pid = cn.load(w, cn.agent_word(kind, cn.PID))
            seconds = cpu_seconds(pid) if pid else None
            out.add(up, int(seconds is not None), kind)
            out.add(restarts, cn.load(w, cn.agent_word(kind, cn.RESTARTS)), kind)
            if seconds is not None:
                out.add(cpu, seconds, kind)
            if kind in PARK_WORDS:
                out.add(parks, cn.load(w, PARK_WORDS[kind]), kind)
        seconds = cpu_seconds(cn.load(w, cn.SUPERVISOR_PID))
        if seconds is not None:
            out.add(cpu, seconds, "supervisor")

    def _rings(self, out: Families, numbers: SupervisorNumbers) -> None:
        used = out.gauge(
            "shmq_ring_used_bytes",
            "Bytes a producer ring holds unread.",
            ("producer_group", "slot"),
        )
        size = out.gauge(
            "shmq_ring_size_bytes", "A producer ring's capacity.", ("producer_group", "slot")
        )
        for r in numbers.rings:
            out.add(used, r.used, r.group, str(r.slot))
            out.add(size, r.capacity, r.group, str(r.slot))
        out.add(
            out.gauge("shmq_rings_fenced", "Producer rings the writer no longer reads."),
            sum(r.fenced for r in numbers.rings),
        )

    def _ha(self, out: Families) -> None:
        write = cn.load(self.words, cn.WRITE_OFFSET)
        out.add(
            out.gauge("shmq_ha_slaves", "Slaves connected to this master."),
            cn.load(self.words, cn.HA_SLAVES),
        )
        lag = out.gauge(
            "shmq_ha_slave_lag_bytes", "CommitLog bytes a slave has not acknowledged.", ("slave",)
        )
        for row in ht.read_rows(self.ha_words):
            out.add(lag, max(write - row[ht.ACK_OFFSET], 0), cn.unpack_address(row[ht.ADDR]))

    def _watermarks(self, out: Families, watermarks: dict[str, int]) -> None:
        family = out.gauge(
            "rocketmq_processor_watermark",
            "Requests waiting for the control server's workers, by processor.",
            ("processor",),
        )
        for processor, n in watermarks.items():
            out.add(family, n, processor)

    def _max_offset(self, topic: str, queue_id: int) -> int:
        slot = self._directory.slot(topic.encode(), queue_id)
        return int(self._maxima[slot]) if slot >= 0 else 0

    def _schedule(self, out: Families) -> None:
        """Delay-level messages not delivered yet, per level: the level's queue past the
        schedule agent's persisted progress (and the deliveries it made beyond a gap)."""
        self._directory.refresh()
        levels = self._delay_levels
        levels.load()
        family = out.gauge(
            "shmq_schedule_messages",
            "Delay-level messages not delivered yet.",
            ("delay_level", "delay_ms"),
        )
        for qid, delay_ms in enumerate(levels.delays):
            behind = self._max_offset(SCHEDULE_TOPIC, qid) - int(levels.offsets[qid])
            behind -= len(levels.done[qid])
            out.add(family, max(behind, 0), str(qid + 1), str(delay_ms))

    def _timer(self, out: Families) -> None:
        """Timer messages stored and not yet on the timing wheel (RocketMQ 5's enqueue lag,
        as of the timer's last commit) and how long the oldest of them has waited."""
        enqueued = wheel.TimerCheckpoint.load(self._timer_checkpoint).enqueue_offset
        behind = max(self._max_offset(TIMER_TOPIC, 0) - enqueued, 0)
        out.add(out.gauge("rocketmq_timer_enqueue_lag", "Timer messages not on the wheel."),
                behind)  # fmt: skip
        oldest = self.traffic.reader.store_timestamp(TIMER_TOPIC, 0, enqueued) if behind else None
        waited = 0 if oldest is None else max(time.time() * 1000 - oldest, 0)
        out.add(out.gauge("rocketmq_timer_enqueue_latency",
                          "Milliseconds the oldest timer message not on the wheel waited."),
                waited)  # fmt: skip
        self._timer_wheel(out)

    def _timer_wheel(self, out: Families) -> None:
        """The wheel as the schedule agent publishes it while it works (the counters' timer
        lines): RocketMQ 5's dequeue lag (every message on the wheel not yet delivered, as
        its ``getAllNum(currReadTimeMs)``), dequeue latency (how long what is due has
        waited: 0 with nothing due) and the snapshot by time ahead."""
        waiting = cn.load(self.words, cn.TIMER_WAITING)
        delivered_to = cn.load(self.words, cn.TIMER_DELIVERED_MS)
        late = max(time.time() * 1000 - delivered_to, 0) if waiting else 0
        lag = out.gauge("rocketmq_timer_dequeue_lag", "Timer messages on the wheel not delivered.")
        out.add(lag, waiting)
        latency = out.gauge(
            "rocketmq_timer_dequeue_latency", "Milliseconds due timer messages wait for delivery."
        )
        out.add(latency, late)
        snapshot = out.gauge(
            "rocketmq_timer_message_snapshot",
            "Timer messages on the wheel due within timer_bound_s (after the previous bound).",
            ("timer_bound_s",),
        )
        for k, bound in enumerate(cn.TIMER_BOUNDS_S):
            out.add(snapshot, cn.load(self.words, cn.TIMER_SNAPSHOT + k), str(bound))

    def _events(self, out: Families, events: EventCounts) -> None:
        out.made.append(rpc_latency.histogram(events.rpc, out.constant))
        for name, doc, counts in (
            ("rocketmq_commit_messages", "Transactions committed.", events.commits),
            ("rocketmq_rollback_messages", "Transactions rolled back.", events.rollbacks),
        ):
            family = out.counter(name, doc, ("topic",))
            for topic, n in sorted(counts.items()):
                out.add(family, n, topic)
        halves = out.gauge(
            "rocketmq_half_messages",
            "Transaction half messages without an outcome (as of the half queue's last scan).",
            ("topic",),
        )
        for topic, n in sorted(events.halves.items()):
            out.add(halves, n, topic)
        dlq = out.counter(
            "rocketmq_send_to_dlq_messages",
            "Messages a group sent to its dead-letter queue.",
            ("consumer_group", "topic", "is_system"),
        )
        for (group, topic), n in sorted(events.dlq.items()):
            out.add(dlq, n, group, topic, flag(group in SYSTEM_GROUPS or is_system_topic(topic)))
