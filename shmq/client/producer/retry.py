"""Queue selection and retries of a producer (RocketMQ 4.9's ``MQFaultStrategy`` and
``sendDefaultImpl`` / ``sendSelectImpl``).

A sync send makes up to 1 + ``retry_times_when_send_failed`` attempts within one
``send_timeout``, each on a queue of another broker than the last failed one where there is
one; an attempt that timed out is not repeated (the broker may have stored it). A send to a
queue chosen by selector or sharding key is attempted once (order matters more). With
latency fault tolerance on, every attempt's latency is remembered per broker and slow or
failed brokers are avoided (``shmq.client.producer.fault``).
"""

from __future__ import annotations

import collections
import itertools
import logging
import random
import time
from collections.abc import Callable
from typing import Any

from shmq.client.producer.answers import retryable
from shmq.client.producer.fault import LatencyFaultTolerance, select_one_message_queue
from shmq.client.producer.publish_info import PublishInfoTable, TopicPublishInfo
from shmq.client.route import BrokerQueues
from shmq.client.types import MessageQueue, SendStatus
from shmq.errors import AttemptError, RemotingError, SendError, SendTimeoutError, ShmqError

log = logging.getLogger(__name__)

Attempt = Callable[[BrokerQueues, MessageQueue, float], Any]


class SendRetry:
    def __init__(
        self,
        infos: PublishInfoTable,
        faults: LatencyFaultTolerance,
        *,
        send_timeout: float,
        retry_times_when_send_failed: int,
        retry_another_broker_when_not_store_ok: bool,
        send_latency_fault_enable: bool,
        stats: collections.Counter,
    ) -> None:
        self.infos = infos
        self.faults = faults
        self.send_timeout = send_timeout
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.retry_another_broker_when_not_store_ok = retry_another_broker_when_not_store_ok
        self.send_latency_fault_enable = send_latency_fault_enable
        self.stats = stats
        self.closed = False
        self._counter = itertools.count(random.randrange(1 << 31))  # sendWhichQueue

    def next_index(self) -> int:
        return next(self._counter) & 0x7FFFFFFF

    def select(self, info: TopicPublishInfo, last_broker: str | None) -> MessageQueue:
        queues = info.queues
        if not queues:
            raise info.no_writable_queue()
        if last_broker is None and not self.send_latency_fault_enable:
            return queues[self.next_index() % len(queues)]  # plain round robin
        faults = self.faults if self.send_latency_fault_enable else None
        return select_one_message_queue(queues, last_broker, self.next_index, faults)

    def update_fault(self, broker: str, started: float, isolation: bool) -> None:
        if self.send_latency_fault_enable:
            self.faults.update(broker, (time.monotonic() - started) * 1000, isolation)

    def send_with_retries(
        self, topic: str, attempt: Attempt, status_of: Callable[[Any], SendStatus]
    ) -> Any:
        """Attempts on queues chosen round robin (or avoiding failed brokers) until one
        gives a result; RocketMQ returns the last result it got, SEND_OK or not."""
        total = 1 + self.retry_times_when_send_failed
        deadline = time.monotonic() + self.send_timeout
        last_broker: str | None = None
        last_exc: BaseException | None = None
        last_result = None
        tried: list[str] = []
        for i in range(total):
            if i and time.monotonic() >= deadline:
                break
            info = self.infos.get(topic)
            mq = self.select(info, last_broker)
            broker = info.brokers[mq.broker_name]
            tried.append(mq.broker_name)
            started = time.monotonic()
            try:
                result = attempt(broker, mq, deadline)
            except ShmqError as exc:
                self.update_fault(mq.broker_name, started, isolation=True)
                if not retryable(exc):
                    if type(exc) is SendError:  # from the ring: name where it was going
                        raise SendError(f"send to {mq} failed: {exc}") from exc
                    raise
                last_exc, last_broker = exc, mq.broker_name
                self.infos.invalidate(topic)
                self.stats["failed_attempts"] += 1
                if i + 1 < total and not self.closed:
                    log.warning("send to %s failed (%s); retrying", mq, exc)
                    continue
                break
            self.update_fault(mq.broker_name, started, isolation=False)
            last_result = result
            if (
                status_of(result) is not SendStatus.SEND_OK
                and self.retry_another_broker_when_not_store_ok
                and i + 1 < total
            ):
                log.warning("send to %s: %s; retrying on another broker", mq, status_of(result))
                last_broker = mq.broker_name
                self.stats["not_store_ok_retries"] += 1
                continue
            return result
        if last_result is not None:
            return last_result
        cls = SendTimeoutError if isinstance(last_exc, SendTimeoutError) else SendError
        raise cls(
            f"send to topic {topic} failed after {len(tried)} attempt(s) "
            f"(brokers tried: {', '.join(tried)}): {last_exc}"
        ) from last_exc

    def send_selected(self, info: TopicPublishInfo, mq: MessageQueue, attempt: Attempt) -> Any:
        """One attempt on the chosen queue (no retry elsewhere)."""
        started = time.monotonic()
        try:
            result = attempt(info.brokers[mq.broker_name], mq, started + self.send_timeout)
        except ShmqError as exc:
            self.update_fault(mq.broker_name, started, isolation=True)
            self.infos.invalidate(mq.topic)
            if isinstance(exc, SendTimeoutError):
                raise SendTimeoutError(f"send to {mq} failed: {exc}") from exc
            if isinstance(exc, AttemptError | RemotingError):
                raise SendError(f"send to {mq} failed: {exc}") from exc
            raise
        self.update_fault(mq.broker_name, started, isolation=False)
        return result
