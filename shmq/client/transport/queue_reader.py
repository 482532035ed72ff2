"""The consumers' data path: read a queue from an offset straight from the store's mapped
files, long-poll on the consumer's own semaphore when caught up, and keep offsets on the
broker (RocketMQ's plain ``DefaultMQPullConsumer`` calls). ``PushConsumer`` and
``PullConsumer`` are built on it; tools use it directly.

Each broker is read through a link with ``pull``, ``wait``, ``max_offset`` and ``wake``:
the shared-memory one here, or, for a broker whose store is not on this host (or with
``transport="tcp"``), ``tcp_pull.TcpConsumerLink`` (PULL_MESSAGE with long polling).

Which broker of a broker name (master, slaves) a queue is read from is decided per pull,
as RocketMQ's ``PullAPIWrapper``: the broker id the last TCP pull of the queue suggested
(``suggestWhichBrokerId``, the master by default), looked up in the latest route
(``BrokerQueues.find``: that broker, else the master, else a slave). So a consumer reads
from the slave while the master is gone (its route lists only the slave; a failed pull
refreshes the route at once) and from the master again once it is back; a master with
``slaveReadEnable`` sends a consumer that is far behind to the slave. Same-host links
make no such choice beyond the route: they read the mapped files of the master while it
is there (no page cache to spare on another machine, which is what the suggestion is
for); a same-host link to a broker that died or stopped is replaced at the next route
refresh (a restarted broker has new shared memory). Offsets are committed to the master;
while it is gone the offset store keeps them and commits them when it is back (RocketMQ's
``updateConsumeOffsetToBroker``), and a process that ends before (``shmq consume``) commits
them to the slave, as RocketMQ 4.9's clients do.

Example::

    with QueueReader("OrderReaders", "127.0.0.1:9876") as consumer:
        for mq in consumer.queues("Orders"):
            offset = max(consumer.committed(mq), 0)
            result = consumer.pull(mq, offset, max_nums=32, timeout=1.0)
            for msg in result.messages:
                print(msg.queue_offset, msg.body)
            consumer.commit(mq, result.next_begin_offset)
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
from collections.abc import Callable, Iterable

import numpy as np

from shmq.client.gc_freeze import freeze_startup_objects
from shmq.client.route import PERM_READ, BrokerQueues, RouteTable
from shmq.client.selector import MessageSelector
from shmq.client.transport.broker_link import BrokerLink
from shmq.client.transport.chooser import TransportChooser
from shmq.client.transport.tcp_pull import PULL_STATUSES, TcpConsumerLink
from shmq.client.types import MessageQueue, PullResult, PullStatus
from shmq.errors import ClientError, NoRouteError, ResponseError, ShmqError
from shmq.filter.sql92 import SqlFilter
from shmq.ipc import consumer_gets as cg
from shmq.ipc import counters as cn
from shmq.ipc import queue_table as qt
from shmq.ipc import registry as rg
from shmq.ipc.parking import Parking
from shmq.ipc.procs import pid_alive
from shmq.ipc.segment import Segment, open_semaphore, post
from shmq.message import MessageBatch
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RequestCode, ResponseCode
from shmq.remoting.security.credentials import Credentials
from shmq.remoting.security.tls import TlsOptions
from shmq.store.fetch import LOCAL, Fetch, QueueBounds, pull_response_code
from shmq.store.reader import StoreReader
from shmq.store.results import GetStatus, parse_tag_filter
from shmq.store.warm_up import warm_up_reads

# a tag expression's sorted hash codes and tags (None, None: every message)
TagFilter = tuple[np.ndarray | None, frozenset[str] | None]

MAX_PULL = 1024
MAX_BULK_PULL = 65536
SHORT_PULL = 64  # units of a pull whose sizes are summed in Python, not by numpy
MIN_OFFSET_FRESH_S = 1.0  # a pull result's min offset is at most this old
RETIRED_LINK_S = 60.0  # a link out of the route is closed once no pull can still use it


@functools.cache
def _warm_up() -> None:
    """Once per process: load the read path's kernels before the first pull needs them (a
    consumer's first messages would otherwise wait a few hundred ms for numba's cache)."""
    warm_up_reads()
    freeze_startup_objects()


def _fetched_bytes(fetch: Fetch) -> int:
    """The bytes of the records ``fetch`` took."""
    sizes = fetch.sizes  # a numpy sum costs ~1 µs: a paced consumer's pulls are short
    return sum(sizes.tolist()) if sizes.shape[0] <= SHORT_PULL else int(sizes.sum())


def _union(watches: list[list[int] | None]) -> list[int] | None:
    """The queue-table slots any of ``watches`` waits for (None: any queue)."""
    if len(watches) == 1:
        return watches[0]
    merged: set[int] = set()
    for slots in watches:
        if slots is None:
            return None
        merged.update(slots)
    return sorted(merged)


class _ConsumerLink:
    """The consumer's registration with one broker and its read-only view of the store."""

    def __init__(self, client: RemotingClient, address: str, group: str) -> None:
        self.link = BrokerLink(client, address, group, "consumer")
        info = self.link.info
        self.queues = Segment.attach(info["queues"], readonly=True)
        self.directory = qt.QueueDirectory(self.queues.buf, self.queues.words)
        # a memoryview: a max offset read is a Python int, not a numpy scalar to compare
        self.maxima = memoryview(qt.max_offsets(self.queues.buf))
        self._counters = memoryview(self.link.counters.words)  # what a pull reads, the same
        self.commitlog_file_size = info["mappedFileSizeCommitLog"]
        self.reader = StoreReader(
            info["storePathRootDir"], self.commitlog_file_size, info["consumeQueueFileSize"]
        )
        self.sem = open_semaphore(info["sem"])
        self.reg = self.link.registry.words
        self.base = rg.consumer_base(int(self.reg[rg.PRODUCERS]), info["slot"])
        self.parking = Parking(self.reg, self.base + rg.PARKED, self.sem)
        # the queue-table slots each parked thread waits for (None: any), whose union the
        # registry line publishes (``_park_watching``)
        self._watches: list[list[int] | None] = []
        self._watch_lock = threading.Lock()
        # the messages and record bytes read per queue-table slot, which the broker counts
        # as the group's gets (it sees no request per read); one lock for the threads of
        # this process
        self.gets_seg = Segment.attach(info["gets"])
        self.gets = memoryview(cg.client_row(self.gets_seg.words, info["slot"]))
        self._gets_lock = threading.Lock()
        self._wakes = 0  # raised by ``wake``: ends the waits under way
        # (topic, queue id) -> (min offset, good until)
        self._min_offsets: dict[tuple[str, int], tuple[int, float]] = {}
        # (topic, queue id) -> its queue-table slot, once published (a slot is never
        # reused for another queue while the broker runs): no lookup by topic bytes per read
        self._slots: dict[tuple[str, int], int] = {}
        self._unpublished: dict[tuple[str, int], int] = {}  # -> queues published at the look

    @property
    def address(self) -> str:
        return self.link.address

    @property
    def live(self) -> bool:
        """Whether the broker incarnation this link is registered with still runs (one that
        died or stopped leaves its mappings readable, but nothing new arrives in them)."""
        words = self.link.counters.words
        if cn.load(words, cn.STATE) == cn.STATE_STOPPING:
            return False
        return pid_alive(cn.load(words, cn.SUPERVISOR_PID))

    def max_offset(self, mq: MessageQueue) -> int:
        return self.slot_max(mq.topic, mq.queue_id)[1]

    def min_offset(self, mq: MessageQueue, max_offset: int, now: float) -> int:
        """The queue's min offset as the broker's GET_MIN_OFFSET answers it, read from the
        mapped files at most once a second per queue (a pull reads only what is stored
        either way; the value is what a pull result reports, as RocketMQ's does)."""
        known = self._min_offsets.get((mq.topic, mq.queue_id))
        if known is None or now >= known[1]:
            if max_offset <= 0:  # nothing stored (or no such queue): nothing to keep
                return 0
            cleaned = cn.load(self.link.counters.words, cn.MIN_PHYSICAL_OFFSET)
            low = self.reader.min_offset(mq.topic, mq.queue_id, max_offset, cleaned)
            known = self._min_offsets[(mq.topic, mq.queue_id)] = (low, now + MIN_OFFSET_FRESH_S)
        low = known[0]
        return low if low < max_offset else max_offset

    def slot(self, topic: str, queue_id: int) -> int:
        """The queue's slot in the queue table, -1 while it is not published (looked up
        again once more queues are: a watched queue without messages, such as the retry
        topic's, costs no lookup by topic bytes per wake-up)."""
        key = (topic, queue_id)
        slot = self._slots.get(key)
        if slot is None:
            published = int(self.queues.words[qt.COUNT])
            if self._unpublished.get(key) == published:
                return -1
            slot = self.directory.slot(topic.encode(), queue_id)
            if slot < 0:
                self._unpublished[key] = published
                return -1
            self._slots[key] = slot
        return slot

    def slot_max(self, topic: str, queue_id: int) -> tuple[int, int]:
        slot = self.slot(topic, queue_id)
        return slot, (int(self.maxima[slot]) if slot >= 0 else 0)

    def pull(
        self, mq: MessageQueue, offset: int, max_nums: int, codes, tags: frozenset[str] | None,
        timeout: float, bulk: bool, spin_s: float, sql: SqlFilter | None = None,
    ) -> PullResult:  # fmt: skip
        """Read ``mq`` from the mapped files by the store's rule (``store.fetch``, bounded
        by ``max_nums`` only), parking on the semaphore until ``timeout``. Units the tag
        filter skips, messages a SQL92 filter (``sql``) does not match, or whose records
        cleanup removed, are read past at once, as a TCP consumer pulls again at once on
        PULL_RETRY_IMMEDIATELY. The newest messages are read by the queue's ``QueueTail``,
        anything else by the store's whole rule."""
        now = time.monotonic()
        deadline = now + timeout
        reader = self.reader
        words = self._counters
        topic, queue_id = mq.topic, mq.queue_id
        tail = None if bulk or sql is not None else reader.tail(topic, queue_id)
        while True:
            slot = self.slot(topic, queue_id)
            max_offset = int(self.maxima[slot]) if slot >= 0 else 0
            low = self.min_offset(mq, max_offset, now)
            cleaned, end = words[cn.MIN_PHYSICAL_OFFSET], words[cn.WRITE_OFFSET]
            read = tail and tail.read(offset, max_nums, codes, low, max_offset, cleaned, end)
            if read is not None:
                msgs, next_offset, size = read
                if tags is not None:
                    msgs = [m for m in msgs if m.tags in tags]
                if msgs:
                    self._got(slot, len(msgs), size)
                    return PullResult(PullStatus.FOUND, next_offset, low, max_offset, msgs)
                if next_offset > offset:  # the filter skipped what it looked at: read on
                    offset = next_offset
                    continue
            bounds = QueueBounds(low, max_offset, cleaned, end, self.commitlog_file_size)
            if bulk or sql is not None:
                fetch = reader.fetch(topic, queue_id, offset, max_nums, codes, bounds, LOCAL)
                if sql is not None:  # skip what cannot match before decoding a message
                    fetch = reader.holding(topic, queue_id, fetch, sql.required)
                msgs = None
            else:  # the messages with the units, by one kernel call for the newest ones
                fetch, msgs = reader.fetch_messages(topic, queue_id, offset, max_nums, codes,
                                                    bounds)  # fmt: skip
            if fetch.status is GetStatus.FOUND:
                if bulk:
                    batch = reader.message_batch(topic, queue_id, fetch, tags)
                    if len(batch):
                        self._got(slot, len(batch), _fetched_bytes(fetch))
                        return PullResult(PullStatus.FOUND, fetch.next_begin_offset, low,
                                          max_offset, batch=batch)  # fmt: skip
                else:
                    if msgs is None:
                        msgs = reader.messages(topic, queue_id, fetch)
                    if tags is not None:
                        msgs = [m for m in msgs if m.tags in tags]
                    elif sql is not None:
                        msgs = [m for m in msgs if sql(m.properties)]
                    if msgs:
                        self._got(slot, len(msgs), _fetched_bytes(fetch))
                        return PullResult(PullStatus.FOUND, fetch.next_begin_offset, low,
                                          max_offset, msgs)  # fmt: skip
            elif (
                PULL_STATUSES[pull_response_code(fetch.status, offset)] is PullStatus.OFFSET_ILLEGAL
            ):
                return PullResult(PullStatus.OFFSET_ILLEGAL, fetch.next_begin_offset, low,
                                  max_offset)  # fmt: skip
            if fetch.next_begin_offset > offset:
                offset = fetch.next_begin_offset
                continue
            now = time.monotonic()
            if now >= deadline:
                status = (
                    PullStatus.NO_NEW_MSG if offset >= max_offset else PullStatus.NO_MATCHED_MSG
                )
                return PullResult(status, offset, low, max_offset)
            self._park(slot, mq, max_offset, deadline, spin_s)
            now = time.monotonic()

    def _got(self, slot: int, count: int, size: int) -> None:
        """Count ``count`` messages read and ``size`` bytes of the records read for them
        (as a TCP pull's body holds them: a tag or SQL92 mismatch found after decoding is
        in it); the messages first (``ipc.consumer_gets``)."""
        with self._gets_lock:
            self.gets[cg.GOT_MESSAGES, slot] += count
            self.gets[cg.GOT_BYTES, slot] += size

    def _park(self, slot: int, mq: MessageQueue, seen: int, deadline: float, spin_s: float):
        spin_end = time.perf_counter() + spin_s
        while time.perf_counter() < spin_end:
            if self.slot_max(mq.topic, mq.queue_id)[1] != seen:
                return
        self._park_watching(
            [slot] if slot >= 0 else None,
            lambda: self.slot_max(mq.topic, mq.queue_id)[1] != seen,
            max(0.0, min(deadline - time.monotonic(), 1.0)),
        )

    def _park_watching(
        self, slots: list[int] | None, done: Callable[[], bool], timeout: float
    ) -> bool:
        """``Parking.park`` of this thread, waiting for the queue-table ``slots`` (None: any
        queue). The process's one registry line says which queues should wake it: the
        union of what its parked threads wait for, so that a thread parking later never
        narrows it to its own queue, leaving a message on another's to wake nobody."""
        watches = self._watches
        with self._watch_lock:
            watches.append(slots)
            rg.set_watch(self.reg, self.base, _union(watches))
        try:
            return self.parking.park(done, timeout)
        finally:
            with self._watch_lock:
                watches.remove(slots)
                if watches:
                    rg.set_watch(self.reg, self.base, _union(watches))

    def wait(self, offsets: dict[MessageQueue, int], timeout: float) -> list[MessageQueue]:
        """Park until any of the queues has a message at or after its offset, or
        ``timeout`` passes or ``wake`` is called; the queues that have one (none: the time
        passed or a wake), as a TCP link's wait (``wait_slots``)."""
        mqs = list(offsets)
        keys = [(mq.topic, mq.queue_id) for mq in mqs]
        slots = [self.slot(topic, queue_id) for topic, queue_id in keys]
        found = self.wait_slots(keys, slots, list(offsets.values()), timeout)
        return [mqs[i] for i in found]

    def wait_slots(
        self, keys: list[tuple[str, int]], slots: list[int], offsets: list[int], timeout: float
    ) -> list[int]:
        """``wait`` on the queues ``keys`` (topic, queue id) whose queue-table slots are
        ``slots`` (-1: not published yet, looked up again, and kept in ``slots`` once
        found): the indices of those with a message at or after their offset in
        ``offsets``. Each wake-up reads each queue's max offset once, and what that found
        is the answer."""
        deadline = time.monotonic() + timeout
        wakes = self._wakes
        slot_of = self.slot
        maxima = self.maxima
        found: list[int] = []

        def ready() -> bool:
            found.clear()
            for i, slot in enumerate(slots):
                if slot < 0:  # not published when the wait began: look it up again
                    slot = slots[i] = slot_of(*keys[i])
                    if slot < 0:
                        continue
                if maxima[slot] > offsets[i]:
                    found.append(i)
            return bool(found) or self._wakes != wakes

        if timeout <= 0:
            return found if ready() else []
        left = timeout
        while True:  # a park checks ``ready`` once it is published as parked, then parks
            if self._park_watching(None, ready, min(left, 1.0)):
                return found
            left = deadline - time.monotonic()
            if left <= 0:
                return []

    def wake(self) -> None:
        """End this process's waits on the link: every thread parked in ``wait`` returns."""
        self._wakes += 1
        for _ in range(max(1, self.parking.count)):
            post(self.sem)

    def close(self) -> None:
        self.sem.close()
        self.reader.close()
        self.maxima = self.gets = self._counters = None
        self.queues.close()
        self.gets_seg.close()
        self.link.close()


class QueueReader:
    """Reads queues of any topic for ``group`` (registered with each broker it reads).

    ``spin_us``: how long a long-polling pull spins on the queue's max offset before
    parking on the consumer's semaphore. ``transport``: ``"auto"`` reads a broker's
    store through shared memory when it is on this host and with PULL_MESSAGE over TCP
    otherwise; ``"shm"`` or ``"tcp"`` force one. ``credentials`` and ``tls`` are its
    control client's (``self.client``), which every connection of the consumer takes."""

    def __init__(
        self,
        group: str,
        namesrv: str = "127.0.0.1:9876",
        *,
        spin_us: int = 20,
        transport: str = "auto",
        poll_name_server_interval: float = 30.0,
        credentials: Credentials | tuple[str, str] | None = None,
        tls: bool | TlsOptions | None = None,
    ) -> None:
        _warm_up()
        self.group = group
        self.spin_s = spin_us / 1e6
        self.client = RemotingClient(credentials=credentials, tls=tls)
        self.routes = RouteTable(namesrv, self.client, refresh_s=poll_name_server_interval)
        self.transport = TransportChooser(self.client, transport)
        self._links: dict[str, _ConsumerLink | TcpConsumerLink] = {}  # by broker address
        self._retired: list[tuple[float, _ConsumerLink | TcpConsumerLink]] = []
        self._brokers: dict[str, BrokerQueues] = {}  # by broker name, from the latest route
        self._suggested: dict[MessageQueue, int] = {}  # broker id to pull each queue from
        self._sql_checked: set[tuple[str, str]] = set()  # (address, expression) accepted
        self._lock = threading.Lock()
        self._wakes = 0  # raised by ``wake``: ends the waits under way
        # the link each queue is read through, as ``_link`` last chose it; emptied whenever
        # what it chose from changes (routes, links, suggested brokers): a paced consumer
        # pulls and waits once per message, and the choice is the same every time
        self._queue_links: dict[MessageQueue, _ConsumerLink | TcpConsumerLink] = {}
        self.links_version = 0  # raised with each new ``_queue_links`` (``Follower``)
        # a tag expression -> (its sorted hash codes, its tags), both None for "*"
        self._tag_filters: dict[str | None, TagFilter] = {}

    def queues(self, topic: str) -> list[MessageQueue]:
        """The topic's readable queues, sorted."""
        out = []
        brokers = self.routes.brokers(topic)
        with self._lock:
            for b in brokers:
                self._brokers[b.broker_name] = b
                if b.perm & PERM_READ:
                    out += [MessageQueue(topic, b.broker_name, q) for q in range(b.read_queue_nums)]
            self._retire_links()
        return sorted(out)

    def _retire_links(self) -> None:
        """Links to addresses no route lists any more, and same-host links to a broker
        that is gone (a restarted one gets a new link), are closed ``RETIRED_LINK_S``
        later (call with ``_lock``)."""
        now = time.monotonic()
        known = {a for b in self._brokers.values() for _, a in b.addrs}
        for address in [a for a, link in self._links.items()
                        if a not in known or not link.live]:  # fmt: skip
            self._retired.append((now, self._links.pop(address)))
        while self._retired and now - self._retired[0][0] > RETIRED_LINK_S:
            self._retired.pop(0)[1].close()
        self._forget_links()  # after the routes and links changed

    def _broker(self, mq: MessageQueue) -> BrokerQueues:
        broker = self._brokers.get(mq.broker_name)
        if broker is None:
            self.queues(mq.topic)
            broker = self._brokers.get(mq.broker_name)
        if broker is None:
            raise ClientError(f"no address known for broker {mq.broker_name}")
        return broker

    def pull_address(self, mq: MessageQueue) -> str:
        """The broker ``mq`` is pulled from next: the suggested one, as the route has it."""
        return self._broker(mq).find(self._suggested.get(mq, 0))

    def _link(self, mq: MessageQueue) -> _ConsumerLink | TcpConsumerLink:
        link = self._queue_links.get(mq)
        if link is not None:
            return link
        queue_links = self._queue_links
        address = self.pull_address(mq)
        with self._lock:
            link = self._links.get(address)
            if link is None:
                if self.transport.tcp(address):
                    link = TcpConsumerLink(self.client, address, self.group)
                else:
                    link = _ConsumerLink(self.client, address, self.group)
                self._links[address] = link
            if queue_links is self._queue_links:  # nothing it was chosen from changed
                queue_links[mq] = link
            return link

    def _forget_links(self) -> None:
        """What ``_link`` chose may have changed: choose afresh (call with ``_lock``, after
        the change: a ``_link`` that began before keeps its choice out of the new table)."""
        self._queue_links = {}
        self.links_version += 1

    def _forget_route(self, mq: MessageQueue) -> None:
        """A pull failed: take the topic's route afresh from the namesrv at the next pull
        (the broker may be gone, its slave serving instead)."""
        self.routes.invalidate(mq.topic)
        with self._lock:
            self._brokers.pop(mq.broker_name, None)
            self._forget_links()

    def pull(
        self,
        mq: MessageQueue,
        offset: int,
        max_nums: int = 32,
        expression: str | MessageSelector | None = "*",
        timeout: float = 0.0,
    ) -> PullResult:
        """Up to ``max_nums`` (≤ 1,024) messages from ``offset``; when none is there yet,
        wait up to ``timeout`` seconds for one (long polling). Tag filtering as RocketMQ:
        hash in the consume queue, then the tag string here. A SQL92 ``MessageSelector``
        is evaluated here on shared memory, by the broker over TCP; the broker must have
        ``enablePropertyFilter=true`` (asked once per broker by CHECK_CLIENT_CONFIG)."""
        return self._pull(mq, offset, min(max_nums, MAX_PULL), expression, timeout, False)

    def pull_bulk(
        self,
        mq: MessageQueue,
        offset: int,
        max_nums: int = 4096,
        expression: str | MessageSelector | None = "*",
        timeout: float = 0.0,
    ) -> PullResult:
        """``pull`` for bulk traffic (the consume side of ``Producer.send_bulk``): up to
        ``max_nums`` (≤ 65,536) messages as one ``MessageBatch`` in ``result.batch``
        (``result.messages`` stays empty), their bodies gathered by one kernel call. With a
        SQL92 selector the expression reads each message's properties, so it is ``pull``'s
        messages (at most 1,024) made into one batch."""
        return self._pull(mq, offset, min(max_nums, MAX_BULK_PULL), expression, timeout, True)

    def _pull(
        self,
        mq: MessageQueue,
        offset: int,
        max_nums: int,
        expression: str | MessageSelector | None,
        timeout: float,
        bulk: bool,
    ) -> PullResult:
        max_nums = max(1, max_nums)
        sql = None
        if isinstance(expression, MessageSelector):
            sql = expression.sql
            if sql is None:
                expression = expression.expression
            elif bulk:  # the expression reads each record's properties: decode, then batch
                found = self._pull(mq, offset, max_nums, expression, timeout, False)
                batch = MessageBatch.of_messages(mq.topic, mq.queue_id, found.messages)
                return dataclasses.replace(found, messages=[], batch=batch)
        if sql is None:
            codes, tags = self._tag_filter(expression)
        else:
            codes = tags = None
        try:
            link = self._link(mq)
            if sql is not None:
                self._check_sql(self.pull_address(mq), mq.topic, expression)
            if isinstance(link, _ConsumerLink):
                return link.pull(mq, offset, max_nums, codes, tags, timeout, bulk, self.spin_s,
                                 sql)  # fmt: skip
            result = link.pull(mq, offset, max_nums, expression, tags, timeout, bulk)
        except ShmqError:
            self._forget_route(mq)
            raise
        if self._suggested.get(mq, 0) != result.suggest_which_broker_id:
            with self._lock:
                self._suggested[mq] = result.suggest_which_broker_id
                self._forget_links()
        return result

    def _tag_filter(self, expression: str | None) -> TagFilter:
        """``(sorted tag hash codes, tags)`` of a tag expression, ``(None, None)`` for all
        messages; parsed once per expression."""
        found = self._tag_filters.get(expression)
        if found is None:
            codes = parse_tag_filter(expression)
            tags = None if codes is None else frozenset(t.strip() for t in expression.split("||"))
            found = (codes, tags)
            if len(self._tag_filters) < 1024:  # expressions come from subscriptions: few
                self._tag_filters[expression] = found
        return found

    def _check_sql(self, address: str, topic: str, selector: MessageSelector) -> None:
        """CHECK_CLIENT_CONFIG of a SQL92 selector, once per broker and expression, as a
        RocketMQ push consumer asks at start: a broker without ``enablePropertyFilter``
        refuses it (SYSTEM_ERROR), as it refuses such a PULL_MESSAGE; raises
        ``ResponseError``. A consumer on shared memory reads without a pull, so this is
        where it learns the broker's answer."""
        key = (address, selector.expression)
        if key in self._sql_checked:
            return
        sub = {
            "topic": topic,
            "subString": selector.expression,
            "expressionType": "SQL92",
            "tagsSet": [],
            "codeSet": [],
            "subVersion": 0,
            "classFilterMode": False,
        }
        body = {"clientId": "", "group": self.group, "subscriptionData": sub}
        self.client.invoke_json(address, RequestCode.CHECK_CLIENT_CONFIG, {}, body)
        self._sql_checked.add(key)

    def wait(self, offsets: dict[MessageQueue, int], timeout: float) -> list[MessageQueue]:
        """Park until any of the queues has a message at or after its offset in
        ``offsets``, or ``timeout`` seconds pass, or ``wake`` is called; the queues that
        have one (none: the time passed or a wake), so a caller pulls only those. Queues
        of several brokers are waited on in turns of 10 ms."""
        links = [self._link(mq) for mq in offsets]
        if links and links.count(links[0]) == len(links):  # the usual case: one broker
            return links[0].wait(offsets, timeout)
        by_link: dict = {}
        for (mq, offset), link in zip(offsets.items(), links, strict=True):
            by_link.setdefault(link, {})[mq] = offset
        deadline = time.monotonic() + timeout
        wakes = self._wakes
        while True:
            for link, offs in by_link.items():
                left = deadline - time.monotonic()
                ready = link.wait(offs, max(0.0, min(left, 0.01)))
                if ready:
                    return ready
            if time.monotonic() >= deadline or self._wakes != wakes:
                return []

    def follow(self, mqs: Iterable[MessageQueue]) -> Follower | None:
        """A ``Follower`` of ``mqs`` when they are all read through one broker whose
        store is on this host, else None (``pull`` and ``wait`` them)."""
        mqs = list(mqs)
        links = {id(link): link for link in map(self._link, mqs)}
        if len(links) != 1:
            return None
        (link,) = links.values()
        return Follower(self, link, mqs) if isinstance(link, _ConsumerLink) else None

    # -- offsets on the broker --------------------------------------------------------------

    def committed(self, mq: MessageQueue) -> int:
        """The group's committed offset of ``mq`` on the broker, -1 when there is none
        (QUERY_NOT_FOUND; for a group without one on a queue that starts at 0 with its first
        message in memory, the broker answers 0, as RocketMQ 4.9's does)."""
        try:
            response, _ = self.client.invoke_json(
                self.address(mq),  # the master, else a slave (synchronized from it)
                RequestCode.QUERY_CONSUMER_OFFSET,
                {"consumerGroup": self.group, "topic": mq.topic, "queueId": mq.queue_id},
            )
        except ResponseError as exc:
            if exc.code == ResponseCode.QUERY_NOT_FOUND:
                return -1
            raise
        return int(response.ext_fields["offset"])

    def commit(self, mq: MessageQueue, offset: int, *, slave_if_no_master: bool = False) -> bool:
        """Store ``offset`` (the next one to consume) for the group on the broker's master;
        True when it went there. While the route has no master: ``NoRouteError`` (a
        ``PushConsumer`` keeps the offset and commits it once the master is back), or with
        ``slave_if_no_master`` it goes to a slave and False is returned, as RocketMQ 4.9's
        ``updateConsumeOffsetToBroker`` does (``findBrokerAddressInAdmin``): for a process
        that ends before the master is back, so that a consumer of the group resumes there
        meanwhile; the master's table replaces the slave's once it is back
        (``SlaveSynchronize``)."""
        broker = self._broker(mq)
        address = broker.master or (broker.address if slave_if_no_master else "")
        if not address:
            raise NoRouteError(f"broker {mq.broker_name} has no master in the route (the"
                               " offset is committed once it is back)")  # fmt: skip
        self.client.invoke_json(
            address,
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {
                "consumerGroup": self.group,
                "topic": mq.topic,
                "queueId": mq.queue_id,
                "commitOffset": offset,
            },
        )
        return address == broker.master

    def max_offset(self, mq: MessageQueue) -> int:
        return self._link(mq).max_offset(mq)

    def min_offset(self, mq: MessageQueue) -> int:
        """The smallest offset still stored in ``mq`` (above 0 after cleanup)."""
        response, _ = self.client.invoke_json(
            self.address(mq),
            RequestCode.GET_MIN_OFFSET,
            {"topic": mq.topic, "queueId": mq.queue_id},
        )
        return int(response.ext_fields["offset"])

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The offset of the first message of ``mq`` stored at or after ``timestamp_ms``
        (the max offset when there is none)."""
        response, _ = self.client.invoke_json(
            self.address(mq),
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
            {"topic": mq.topic, "queueId": mq.queue_id, "timestamp": timestamp_ms},
        )
        return int(response.ext_fields["offset"])

    def address(self, mq: MessageQueue) -> str:
        """The control address of the broker holding ``mq``: its master, or a slave while
        the master is gone."""
        return self._broker(mq).address

    def wake(self) -> None:
        """Wake the threads parked in ``pull`` or ``wait``; a ``wait`` returns (shutdown, a
        rebalance, a queue out of flow control)."""
        self._wakes += 1
        with self._lock:
            links = list(self._links.values())
        for link in links:
            link.wake()

    def close(self) -> None:
        with self._lock:
            for link in [*self._links.values(), *(link for _, link in self._retired)]:
                link.close()
            self._links.clear()
            self._retired.clear()
            self._forget_links()
        self.client.close()

    def __enter__(self) -> QueueReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Follower:
    """The queues a pull thread reads to their end and waits on, all through one broker
    whose store is on this host: the link, and each queue's slot, chosen once
    (``QueueReader.follow``) rather than for each message, as ``QueueReader.pull`` and
    ``wait`` choose them. A push consumer that keeps up pulls and waits once per message,
    and those choices were ~3 µs of its ~30 µs of Python per message. It stands for its
    queues while the reader's links are the ones it chose from (``follows``)."""

    __slots__ = ("_reader", "index", "keys", "link", "mqs", "slots", "version")

    def __init__(self, reader: QueueReader, link: _ConsumerLink, mqs: list[MessageQueue]):
        self._reader = reader
        self.version = reader.links_version
        self.link = link
        self.mqs = tuple(mqs)
        self.index = {mq: i for i, mq in enumerate(mqs)}
        self.keys = [(mq.topic, mq.queue_id) for mq in mqs]
        self.slots = [link.slot(topic, queue_id) for topic, queue_id in self.keys]

    def follows(self, mqs: Iterable[MessageQueue]) -> bool:
        """Whether it stands for ``mqs`` (in its order) through the reader's current links."""
        return self.version == self._reader.links_version and tuple(mqs) == self.mqs

    def pull(
        self, mq: MessageQueue, offset: int, max_nums: int, expression: str | MessageSelector | None
    ) -> PullResult | None:
        """``QueueReader.pull`` of ``mq`` without a wait; None when ``mq`` is not one of
        its queues, the reader's links changed, or a SQL92 selector reads it: pull it
        through the reader then."""
        reader = self._reader
        if self.version != reader.links_version or mq not in self.index:
            return None
        if isinstance(expression, MessageSelector):
            if expression.sql is not None:
                return None
            expression = expression.expression
        codes, tags = reader._tag_filter(expression)
        max_nums = max(1, min(max_nums, MAX_PULL))
        try:
            return self.link.pull(mq, offset, max_nums, codes, tags, 0.0, False, 0.0)
        except ShmqError:
            reader._forget_route(mq)
            raise

    def wait(self, offsets: dict[MessageQueue, int], timeout: float) -> list[MessageQueue]:
        """``QueueReader.wait`` on its queues; ``offsets`` has them in its order."""
        found = self.link.wait_slots(self.keys, self.slots, list(offsets.values()), timeout)
        return [self.mqs[i] for i in found]
