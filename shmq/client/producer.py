"""The producer: routes from the namesrv, one shared-memory ring per broker, sync sends.

Example::

    with Producer("OrderProducers", "127.0.0.1:9876") as producer:
        result = producer.send(Message("Orders", b"order 42 paid", tags="Paid"))
        print(result.send_status, result.msg_id, result.queue_offset)
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import socket
import threading
import time
from collections.abc import Sequence

import numpy as np

from shmq.client.broker_link import BrokerLink
from shmq.client.ring_producer import RingProducer
from shmq.client.route import PERM_WRITE, RouteTable
from shmq.client.types import BulkSendResult, MessageQueue, SendResult, SendStatus
from shmq.codec import record as rec
from shmq.errors import ClientError, RemotingError, SendError, SendTimeoutError
from shmq.ipc import ring
from shmq.message import (
    Message,
    body_arrays,
    build_properties,
    offset_msg_id,
    pack_host,
    validate_topic,
)
from shmq.remoting.client import RemotingClient

log = logging.getLogger(__name__)


class Producer:
    """Sends messages to the brokers of a namesrv cluster on this host.

    ``send_timeout`` (RocketMQ ``sendMsgTimeout``, 3 s) bounds each attempt;
    ``retry_times_when_send_failed`` (2) more attempts go to another queue, preferring
    another broker, when an attempt times out or the broker cannot be reached.
    ``spin_us`` is how long a send spins on the broker's answer before parking on its
    semaphore (0 parks at once: less CPU, ~25 µs more latency per send).
    """

    def __init__(
        self,
        group: str,
        namesrv: str = "127.0.0.1:9876",
        *,
        send_timeout: float = 3.0,
        retry_times_when_send_failed: int = 2,
        spin_us: int = 50,
    ) -> None:
        self.spin_us = spin_us
        self.group = group
        self.send_timeout = send_timeout
        self.retries = retry_times_when_send_failed
        self.client = RemotingClient()
        self.routes = RouteTable(namesrv, self.client)
        self._links: dict[str, tuple[BrokerLink, RingProducer]] = {}
        self._counter = itertools.count(random.randrange(1 << 16))
        self._lock = threading.RLock()
        self._closed = False
        self._uniq_prefix = _uniq_prefix()
        self._uniq_seq = itertools.count()
        self._born_host = pack_host("127.0.0.1", 0)

    # -- public API -------------------------------------------------------------------------

    def send(self, msg: Message) -> SendResult:
        """Send one message and wait for the broker's answer (sync send)."""
        return self.send_batch([msg])[0]

    def send_batch(self, messages: Sequence[Message]) -> list[SendResult]:
        """Send messages of one topic to one queue in one ring write, waiting for all
        answers: many messages in flight at once (RocketMQ's batch send)."""
        if not messages:
            return []
        topic = messages[0].topic
        if any(m.topic != topic for m in messages):
            raise ClientError("a batch holds messages of one topic only")
        last: Exception | None = None
        avoid: str | None = None
        for _attempt in range(self.retries + 1):
            mq, link = self._select(topic, avoid)
            try:
                return self._send_to(link, mq, messages)
            except (SendTimeoutError, RemotingError) as exc:
                last = exc
                avoid = mq.broker_name
                self.routes.invalidate(topic)
                self._drop_link(mq.broker_name)
                log.warning("send to %s failed (%s); retrying", mq, exc)
        raise SendError(f"send to topic {topic} failed after {self.retries + 1} attempts: {last}")

    def send_bulk(
        self,
        topic: str,
        bodies: Sequence[bytes] | tuple[np.ndarray, np.ndarray],
        *,
        tags: str | None = None,
    ) -> BulkSendResult:
        """The fast path for bulk traffic: many bodies of one topic (a list of bytes, or a
        uint8 array with n + 1 int64 boundaries) to one queue, encoded by one kernel call
        per ring lap, with tags but no per-message keys or unique ids (their msg id is the
        offset msg id). Waits for every answer. Like ``send``, it retries elsewhere when
        the broker does not answer in time."""
        validate_topic(topic)
        data, offsets = body_arrays(bodies)
        n = offsets.shape[0] - 1
        if n <= 0:
            raise ClientError("send_bulk needs at least one body")
        props = np.frombuffer(build_properties(tags), dtype=np.uint8)
        props_offs = np.array([0, props.shape[0]], dtype=np.int64)
        topic_raw = np.frombuffer(topic.encode(), dtype=np.uint8)
        last: Exception | None = None
        avoid: str | None = None
        for _attempt in range(self.retries + 1):
            mq, (broker, ring_producer) = self._select(topic, avoid)
            fields = np.zeros((n, rec.N_FIELDS), dtype=np.int64)
            fields[:, rec.F_QUEUE_ID] = mq.queue_id
            fields[:, rec.F_BORN_TS] = time.time_ns() // 1_000_000
            fields[:, rec.F_BORN_HOST] = self._born_host
            fields[:, rec.F_BODY_CRC] = -1
            deadline = time.monotonic() + self.send_timeout
            try:
                with self._lock:
                    first, sizes = ring_producer.append(
                        topic_raw, data, offsets, props, props_offs, fields, deadline
                    )
                return self._bulk_result(broker, ring_producer, mq, first, sizes, deadline)
            except (SendTimeoutError, RemotingError) as exc:
                last = exc
                avoid = mq.broker_name
                self.routes.invalidate(topic)
                self._drop_link(mq.broker_name)
                log.warning("bulk send to %s failed (%s); retrying", mq, exc)
        raise SendError(
            f"bulk send to topic {topic} failed after {self.retries + 1} attempts: {last}"
        )

    def _bulk_result(
        self,
        broker: BrokerLink,
        ring_producer: RingProducer,
        mq: MessageQueue,
        first: int,
        sizes: np.ndarray,
        deadline: float,
    ) -> BulkSendResult:
        n = sizes.shape[0]
        ring_producer.wait_answer(first + n - 1, deadline)  # answers come in order
        rows = ring_producer.completions[(first + np.arange(n)) & (ring_producer.slots - 1)]
        status = rows[:, 0] & 0xFFFF
        if (status != ring.SEND_OK).any():
            bad = int(np.argmax(status != ring.SEND_OK))
            reason = int(rows[bad, 0] >> 16) & 0xFFFF
            raise SendError(
                f"broker {mq.broker_name} rejected message {bad} of the bulk send to "
                f"{mq.topic}: {ring.REASONS.get(reason, f'reason {reason}')}"
            )
        send_status = SendStatus.SEND_OK
        if broker.sync_flush:
            flush_deadline = time.monotonic() + broker.info["syncFlushTimeout"] / 1000
            if not ring_producer.wait_flushed(int(rows[-1, 2]) + int(sizes[-1]), flush_deadline):
                send_status = SendStatus.FLUSH_DISK_TIMEOUT
        return BulkSendResult(send_status, mq, rows[:, 1].copy(), rows[:, 2].copy())

    def send_oneway(self, msg: Message) -> None:
        """Hand one message to the broker's ring without waiting for the answer (RocketMQ's
        oneway send: no result, no retry). Returns once the record is in the ring."""
        mq, link = self._select(msg.topic, None)
        self._append(link[1], mq, [msg], [self._uniq_key()], time.monotonic() + self.send_timeout)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for name in list(self._links):
                self._drop_link(name)
            self.client.close()

    shutdown = close

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals --------------------------------------------------------------------------

    def _select(self, topic: str, avoid: str | None) -> tuple[MessageQueue, tuple]:
        brokers = [b for b in self.routes.brokers(topic, auto_create=True) if b.perm & PERM_WRITE]
        if not brokers:
            raise SendError(f"no broker accepts writes for topic {topic}")
        queues = [(b, q) for b in brokers for q in range(b.write_queue_nums)]
        preferred = [bq for bq in queues if bq[0].broker_name != avoid] or queues
        broker, qid = preferred[next(self._counter) % len(preferred)]
        return MessageQueue(topic, broker.broker_name, qid), self._link(broker)

    def _link(self, broker) -> tuple[BrokerLink, RingProducer]:
        with self._lock:
            if self._closed:
                raise ClientError("the producer is closed")
            found = self._links.get(broker.broker_name)
            if found is None or found[0].address != broker.address:
                link = BrokerLink(self.client, broker.address, self.group, "producer")
                ring_producer = RingProducer(link.info, link.counters, link.registry, self.spin_us)
                found = (link, ring_producer)
                self._links[broker.broker_name] = found
            return found

    def _drop_link(self, broker_name: str) -> None:
        with self._lock:
            found = self._links.pop(broker_name, None)
        if found is not None:
            found[1].close()
            found[0].close()

    def _send_to(
        self, link: tuple[BrokerLink, RingProducer], mq: MessageQueue, messages: Sequence[Message]
    ) -> list[SendResult]:
        broker, ring_producer = link
        n = len(messages)
        uniq = [self._uniq_key() for _ in range(n)]
        deadline = time.monotonic() + self.send_timeout
        first, sizes = self._append(ring_producer, mq, messages, uniq, deadline)
        answers = [ring_producer.wait_answer(first + i, deadline) for i in range(n)]
        return self._results(broker, ring_producer, mq, answers, sizes, uniq)

    def _append(
        self,
        ring_producer: RingProducer,
        mq: MessageQueue,
        messages: Sequence[Message],
        uniq: list[str],
        deadline: float,
    ) -> tuple[int, np.ndarray]:
        """Encode ``messages`` into the ring; returns the first sequence and record sizes."""
        n = len(messages)
        props = [m.encoded_properties(u) for m, u in zip(messages, uniq, strict=True)]
        props_offs = np.zeros(n + 1, dtype=np.int64)
        np.cumsum([len(p) for p in props], out=props_offs[1:])
        body_offs = np.zeros(n + 1, dtype=np.int64)
        np.cumsum([len(m.body) for m in messages], out=body_offs[1:])
        fields = np.zeros((n, rec.N_FIELDS), dtype=np.int64)
        fields[:, rec.F_QUEUE_ID] = mq.queue_id
        fields[:, rec.F_FLAG] = [m.flag for m in messages]
        fields[:, rec.F_BORN_TS] = time.time_ns() // 1_000_000
        fields[:, rec.F_BORN_HOST] = self._born_host
        fields[:, rec.F_BODY_CRC] = -1
        topic = np.frombuffer(mq.topic.encode(), dtype=np.uint8)
        bodies = np.frombuffer(b"".join(m.body for m in messages), dtype=np.uint8)
        with self._lock:
            return ring_producer.append(
                topic, bodies, body_offs, np.frombuffer(b"".join(props), np.uint8), props_offs,
                fields, deadline,
            )  # fmt: skip

    def _results(
        self,
        broker: BrokerLink,
        ring_producer: RingProducer,
        mq: MessageQueue,
        answers: list,
        sizes: np.ndarray,
        uniq: list[str],
    ) -> list[SendResult]:
        """SendResults from the writer's answers; in SYNC_FLUSH after the flush covering the
        last one (FLUSH_DISK_TIMEOUT when it takes longer than ``syncFlushTimeout``)."""
        host = broker.store_host_bytes
        results = []
        for a in answers:
            if a.status == ring.REJECTED:
                raise SendError(
                    f"broker {mq.broker_name} rejected the message to {mq.topic}: "
                    f"{ring.REASONS.get(a.reason, f'reason {a.reason}')}"
                )
        flushed_ok = True
        if broker.sync_flush:
            last = answers[-1]
            flush_deadline = time.monotonic() + broker.info["syncFlushTimeout"] / 1000
            flushed_ok = ring_producer.wait_flushed(
                last.physical_offset + int(sizes[-1]), flush_deadline
            )
        for i, a in enumerate(answers):
            status = SendStatus.SEND_OK if flushed_ok else SendStatus.FLUSH_DISK_TIMEOUT
            results.append(
                SendResult(
                    status,
                    uniq[i],
                    offset_msg_id(host, a.physical_offset),
                    MessageQueue(mq.topic, mq.broker_name, a.queue_id),
                    a.queue_offset,
                )
            )
        return results

    def _uniq_key(self) -> str:
        """RocketMQ's ``MessageClientIDSetter`` layout: host, pid, a per-instance random
        part, milliseconds and a counter, 32 hex digits."""
        ms = (time.time_ns() // 1_000_000) & 0xFFFFFFFF
        return f"{self._uniq_prefix}{ms:08X}{next(self._uniq_seq) & 0xFFFF:04X}"


def _uniq_prefix() -> str:
    try:
        ip = socket.inet_aton(socket.gethostbyname(socket.gethostname()))
    except OSError:
        ip = socket.inet_aton("127.0.0.1")
    return f"{ip.hex().upper()}{os.getpid() & 0xFFFF:04X}{random.getrandbits(32):08X}"
