"""The broker supervisor: recovery, shared memory, agent processes, control server, namesrv.

Start-up: spawn the agent template (it preloads the agents' code), recover the store in this
process (``MessageStore``), hand its files over, create the shared segments and semaphores
under one fresh prefix, serve the control plane, fork the writer, reput, flush and the other
agents from the template and register with every namesrv once they run. While running,
it restarts a dead agent (each agent recovers what it owns when it starts: the writer cuts
the CommitLog back to the published write offset and resumes rings from their journals;
reput re-finds consume-queue ends; flush restarts from the flushed offset), creates topics
the writer asks for, releases clients whose processes died and persists offsets; a slave
also copies its master's config tables (``slave_sync``).

Clean stop (SIGTERM/SIGINT or ``stop()``): stop the writer (it drains the rings), then reput
(dispatches and flushes everything), then flush (flushes and checkpoints), persist topics
and offsets, remove ``abort``, release the lock, unlink every segment and semaphore.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from functools import partial
from typing import Any, TypeVar

from shmq import files, kernel_cache
from shmq import half_messages as hm
from shmq.broker.acl.inner import inner_account
from shmq.broker.acl.plain_file import PlainAclFile, acl_file_path
from shmq.broker.acl.remoting import RemotingAcl
from shmq.broker.acl.validator import PlainAcl
from shmq.broker.agents.broker_names import BrokerNames
from shmq.broker.agents.producer_wakeups import ProducerWakeups
from shmq.broker.client.consumer_manager import ConsumerManager
from shmq.broker.client.producer_manager import ProducerManager
from shmq.broker.client.queue_locks import QueueLocks
from shmq.broker.client.slots import ClientSlots
from shmq.broker.config.broker_config import RECORD_OVERHEAD_MAX, BrokerConfig
from shmq.broker.config.tuning import apply_runtime, prepare_tuning, set_environment
from shmq.broker.context import BrokerContext
from shmq.broker.data_server.process import DataServerProcess
from shmq.broker.data_server.reports import DataServerReports
from shmq.broker.data_server.serve import broker_server
from shmq.broker.ha import controller_mode as cm
from shmq.broker.ha.slave_sync import SlaveSynchronize
from shmq.broker.ha.sync_state import Report, SyncState
from shmq.broker.kernels import compile_kernels
from shmq.broker.live_config import LiveConfig
from shmq.broker.metrics.process import MetricsProcess
from shmq.broker.offset.consumer_offsets import ConsumerOffsetManager
from shmq.broker.pop.revive import ReviveService
from shmq.broker.pop.service import PopService
from shmq.broker.process_group import ProcessGroup
from shmq.broker.processors.acl_admin import AclAdminProcessor
from shmq.broker.processors.admin.lookups import AdminLookups
from shmq.broker.processors.admin.offsets import OffsetLookups
from shmq.broker.processors.admin.processor import AdminBrokerProcessor
from shmq.broker.processors.admin.queues import QueueInspection
from shmq.broker.processors.admin.status import BrokerStatus
from shmq.broker.processors.admin.topics import TopicAdmin
from shmq.broker.processors.client_manage import ClientManageProcessor
from shmq.broker.processors.consumer_manage import ConsumerManageProcessor
from shmq.broker.processors.end_transaction import TransactionHandlers
from shmq.broker.processors.local_registration import LocalRegistration
from shmq.broker.processors.pop import PopProcessor
from shmq.broker.processors.pull import RemotingPull
from shmq.broker.processors.query_message import QueryMessageProcessor
from shmq.broker.processors.recall import RecallMessageProcessor
from shmq.broker.processors.reply import ReplyMessages
from shmq.broker.processors.send import RemotingSend
from shmq.broker.processors.send_back import SendBack
from shmq.broker.proxy_process import ProxyProcess
from shmq.broker.registration import NamesrvRegistration
from shmq.broker.ring_puts import ring_info
from shmq.broker.stats.events import BrokerEvents
from shmq.broker.stats.get_counts import GetCounts
from shmq.broker.stats.items import BrokerStatsItems
from shmq.broker.stats.rates import BrokerRates
from shmq.broker.stats.runtime import broker_stats
from shmq.broker.store_view import StoreView
from shmq.broker.subscription.groups import SubscriptionGroupManager
from shmq.broker.topic.config import PERM_READ_WRITE, TopicConfig, TopicConfigManager
from shmq.broker.topic.deletion import TopicDeletion
from shmq.broker.topic.publisher import TopicPublisher
from shmq.broker.topic.table import TopicTable
from shmq.broker.transaction.service import TransactionService
from shmq.delay_topics import SCHEDULE_TOPIC, TIMER_TOPIC
from shmq.errors import ShmqError
from shmq.ipc import consumer_gets as cg
from shmq.ipc import counters as cn
from shmq.ipc import ha_table as ht
from shmq.ipc import queue_table as qt
from shmq.ipc import registry as rg
from shmq.ipc import topic_table as tt
from shmq.ipc.idle import SPARE_CPUS, spare_cpus
from shmq.ipc.segment import (
    Segment,
    create_semaphore,
    new_prefix,
    post,
    unlink_orphans,
    unlink_prefix,
    wait,
)
from shmq.main_guard import check_main_guard
from shmq.remoting.client import RemotingClient
from shmq.remoting.security.tls_server import ENFORCING, PERMISSIVE
from shmq.remoting.server import RemotingServer
from shmq.store.message_store import MessageStore

log = logging.getLogger(__name__)

AGENTS = ("writer", "reput", "flush", "cleaner", "schedule", "ha")
# a slave takes no sends: its HA agent writes the CommitLog, nothing sends through a writer
SLAVE_AGENTS = ("ha", "reput", "flush", "cleaner")
# the schedule agent sends through the writer: it stops first; HA streams the writer's last
# bytes before it stops
STOP_ORDER = ("schedule", "writer", "ha", "reput", "flush", "cleaner")
RING_AGENTS = ("schedule",)  # agents with a producer ring of their own
AGENT_STOP_TIMEOUT_S = 30.0
AGENT_START_TIMEOUT_S = 300.0
HOUSEKEEPING_S = 0.1
CONTROL_HOST = "127.0.0.1"
# the control server's connections beyond serverMaxConnections (one link per data-server
# connection): the gRPC proxy's, the data server's own, admin tools on the host
CONTROL_CONNECTIONS = 64

T = TypeVar("T")


def agent_kinds(config: BrokerConfig) -> tuple[str, ...]:
    """The agents a broker of ``config`` runs: a master whose writer or flush agent
    dispatches (``dispatchInline``) runs no reput process."""
    if config.is_slave:
        return SLAVE_AGENTS
    if config.dispatcher != "reput":
        return tuple(k for k in AGENTS if k != "reput")
    return AGENTS


class Broker:
    """One broker process group. ``start()`` returns once agents and the control server run."""

    def __init__(self, config: BrokerConfig, *, log_level: int | None = None) -> None:
        config, self.tuning = prepare_tuning(config)  # [tuning] validated, folded in
        self.settings = LiveConfig(config)  # shared with the processors and the registration
        self.root = config.store.store_path_root_dir
        self.log_level = log_level if log_level is not None else logging.getLogger().level
        self.names = BrokerNames(new_prefix())
        self._segments: list[Segment] = []
        self._sems: list[Any] = []
        self.group = ProcessGroup(agent_kinds(config), self.log_level, self._agent_ended)
        self._restarts: dict[str, list[float]] = {k: [] for k in AGENTS}
        self._role_lock = threading.Lock()  # a promotion and the agent watch take turns
        self._ring_deaths: dict[tuple[int, int], list[float]] = {}
        self._persist_failing = False
        self._stop = threading.Event()  # the broker's threads stop (set by ``wait``, ``stop``)
        self._stop_requested = False  # ``request_stop``: a plain flag, signal-safe
        self._stopped = False
        self._threads: list[threading.Thread] = []
        self.server: RemotingServer | None = None  # the control server (loopback)
        self.data_server: DataServerProcess | None = None  # the public port: TCP data path
        self._serving = False
        self.client: RemotingClient | None = None  # the control client (namesrvs, master)
        self.slave_sync: SlaveSynchronize | None = None
        self.registration: NamesrvRegistration | None = None
        self.context: BrokerContext | None = None
        self.transactions: TransactionService | None = None
        self.pull: RemotingPull | None = None
        self.revive: ReviveService | None = None  # POP: stopped before the writer
        self.proxy: ProxyProcess | None = None  # RocketMQ 5's gRPC front end
        self.metrics: MetricsProcess | None = None  # the Prometheus endpoint
        self.acl: PlainAcl | None = None  # with aclEnable: plain_acl.yml and the proxy's account
        self.processors: list[Any] = []  # registered on the control server
        self._closing: list[Any] = []  # the processors that hold threads, rings or slots
        self._lease = None

    @property
    def config(self) -> BrokerConfig:
        """The broker's config now (UPDATE_BROKER_CONFIG and a promotion replace it)."""
        return self.settings.current

    @config.setter
    def config(self, config: BrokerConfig) -> None:
        self.settings.current = config

    @property
    def stop_reason(self) -> str:
        """Why the broker stopped itself (empty: asked to stop)."""
        return self.group.stop_reason

    # -- start ------------------------------------------------------------------------------

    def start(self) -> None:
        check_main_guard("a broker")
        cfg = self.config
        for line in set_environment(self.tuning):  # before numba is imported and agents spawn
            log.info("tuning: %s", line)
        files.set_file_mode(cfg.store.file_mode, cfg.store.local_client_gid)
        files.makedirs(self.root)
        files.share_store(self.root)
        if cfg.ring_message_limit < cfg.store.max_message_size:
            log.warning(
                "ringSize %d holds bodies of up to %d bytes, less than maxMessageSize %d: "
                "larger sends fail; a ringSize of %d takes them",
                cfg.ring_size, cfg.ring_message_limit, cfg.store.max_message_size,
                1 << (cfg.store.max_message_size + RECORD_OVERHEAD_MAX - 1).bit_length(),
            )  # fmt: skip
        if cfg.idle_strategy == "busy_spin" and not spare_cpus():
            log.warning(
                "idleStrategy=busy_spin on %d CPUs: the writer (and reput where it runs) keep "
                "a core busy, which producers and consumers then lack (backoff suits fewer "
                "than %d)",
                os.cpu_count() or 1, SPARE_CPUS,
            )  # fmt: skip
        if kernel_cache.is_warm():  # else it loads what ``compile_kernels`` compiles below
            self.group.template.spawn()  # it imports and loads kernels while the store recovers
        for prefix in unlink_orphans():
            log.warning("removed shared memory %s* left by a broker that died", prefix)
        try:
            store = MessageStore(cfg.store)
        except BaseException:  # a locked or damaged store: nothing else runs yet
            self.group.template.close()
            raise
        decision, epoch = None, cm.Epoch()
        try:
            if cfg.enable_controller_mode:
                self.config, decision = cm.start_role(self.config, store)
                self.group.kinds = agent_kinds(self.config)
                epoch = cm.load_epoch(self.root)
            queue_maxima = {k: cq.max_offset for k, cq in store.consume_queues.items()}
            cl = store.commitlog  # dispatched: short of the end when a full disk stopped it
            span = (cl.min_offset, store.reput_from_offset, cl.max_offset)
            last_ts = store.checkpoint.physic_msg_timestamp
        finally:
            self._lease = store.hand_over()
        try:
            self._create_shared(queue_maxima, span, last_ts)
            if cfg.enable_controller_mode:
                cn.publish(self.counters.words, cn.CONTROLLER_MODE, 1)
            self.topics = TopicConfigManager(
                os.path.join(self.root, "config"),
                default_queue_nums=cfg.default_topic_queue_nums,
                auto_create=cfg.auto_create_topic_enable,
                cluster_name=cfg.broker_cluster_name,
                broker_name=cfg.broker_name,
                cluster_topic_enable=cfg.cluster_topic_enable,
                broker_topic_enable=cfg.broker_topic_enable,
                trace_topic=cfg.msg_trace_topic_name if cfg.trace_topic_enable else None,
            )
            levels = len(cfg.store.delay_levels_ms)
            schedule = self.topics.get(SCHEDULE_TOPIC)
            if schedule is None or schedule.write_queue_nums < levels:  # a queue per level
                self.topics.update(TopicConfig(SCHEDULE_TOPIC, levels, levels))
            if self.topics.get(TIMER_TOPIC) is None:
                self.topics.update(TopicConfig(TIMER_TOPIC, 1, 1))
            for topic in (hm.HALF_TOPIC, hm.OP_TOPIC, hm.CHECK_MAX_TIME_TOPIC):
                system = self.topics.get(topic)  # transactions need them, writable
                if system is None or system.perm & PERM_READ_WRITE != PERM_READ_WRITE:
                    self.topics.update(TopicConfig(topic, 1, 1))
            self.subscription_groups = SubscriptionGroupManager(os.path.join(self.root, "config"))
            self.offsets = ConsumerOffsetManager(os.path.join(self.root, "config"))
            self.gets = GetCounts(self.gets_seg, self.queue_seg, cfg.max_consumers)
            self.rates = BrokerRates()
            self.stats_items = BrokerStatsItems(cfg.broker_cluster_name)
            # what the store holds before any client: not counted as traffic
            self.stats_items.observe(self._topic_puts(), {})
            self.consumers = ConsumerManager(cfg.channel_expired_timeout)
            self.queue_locks = QueueLocks(cfg.rebalance_lock_max_live_time)
            self.topic_table = TopicTable(self.topics, self.topic_seg)
            self.topic_table.publish()
            self.clients = ClientSlots(cfg, self.names.prefix, self.registry, self.gets)
            self.context = self._build_context(epoch)
            self.data_server.spawn()  # it imports and loads kernels while the agents start
            if decision is not None:
                self._follow_sync_state(decision)
            compile_kernels()  # at a first start: once, here; the agents load them
            # while the agent template preloads: what early clients send waits in their rings
            self._start_control()
            self._start_agents()
            self.data_server.serve(self.server.address)  # the broker's address from now on
            self.registration.register_all()  # clients find routes: sends need no proxy
            if cfg.proxy_enable:  # it imports and binds while the first clients are served
                inner = self.acl.inner if self.acl is not None else None
                self.proxy = ProxyProcess(self.config, self.log_level, inner)
                self.proxy.spawn()
            if cfg.metrics_enabled:  # it imports and maps the segments as the proxy does
                self.metrics = MetricsProcess(self.config, self.names.prefix, self.log_level)
                self.metrics.spawn()
            if self.proxy is not None:
                self.proxy.serve(self.server.address)
            if self.metrics is not None:
                self.metrics.serve()
            self._spawn_thread("housekeeping", self._housekeeping)
            if self.config.is_slave:
                self._spawn_thread("slave-sync", partial(self.slave_sync.run, self._stop))
            self._spawn_thread("namesrv-register", self.registration.run)
            cn.publish(self.counters.words, cn.STATE, cn.STATE_RUNNING)
            for line in apply_runtime(self.tuning, "supervisor", [s.mm for s in self._segments]):
                log.info("tuning: %s", line)
        except BaseException:
            self.stop()
            raise
        log.info(
            "broker %s started: store %s, address %s (data server pid %s), control %s, shm "
            "prefix %s", cfg.broker_name, self.root, self.address, self.data_server.proc.pid,
            self.server.address, self.names.prefix,
        )  # fmt: skip

    def _create_shared(
        self, queue_maxima: dict[tuple[str, int], int], span: tuple[int, int, int], last_ts: int
    ) -> None:
        """The shared segments, with what recovery found: ``span`` is the CommitLog's
        ``(first, dispatched, end)`` offsets (the first published as if the cleaner had just
        moved it, so min offsets, reput's consume-queue cleanup and readers start from it,
        not from 0; dispatched short of the end when a full disk stopped recovery's
        dispatch, and reput goes on from there)."""
        cfg, names = self.config, self.names
        min_offset, dispatched, write_offset = span
        self.counters = self._segment(names.counters, cn.SIZE)
        words = self.counters.words
        cn.init(words, os.getpid(), int(time.time() * 1000))
        for field in (cn.WRITE_OFFSET, cn.FLUSHED_OFFSET):
            cn.publish(words, field, write_offset)
        cn.publish(words, cn.DISPATCHED_OFFSET, dispatched)
        cn.publish(words, cn.MIN_PHYSICAL_OFFSET, min_offset)
        for field in (cn.WRITE_TIMESTAMP, cn.FLUSHED_TIMESTAMP, cn.LOGICS_TIMESTAMP):
            cn.publish(words, field, last_ts)
        self.topic_seg = self._segment(names.topics, tt.segment_size(self.config.max_topics))
        tt.init(self.topic_seg.words, self.config.max_topics)
        capacity = cfg.max_queue_slots
        if len(queue_maxima) > capacity:
            raise ShmqError(
                f"the store has {len(queue_maxima)} queues; maxQueueSlots is {capacity}"
            )
        self.queue_seg = self._segment(names.queues, qt.segment_size(capacity))
        qt.init(self.queue_seg.words, capacity)
        maxima = qt.max_offsets(self.queue_seg.buf)
        self._queue_directory = qt.QueueDirectory(self.queue_seg.buf, self.queue_seg.words)
        for (topic, qid), max_offset in sorted(queue_maxima.items()):
            slot = qt.add_queue(self.queue_seg.buf, self.queue_seg.words, topic.encode(), qid)
            maxima[slot] = max_offset
        size = rg.segment_size(cfg.max_producers, cfg.max_consumers)
        self.registry = self._segment(names.registry, size)
        rg.init(self.registry.words, cfg.max_producers, cfg.max_consumers)
        size = cg.segment_size(cfg.max_consumers, capacity)
        self.gets_seg = self._segment(names.consumer_gets, size)
        cg.init(self.gets_seg.words, cfg.max_consumers, capacity)
        self.ha_table = self._segment(names.ha_table, ht.SIZE)
        for kind in AGENTS:  # a slave's too: rings of the broker's own name the writer's
            self.group.sems[kind] = create_semaphore(names.agent_sem(kind))
            self._sems.append(self.group.sems[kind])
        self.supervisor_sem = create_semaphore(names.supervisor_sem)
        self._sems.append(self.supervisor_sem)

    def _segment(self, name: str, size: int) -> Segment:
        seg = Segment.create(name, size)
        self._segments.append(seg)
        return seg

    def _build_context(self, epoch: cm.Epoch) -> BrokerContext:
        """The control server (not serving yet) and client, a slave's copy of its master's
        tables, the namesrv registration (at ``epoch``), and the context the processors get:
        built once the shared memory and the tables exist."""
        cfg = self.config
        # on loopback only: clients reach it through the data server's relay (a link per
        # client connection: room for each), the gRPC proxy directly; TLS as the public
        # port's, but plain TCP always taken (the links are plain: loopback)
        tls = cfg.tls_server
        self.server = broker_server(
            cfg, CONTROL_HOST, 0, name_suffix="-control", extra_connections=CONTROL_CONNECTIONS,
            tls=dataclasses.replace(tls, mode=PERMISSIVE) if tls.mode == ENFORCING else tls,
        )  # fmt: skip
        if cfg.acl_enable:  # a missing or bad plain_acl.yml stops the start here
            self.acl = PlainAcl(PlainAclFile(acl_file_path(cfg)), inner_account())
            self.server.authorize = RemotingAcl(self.acl).authorize
        self.settings.on_change = self._config_changed
        tcp_ring = self.clients.register_producer(os.getpid(), "shmq-data-send")
        hold_slot = self.clients.register_consumer(os.getpid(), "shmq-data-pull-hold")
        self.data_server = DataServerProcess(
            cfg, self.names.prefix, self.log_level, ring_info(tcp_ring, self.names), hold_slot,
            self.acl.inner if self.acl is not None else None,
        )  # fmt: skip
        self.server.relay_token = self.data_server.token
        self.client = RemotingClient(connect_timeout=1.0, default_timeout=3.0, tls=cfg.tls_client)
        self.slave_sync = SlaveSynchronize(
            self.settings, self._address, self.client, self.topics, self.topic_table,
            self.subscription_groups, self.offsets,
        )  # fmt: skip
        self.registration = NamesrvRegistration(
            self.settings, self.topics, self.counters.words, self._address, self.client,
            self.slave_sync, stop=self._stop, promote=self._become_master, halt=self._halt,
        )  # fmt: skip
        self.registration.epoch = epoch
        events = BrokerEvents()
        self.server.observe = events.rpc.answered
        return BrokerContext(
            settings=self.settings,
            names=self.names,
            counters=self.counters,
            registry=self.registry,
            ha_table=self.ha_table,
            store=StoreView(cfg.store, self.queue_seg, self.counters.words),
            topics=self.topics,
            offsets=self.offsets,
            subscription_groups=self.subscription_groups,
            clients=self.clients,
            consumers=self.consumers,
            producers=ProducerManager(self.server.connection),
            queue_locks=self.queue_locks,
            gets=self.gets,
            events=events,
            rates=self.rates,
            stats_items=self.stats_items,
            topic_table=self.topic_table,
            topic_publisher=TopicPublisher(self.topics, self.topic_table, self.registration),
            namesrv=self.registration,
            agents=self.group,
            server=self.server,
            public_address=self._address,
            acl=self.acl,
        )

    def _follow_sync_state(self, decision: cm.Decision) -> None:
        """A SYNC_MASTER in controller mode keeps its sync state set with the controller
        (``sync_state``, which the registration reports); it starts empty (it reported
        none). Before the agents start: the HA agent counts the set's acks."""
        cfg = self.config
        if cfg.broker_role != "SYNC_MASTER" or decision.role != "MASTER":
            return
        wakeups = ProducerWakeups(self.registry, self.names.prefix, cfg.max_producers)
        sync_state = SyncState(self.counters.words, self.ha_table.words, wakeups,
                               cfg.store.sync_flush, cfg.ha_slave_fallbehind_max)  # fmt: skip
        sync_state.answered(Report(()), decision.alone)
        self.registration.sync_state = sync_state

    def _start_agent(self, kind: str) -> None:
        self.group.start(kind, self.config, self.names.prefix)

    def _agent_ended(self) -> None:
        """An agent's process ended (the template's reader thread): housekeeping looks now,
        not at its next poll, so a dead writer is replaced at once."""
        if hasattr(self, "supervisor_sem") and not self._stopped:
            post(self.supervisor_sem)

    def _start_agents(self) -> None:
        for kind in (k for k in RING_AGENTS if k in self.group.kinds):
            slot = self.clients.register_producer(os.getpid(), f"shmq-{kind}")
            cn.publish(self.counters.words, cn.agent_word(kind, cn.RING_SLOT), slot.index)
            cn.publish(self.counters.words, cn.agent_word(kind, cn.RING_GEN), slot.gen)
        for kind in self.group.kinds:  # a promotion reuses the words of the agents it stopped
            for word in (cn.PID, cn.STOP):
                cn.publish(self.counters.words, cn.agent_word(kind, word), 0)
            self._start_agent(kind)
        self._wait_agents_ready()
        log.info("agents running: %s", ", ".join(f"{k} {self.group.procs[k].pid}"
                                                 for k in self.group.kinds))  # fmt: skip

    def _wait_agents_ready(self) -> None:
        """Agents publish their pid once their files are open; the broker registers with
        the namesrvs (clients find it) only after that."""
        deadline = time.monotonic() + AGENT_START_TIMEOUT_S
        words = self.counters.words
        for kind in self.group.kinds:
            while not cn.load(words, cn.agent_word(kind, cn.PID)):
                proc = self.group.procs[kind]
                if not proc.is_alive():
                    raise ShmqError(f"the {kind} agent exited with code {proc.exitcode} at start")
                if time.monotonic() > deadline:
                    raise ShmqError(f"the {kind} agent did not start in {AGENT_START_TIMEOUT_S} s")
                time.sleep(0.01)

    def _start_control(self) -> None:
        """The processors on the control server, and the transaction service beside them
        (it checks back with producers over the server's connections)."""
        ctx = self.context
        self.transactions = TransactionService(ctx)
        send_back = self._owned(SendBack(ctx))
        send = self._owned(RemotingSend(ctx))
        self.pull = self._owned(RemotingPull(ctx))
        reply = self._owned(ReplyMessages(ctx, send))
        self.processors = [
            LocalRegistration(ctx),
            ClientManageProcessor(ctx),
            ConsumerManageProcessor(ctx),
            QueryMessageProcessor(ctx),
            TopicAdmin(ctx),
            OffsetLookups(ctx),
            BrokerStatus(ctx),
            AdminBrokerProcessor(ctx),
            AclAdminProcessor(ctx, self.acl.file if self.acl is not None else None),
            AdminLookups(ctx),
            QueueInspection(ctx),
            TopicDeletion(ctx),
            ctx.queue_locks,
            TransactionHandlers(ctx, self.transactions),
            send_back,
            self._owned(RecallMessageProcessor(ctx)),
            send,
            self.pull,
            reply,
            DataServerReports(ctx, self.data_server.token, ctx.events),
        ]
        for processor in self.processors:
            processor.register(self.server)
        self.server.start()
        self._serving = True
        if self.config.is_slave:
            return  # a slave appends nothing: no transaction checks, no POP
        self.transactions.start(ctx.producers.live_connections)
        self._start_pop()

    def _start_pop(self) -> None:
        """POP pops, acks and revives on a master only (RocketMQ's revive service too): a
        slave answers its codes REQUEST_CODE_NOT_SUPPORTED until a promotion."""
        pop = PopService(self.context)
        processor = PopProcessor(self.context, pop)
        self._closing += [processor, pop]  # the state last: its journal is rewritten
        self.revive = ReviveService(self.context, pop, processor.wake)
        processor.register(self.server)
        self.processors.append(processor)

    def _owned(self, processor: T) -> T:
        """``processor``, closed at stop (after the server)."""
        self._closing.append(processor)
        return processor

    @property
    def address(self) -> str:
        """The broker's address (``brokerIP1`` and the data server's port): what the
        namesrvs advertise; empty until the data server serves."""
        return self.data_server.address if self.data_server is not None else ""

    def _address(self) -> str:
        return self.address

    def _config_changed(self) -> None:
        """The config was replaced: the data server reads its live keys again."""
        words = self.counters.words
        cn.publish(words, cn.CONFIG_VERSION, cn.load(words, cn.CONFIG_VERSION) + 1)

    @property
    def grpc_address(self) -> str:
        """The gRPC proxy's ``ip:port`` (empty: it does not run)."""
        return self.proxy.address if self.proxy is not None else ""

    def _spawn_thread(self, name: str, target: Any) -> None:
        t = threading.Thread(target=target, name=f"shmq-{name}", daemon=True)
        t.start()
        self._threads.append(t)

    # -- running ----------------------------------------------------------------------------

    def create_topic(self, cfg: TopicConfig) -> None:
        """Create or update a topic (``TopicPublisher.create``: the namesrvs learn it
        before the agents do)."""
        self.context.topic_publisher.create(cfg)

    def _housekeeping(self) -> None:
        last_persist = time.monotonic()
        last_reap = 0.0
        while not self._stop.is_set():
            wait(self.supervisor_sem, HOUSEKEEPING_S)
            if self._stop.is_set():
                break
            try:
                self._answer_topic_request()
                with self._role_lock:
                    self._watch_agents()
                self.data_server.watch()
                if self.proxy is not None:
                    self.proxy.watch()
                if self.metrics is not None:
                    self.metrics.watch()
                    self.metrics.answer(self.context)
                sync_state = self.registration.sync_state
                if sync_state is not None and sync_state.due():
                    self.registration.register_now()
                now = time.monotonic()
                if now - last_reap >= 1.0:
                    last_reap = now
                    self.clients.reap()
                    self.consumers.scan_expired()
                    self.gets.collect()
                    gets = self.gets.counts()
                    self.rates.sample(cn.load(self.counters.words, cn.MSGS_IN), gets)
                    self.stats_items.observe(self._topic_puts(), gets)
                if (now - last_persist) * 1000 >= self.config.flush_consumer_offset_interval:
                    last_persist = now
                    self._persist_offsets()
            except Exception:
                log.exception("housekeeping failed")

    def _topic_puts(self) -> dict[str, int]:
        """Per topic, the messages its consume queues hold or held (the sum of their max
        offsets), from housekeeping's own view of the queue table."""
        totals = self._queue_directory.topic_totals(qt.max_offsets(self.queue_seg.buf))
        return {topic.decode(): n for topic, n in totals.items()}

    def _persist_offsets(self) -> None:
        """Persist consumer offsets, and topics a full disk kept from being written
        (``TopicPublisher``), when they changed; a full disk is logged once (they stay
        dirty in memory and are written once space is back)."""
        try:
            self.offsets.persist_if_dirty()
            self.topics.persist_if_dirty()
        except OSError as exc:
            if not self._persist_failing:
                log.error("cannot persist consumer offsets or topics (retrying every %d ms): "
                          "%s", self.config.flush_consumer_offset_interval, exc)  # fmt: skip
            self._persist_failing = True
            return
        self._persist_failing = False

    def _answer_topic_request(self) -> None:
        words = self.counters.words
        seq, raw, queues = cn.read_topic_request(self.counters.buf, words)
        if seq == cn.load(words, cn.TOPIC_REQUEST_DONE):
            return
        topic = raw.decode("utf-8", "replace")
        if self.topics.get(topic) is None and self.config.auto_create_topic_enable:
            try:
                self.context.topic_publisher.create(self.topics.create_auto(topic, queues))
                log.info("topic %s auto-created", topic)
            except ShmqError as exc:
                log.warning("cannot auto-create topic %r: %s", topic, exc)
        cn.publish(words, cn.TOPIC_REQUEST_DONE, seq)
        self.group.wake("writer")  # it holds the topic's records until then

    def _watch_agents(self) -> None:
        for kind, proc in list(self.group.procs.items()):
            if proc.is_alive() or self._stop.is_set() or self._stop_requested:
                continue  # a SIGTERM to the whole group stops the agents too: not a death
            code = proc.exitcode
            now = time.monotonic()
            recent = [t for t in self._restarts[kind] if now - t < 60] + [now]
            self._restarts[kind] = recent
            words = self.counters.words
            cn.publish(words, cn.agent_word(kind, cn.RESTARTS), len(recent))
            log.error("%s agent (pid %s) died with exit code %s", kind, proc.pid, code)
            if kind == "writer":
                self._blame_ring(now)
            elif kind == "ha":
                self._forget_slaves()
            if len(recent) > self.config.agent_restart_max:
                self._halt(
                    f"the {kind} agent died {len(recent)} times within a minute (last exit code "
                    f"{code}) and no client input could be blamed (agentRestartMax "
                    f"{self.config.agent_restart_max})"
                )
                return
            proc.join(0)
            self._start_agent(kind)

    def _halt(self, reason: str) -> None:
        self.group.stop_reason = reason
        log.critical("stopping the broker: %s", reason)
        self.request_stop()
        self._stop.set()  # not a signal handler: the threads stop restarting agents now

    def _blame_ring(self, now: float) -> None:
        """The writer died while reading a producer's ring: the second time within a minute
        for the same ring, fence that ring (its producer's sends fail, naming why), so one
        producer's bytes cannot keep the writer, and every other producer, down."""
        words = self.counters.words
        # the dead writer's last words (its successor clears them when it starts)
        slot, gen = cn.load(words, cn.WRITER_RING) - 1, cn.load(words, cn.WRITER_RING_GEN)
        if slot < 0:
            return
        deaths = [t for t in self._ring_deaths.get((slot, gen), []) if now - t < 60] + [now]
        self._ring_deaths = {(slot, gen): deaths}  # only the latest ring matters
        write_offset = cn.load(words, cn.WRITE_OFFSET)  # the dead writer's last
        if len(deaths) >= 2 and self.clients.fence_producer(slot, gen, write_offset):
            log.error("producer ring %d.%d fenced: the writer died twice reading it", slot, gen)
            self._restarts["writer"] = self._restarts["writer"][:-2]  # those were its fault

    def _forget_slaves(self) -> None:
        """The HA agent died, and its slave connections with it: until its successor has
        slaves again, a SYNC_MASTER answers SLAVE_NOT_AVAILABLE at once (and ``ha-status``
        lists none), rather than have sends wait ``syncFlushTimeout`` on the dead agent's
        counters for an ack that cannot come."""
        cn.publish(self.counters.words, cn.HA_SLAVES, 0)
        ht.publish_rows(self.ha_table.words, [])

    def _become_master(self, decision: cm.Decision) -> None:
        """Promotion (controller mode): the slave's agents stop, the CommitLog end is the
        epoch's start, and the master's agents start on the same shared memory (the writer
        resumes at the published write offset). Then the broker registers as master."""
        epoch = decision.epoch
        log.warning("the controller elected this broker master at epoch %d", epoch)
        with self._role_lock:
            for kind in (k for k in STOP_ORDER if k in self.group.kinds):
                self._stop_agent(kind)
            start = cn.load(self.counters.words, cn.WRITE_OFFSET)
            self.registration.epoch = cm.Epoch(epoch, start)
            cm.save_epoch(self.root, self.registration.epoch)
            self.config = cm.config_for(self.config, decision)
            cn.publish(self.counters.words, cn.MASTER_HA_ADDR, 0)
            self._follow_sync_state(decision)
            self.group.kinds = agent_kinds(self.config)
            self._start_agents()
            self.transactions.start(self.context.producers.live_connections)
            self._start_pop()
        log.warning("master at epoch %d from offset %d", epoch, start)
        self.registration.register_all()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until a stop is requested (``request_stop``: a signal handler, the broker
        itself, another thread), at most ``timeout`` seconds; whether it was. The stop's
        first steps (the threads told, the register loop woken) run here, in the waiting
        thread, never in a signal handler."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._stop_requested:
            left = 0.2 if deadline is None else min(0.2, deadline - time.monotonic())
            if left <= 0:
                return False
            self._stop.wait(left)
        self._stop.set()
        if self.registration is not None:
            self.registration.register_now()  # ends the register loop's wait
        return True

    def request_stop(self) -> None:
        """Ask ``wait`` to return. It stores one flag and takes no lock, so it is safe in a
        signal handler however often a signal comes (a handler that set an Event could
        deadlock on the Event's lock held by the code it interrupted)."""
        self._stop_requested = True

    def stats(self) -> dict[str, Any]:
        """The runtime numbers GET_BROKER_RUNTIME_INFO answers (``broker_stats``)."""
        return broker_stats(self.context)

    # -- stop -------------------------------------------------------------------------------

    def stop(self) -> None:
        """Clean stop (idempotent); see the module docstring for the order."""
        if self._stopped:
            return
        self._stopped = True
        self._stop.set()
        if self.registration is not None:
            self.registration.register_now()  # the register loop waits on it
        if self.slave_sync is not None:
            self.slave_sync.wake()
        if hasattr(self, "counters"):
            cn.publish(self.counters.words, cn.STATE, cn.STATE_STOPPING)
        if self.data_server is not None:
            self.data_server.stop()  # no new TCP requests
        if self.proxy is not None:
            self.proxy.stop()  # no new gRPC requests
        if self.metrics is not None:
            self.metrics.stop()
        if self.transactions is not None:
            self.transactions.stop()  # before the writer: it appends through it
        if self.revive is not None:
            self.revive.close()  # it appends through the writer too
        clean = True
        for kind in (k for k in STOP_ORDER if k in self.group.kinds):
            clean &= self._stop_agent(kind)
        self.group.template.close()
        if hasattr(self, "counters") and cn.load(self.counters.words, cn.FLUSH_FAILED):
            log.error("a flush failed: abort kept, so the next start recovers from the disk")
            clean = False
        if self._serving:
            self.registration.unregister_all()
            self.server.stop()
        for processor in self._closing:
            processor.close()
        if self.transactions is not None:
            self.transactions.close()
        if self.context is not None:
            self.context.store.close()
        if self.client is not None:
            self.client.close()
        for t in self._threads:
            t.join(2)
        if hasattr(self, "offsets"):
            for table in (self.offsets, self.topics, self.subscription_groups):
                try:
                    table.persist()
                except OSError as exc:  # a full disk: the last persisted copy stays
                    log.error("cannot persist %s: %s", type(table).__name__, exc)
        if hasattr(self, "clients"):
            self.clients.close()
        for sem in self._sems:
            sem.close()
        for seg in self._segments:
            seg.destroy()
        unlink_prefix(self.names.prefix)
        if self._lease is not None:
            lock, abort = self._lease
            if clean:
                abort.remove()
            else:
                log.error("an agent did not stop cleanly: abort kept, recovery runs next start")
            lock.release()
        log.info("broker %s stopped", self.config.broker_name)

    def _stop_agent(self, kind: str) -> bool:
        proc = self.group.procs.pop(kind, None)
        if proc is None:
            return True
        if proc.is_alive():
            cn.publish(self.counters.words, cn.agent_word(kind, cn.STOP), 1)
            self.group.wake(kind)
            proc.join(AGENT_STOP_TIMEOUT_S)
        if proc.is_alive():
            log.error("%s agent did not stop in %.0f s: killed", kind, AGENT_STOP_TIMEOUT_S)
            proc.kill()
            proc.join(5)
            return False
        return proc.exitcode == 0
