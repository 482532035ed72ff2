"""RocketMQ 5's ``SimpleConsumer``: the application receives messages, and acks each one
(or changes how long it stays invisible) by its receipt handle; the broker keeps the
group's offsets and brings back what is not acked in time (POP consumption).

There is no rebalance: every ``receive`` is a POP_MESSAGE of all queues of one subscribed
topic on one broker (queueId −1, the broker's queue locks share them among the group's
members), round robin over the subscribed topics and their brokers, long polling up to
``await_duration``. The group is heartbeated as RocketMQ 5's remoting POP consumer does
(``CONSUME_POP``, clustering). A popped message is invisible to the group for the invisible
duration; acked, it is done; else it comes back (its ``delivery_attempt`` one higher) from
the group's POP retry topic. With ``fifo=True`` the pops are orderly: a queue gives out no
message while one it gave out before is neither acked nor visible again, so the messages
of one message group (one queue) are received in order.

On the broker's host the data path is shared memory, as for the other consumers: the POP
carries shmq's ``shmqLocal`` and is answered with the header alone (which offsets of which
queues were taken), and the client reads those records from the store's files itself
(``pop.messages``). Over TCP (another host, or ``transport="tcp"``) the records come in the
response's body. Both give the same messages.

Example::

    with SimpleConsumer("Billing", "127.0.0.1:9876", subscriptions={"Orders": "Paid"},
                        await_duration=10) as consumer:
        consumer.start()
        for msg in consumer.receive(16, invisible_duration=30):
            bill(msg.body)
            consumer.ack(msg)
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence

from prometheus_client import CollectorRegistry

from shmq.client.consumer.base import ConsumerBase
from shmq.client.consumer.pop.batch import PopBatch
from shmq.client.consumer.pop.messages import (
    body_messages,
    messages_batch,
    store_batch,
    store_messages,
)
from shmq.client.consumer.pop.receipt import AckKey, PopHeader, ack_key, changed
from shmq.client.consumer.pop.requests import (
    INIT_MODE_MAX,
    INIT_MODE_MIN,
    LOCAL_MAX_MSG_NUMS,
    MAX_MSG_NUMS,
    ack_request,
    batch_ack_request,
    change_invisible_request,
    pop_request,
)
from shmq.client.consumer.subscription import Subscription
from shmq.client.metrics import ClientMetrics, client_id
from shmq.client.route import PERM_READ
from shmq.client.selector import MessageSelector
from shmq.client.transport.tcp_pull import SUSPEND_SLACK_S
from shmq.client.types import ConsumeFromWhere, MessageModel, MessageQueue
from shmq.codec import pull_body
from shmq.errors import ClientError, ConfigError, NoRouteError, RemotingError, ResponseError
from shmq.message import MessageExt
from shmq.pop_receipt import Receipt, parse_receipt
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode, check_response
from shmq.remoting.security.credentials import Credentials
from shmq.remoting.security.tls import TlsOptions
from shmq.store.reader import StoreReader

Rc = ResponseCode
# what a POP that found nothing is answered with (PULL_NOT_FOUND: RocketMQ's client reads it
# as POLLING_NOT_FOUND too)
NOTHING_POPPED = frozenset({Rc.NO_MESSAGE, Rc.POLLING_TIMEOUT, Rc.PULL_NOT_FOUND})

_Target = tuple[Subscription, str, str]  # subscription, broker name, address
_Popped = tuple[Subscription, str, StoreReader | None, PopHeader, bytes]


def _seconds(name: str, value: float, low: float) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or value < low:
        raise ConfigError(f"{name} must be a number of seconds ≥ {low:g}, not {value!r}")
    return float(value)


def _check_num(n: int, limit: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= limit:
        raise ConfigError(f"max_message_num must be in [1, {limit}], not {n!r}")


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


class SimpleConsumer(ConsumerBase):
    """A POP consumer of ``group`` (see the module docstring). ``subscriptions``: topic →
    tag expression (``*``, ``TagA || TagB``) or ``MessageSelector`` (``by_sql``: the broker
    pops only the messages a SQL92 expression matches); ``await_duration``: how long a ``receive``
    waits for a message (seconds, long polling on the broker; 0: answer at once);
    ``invisible_duration``: how long received messages stay invisible unless a call says
    otherwise; ``consume_from_where``: where a group that never consumed a queue starts
    (``FIRST_OFFSET``: its first message, else its end); ``transport``: ``"auto"`` (shared
    memory on the broker's host, else TCP), ``"tcp"`` or ``"shm"``; ``credentials`` and
    ``tls`` as every consumer's (``ConsumerBase``). ``metrics`` (True: the process's default
    ``prometheus_client`` registry, or a ``CollectorRegistry``) records RocketMQ 5's
    ``rocketmq_delivery_latency`` for what ``receive`` and ``receive_batch`` return, as
    RocketMQ 5's SimpleConsumer does (it has no listener to time; ``shmq.client.metrics``).

    Example, bulk receive and one batch ack per pop::

        consumer = SimpleConsumer("Audit", subscriptions={"Orders": "*"}, await_duration=5)
        consumer.start()
        batch = consumer.receive_batch(32)
        for body in batch:
            audit(body)
        consumer.ack_batch(batch)
        consumer.shutdown()
    """

    consume_type = "CONSUME_POP"

    def __init__(
        self,
        group: str,
        namesrv: str = "127.0.0.1:9876",
        *,
        subscriptions: Mapping[str, str | MessageSelector | None] | None = None,
        await_duration: float = 20.0,
        invisible_duration: float = 60.0,
        fifo: bool = False,
        consume_from_where: ConsumeFromWhere | str = ConsumeFromWhere.LAST_OFFSET,
        transport: str = "auto",
        heartbeat_interval: float = 30.0,
        poll_name_server_interval: float = 30.0,
        instance_name: str = "DEFAULT",
        credentials: Credentials | tuple[str, str] | None = None,
        tls: bool | TlsOptions | None = None,
        metrics: bool | CollectorRegistry = False,
    ) -> None:
        super().__init__(group, namesrv, message_model=MessageModel.CLUSTERING,
                         consume_from_where=consume_from_where,
                         heartbeat_interval=heartbeat_interval, instance_name=instance_name,
                         transport=transport,
                         poll_name_server_interval=poll_name_server_interval,
                         credentials=credentials, tls=tls)  # fmt: skip
        self.await_duration = _seconds("await_duration", await_duration, 0)
        self.invisible_duration = _seconds("invisible_duration", invisible_duration, 0.001)
        self.fifo = bool(fifo)
        for topic, expression in (subscriptions or {}).items():
            self.subscribe(topic, expression)
        self._turn = 0  # the next target of the round robin
        self._stores: dict[str, StoreReader | None] = {}  # by address; None: over TCP
        self._store_lock = threading.Lock()  # the store readers are not thread-safe
        self._metrics = ClientMetrics.of(metrics)  # None when off
        self.metrics_client_id = client_id(group)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Heartbeat the group to the subscribed topics' brokers; ``receive`` may follow."""
        self._start_base(f"shmq-simple-{self.group}")

    def close(self) -> None:
        """Leave the group; messages received and not acked come back after their
        invisible time."""
        if self._closed:
            return
        self._closed = True
        if self._started:
            self._stop_base()
        with self._store_lock:
            for store in self._stores.values():
                if store is not None:
                    store.close()
            self._stores.clear()

    shutdown = close

    def do_rebalance(self) -> None:
        """Nothing to do: a POP of queueId −1 lets the broker share the queues."""

    def _holdings(self) -> tuple[MessageQueue, ...]:
        return ()

    def _reset_offsets(self, topic: str, table: dict[MessageQueue, int]) -> None:
        """An admin reset the group's offsets: a POP group's offsets live on the broker
        only, which has taken the reset already."""

    # -- receiving ---------------------------------------------------------------------------

    def receive(
        self, max_message_num: int = 16, invisible_duration: float | None = None
    ) -> list[MessageExt]:
        """Up to ``max_message_num`` (≤ 32) messages, each with its receipt handle,
        invisible to the group for ``invisible_duration`` seconds (default: the
        consumer's); waits up to ``await_duration`` for the first; [] when none came."""
        _check_num(max_message_num, MAX_MSG_NUMS)
        popped = self._pop(max_message_num, invisible_duration)
        if popped is None:
            return []
        sub, broker, store, header, body = popped
        if store is not None and not body:
            with self._store_lock:
                msgs = store_messages(store, header, broker, sub.topic, self.group)
        else:
            msgs = body_messages(body, header, broker, sub.topic)
        kept = sub.filter(msgs)
        if len(kept) < len(msgs):  # two tags share a hash: not this subscription's
            matched = {id(m) for m in kept}
            self.ack_batch([m for m in msgs if id(m) not in matched])
        if self._metrics is not None and kept:
            self._metrics.arrived(sub.topic, self.metrics_client_id, self.group,
                                  [m.store_timestamp for m in kept])  # fmt: skip
        return kept

    def receive_batch(
        self, max_message_num: int = MAX_MSG_NUMS, invisible_duration: float | None = None
    ) -> PopBatch:
        """``receive`` in bulk: one pop's messages as a ``PopBatch`` (columns, no object per
        message; on the broker's host their bodies are gathered from the store by one
        kernel call per queue), acked with one ``ack_batch``; empty when none came. On the
        broker's host one pop takes up to 1,024 messages (shmq's local pop), over TCP up
        to 32 (a larger ``max_message_num`` is cut to that)."""
        _check_num(max_message_num, LOCAL_MAX_MSG_NUMS)
        popped = self._pop(max_message_num, invisible_duration)
        if popped is None:
            return PopBatch(self._any_topic(), "", None, [])
        sub, broker, store, header, body = popped
        if store is not None and not body:
            with self._store_lock:
                batch = store_batch(store, header, broker, sub.topic, self.group, sub.tags)
        else:
            batch = messages_batch(sub.filter(body_messages(body, header, broker, sub.topic)),
                                   header, broker, sub.topic)  # fmt: skip
        left_out = batch.left_out()
        if left_out:
            self._batch_ack(broker, left_out)
        if self._metrics is not None and len(batch):
            self._metrics.arrived(sub.topic, self.metrics_client_id, self.group,
                                  batch.store_timestamps.tolist())  # fmt: skip
        return batch

    def _any_topic(self) -> str:
        subs = self.subscriptions()
        return subs[0].topic if subs else ""

    def _targets(self) -> list[_Target]:
        """Every (subscription, readable broker) pair, in a stable order."""
        assert self.instance is not None
        out = []
        for sub in sorted(self.subscriptions(), key=lambda s: s.topic):
            for b in self.instance.routes.brokers(sub.topic):
                if b.perm & PERM_READ and (b.master or b.address):
                    out.append((sub, b.broker_name, b.master or b.address))
        return out

    def _pop(self, max_message_num: int, invisible_duration: float | None) -> _Popped | None:
        """POP_MESSAGE of the next target; None when it found nothing (or the consumer was
        shut down while it waited)."""
        if not self._started or self._closed:
            raise ClientError("receive needs a started, open consumer")
        invisible = (
            self.invisible_duration
            if invisible_duration is None
            else _seconds("invisible_duration", invisible_duration, 0.001)
        )
        targets = self._targets()
        if not targets:
            raise NoRouteError(f"group {self.group}: no readable broker serves a subscribed "
                               "topic (subscribe to one first)")  # fmt: skip
        sub, broker, address = targets[self._turn % len(targets)]
        self._turn += 1
        store = self._store(address)
        if store is None:
            max_message_num = min(max_message_num, MAX_MSG_NUMS)
        init = INIT_MODE_MIN if self.consume_from_where is ConsumeFromWhere.FIRST_OFFSET else (
            INIT_MODE_MAX)  # fmt: skip
        request = pop_request(self.group, sub.topic, sub.expression, max_message_num,
                              _ms(invisible), _ms(self.await_duration), int(time.time() * 1000),
                              init, self.fifo, store is not None,
                              sub.expression_type)  # fmt: skip
        try:
            response = self._invoke(address, request, self.await_duration + SUSPEND_SLACK_S)
        except RemotingError:
            if self._closed:
                return None
            raise
        if response.code in NOTHING_POPPED:
            return None
        if response.code != Rc.SUCCESS:
            raise ResponseError(response.code, f"POP of {sub.topic} for group {self.group} "
                                f"from {broker}: {response.remark}")  # fmt: skip
        return sub, broker, store, PopHeader.parse(response.ext_fields), bytes(response.body)

    def _store(self, address: str) -> StoreReader | None:
        """The store reader of the broker at ``address`` when it is on this host (the
        transport chooser's rule), else None: its pops bring their records over TCP."""
        with self._store_lock:
            if address in self._stores:
                return self._stores[address]
        assert self.instance is not None
        reader = self.instance.reader
        store = None
        if reader.transport.tcp(address):
            pull_body.warm_up()
        else:
            _, info = reader.client.invoke_json(address, RequestCode.GET_STORE_INFO)
            store = StoreReader(info["storePathRootDir"], int(info["mappedFileSizeCommitLog"]),
                                int(info["consumeQueueFileSize"]))  # fmt: skip
        with self._store_lock:
            if self._closed or address in self._stores:
                if store is not None:
                    store.close()
                return self._stores.get(address)
            self._stores[address] = store
        return store

    def _invoke(
        self, address: str, request: RemotingCommand, timeout: float | None = None
    ) -> RemotingCommand:
        """``request`` on the group's connection to the broker (the heartbeat's)."""
        if self.instance is None or self._closed:
            raise ClientError("the consumer is not started or is shut down")
        return self.instance.channel(address).invoke(request, timeout)

    # -- acks and invisibility ---------------------------------------------------------------

    def _handle(self, msg: MessageExt) -> Receipt:
        handle = msg.receipt_handle
        if handle is None:
            raise ClientError(f"{msg!r} has no receipt handle: it was not received by a "
                              "SimpleConsumer")  # fmt: skip
        return parse_receipt(handle)

    def _address(self, topic: str, broker_name: str) -> str:
        """The master of ``broker_name`` (acks change a checkpoint: the master's)."""
        assert self.instance is not None
        for b in self.instance.routes.brokers(topic):
            if b.broker_name == broker_name and (b.master or b.address):
                return b.master or b.address
        raise NoRouteError(f"no route to broker {broker_name} of topic {topic}")

    def ack(self, msg: MessageExt) -> None:
        """The message is consumed: it does not come back (ACK_MESSAGE). An ack after its
        invisible time ended may be too late: it may have come back already."""
        handle = self._handle(msg)
        request = ack_request(self.group, handle.real_topic(msg.topic, self.group), handle)
        address = self._address(msg.topic, handle.broker_name)
        check_response(self._invoke(address, request))

    def ack_batch(self, messages: Sequence[MessageExt] | PopBatch) -> None:
        """``ack`` of many messages (received messages, or a ``receive_batch``'s batch) in
        one BATCH_ACK_MESSAGE per broker."""
        if isinstance(messages, PopBatch):
            if len(messages):
                self._batch_ack(messages.broker_name, messages.acks())
            return
        by_broker: dict[str, dict[AckKey, list[int]]] = defaultdict(lambda: defaultdict(list))
        for msg in messages:
            handle = self._handle(msg)
            by_broker[handle.broker_name][ack_key(msg.topic, handle)].append(handle.queue_offset)
        for broker, acks in by_broker.items():
            self._batch_ack(broker, acks)

    def _batch_ack(self, broker: str, acks: Mapping[AckKey, list[int]]) -> None:
        topic = next(iter(acks))[0]
        response = self._invoke(self._address(topic, broker),
                                batch_ack_request(self.group, broker, acks))  # fmt: skip
        if response.code not in (Rc.SUCCESS, Rc.NO_MESSAGE):
            raise ResponseError(response.code, f"batch ack of group {self.group} on {broker}: "
                                f"{response.remark}")  # fmt: skip

    def change_invisible_duration(self, msg: MessageExt, invisible_duration: float) -> None:
        """Make the message visible again ``invisible_duration`` seconds from now (0: at
        once, a negative acknowledgement); its receipt handle is replaced by the new one
        (the old one no longer acks it)."""
        seconds = _seconds("invisible_duration", invisible_duration, 0)
        handle = self._handle(msg)
        request = change_invisible_request(self.group, handle.real_topic(msg.topic, self.group),
                                           handle, _ms(seconds))  # fmt: skip
        response = check_response(self._invoke(self._address(msg.topic, handle.broker_name),
                                               request))  # fmt: skip
        msg.receipt_handle = changed(handle, response.ext_fields).encode()
