"""Revive (RocketMQ 5's ``PopReviveService``): messages a POP group did not ack within
their invisible time are stored again, in the group's POP retry topic, so the group pops
them once more, one delivery attempt later; a message past the group's ``retryMaxTimes``
goes to ``%DLQ%<group>`` instead.

One thread of the supervisor does it: it sleeps until the next checkpoint's invisible time
passes (``reviveInterval`` at most), copies the messages of the checkpoints now due through
a ring of the broker's own (the writer stays the CommitLog's only writer), and only then
journals the checkpoint as done; a crash in between copies them again at the next start
(at least once, never lost). The copy keeps body, flag, properties and born time, counts
one more reconsume, and adds ``RETRY_TOPIC`` (the original topic), ``ORIGIN_MESSAGE_ID``
and ``1ST_POP_TIME``, as RocketMQ's revive does. A FIFO checkpoint is never revived: its
queue stays blocked and its messages are popped again in place.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from shmq.broker.context import BrokerContext
from shmq.broker.pop.checkpoints import Checkpoint
from shmq.broker.pop.service import PopService, _original_topic
from shmq.broker.ring_puts import broker_ring, put_records, refusal
from shmq.codec import record as rec
from shmq.codec.record_rebuild import edit_properties, property_value, rebuild_record
from shmq.errors import ShmqError
from shmq.message import offset_msg_id
from shmq.names import dlq_topic
from shmq.pop_receipt import pop_retry_topic
from shmq.remoting.protocol import ResponseError

log = logging.getLogger(__name__)

RETRY_AFTER_MS = 1000  # a revive whose copies were refused is tried again this much later
_RETRY_TOPIC, _ORIGIN_ID, _FIRST_POP = b"RETRY_TOPIC", b"ORIGIN_MESSAGE_ID", b"1ST_POP_TIME"
_DROP = frozenset({b"REAL_TOPIC", b"REAL_QID", b"DELAY", b"TIMER_DELIVER_MS", b"POP_CK"})


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class ReviveService:
    """The revive thread (see the module docstring)."""

    def __init__(self, ctx: BrokerContext, pop: PopService, wake_pops: Callable[[], None]) -> None:
        self.ctx = ctx
        self.pop = pop
        self.wake_pops = wake_pops  # revived copies are new messages for held pops
        self.ring = broker_ring(ctx, "shmq-pop-revive")
        self.ring_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="shmq-pop-revive", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.ring.close()

    def _run(self) -> None:
        interval = self.ctx.config.revive_interval
        while not self._stop.is_set():
            now = now_ms()
            try:
                due, following = self.pop.due(now)
                for ck in due:
                    if self._stop.is_set():
                        break
                    self._revive(ck)
            except Exception:
                log.exception("POP revive pass failed")
                following = None
            wait = interval if following is None else min(interval, max(1, following - now))
            self._stop.wait(wait / 1000)

    def _revive(self, ck: Checkpoint) -> None:
        if ck.order or not ck.unacked:
            return
        group_cfg = self.ctx.subscription_groups.get(ck.group)
        if group_cfg is None or self.ctx.topics.get(ck.topic) is None:
            self.pop.revived(ck, 0, 0)  # group or topic deleted: nothing to bring back
            return
        original = _original_topic(ck.group, ck.topic)
        retry = ck.topic if original != ck.topic else pop_retry_topic(ck.group, ck.topic)
        records: list[bytearray] = []
        dead = 0
        try:
            retry_cfg = self.ctx.topic_publisher.ensure(retry, 1)
            for offset in ck.unacked:
                copy = self._copy(ck, offset, retry_cfg.topic_name, group_cfg.retry_max_times)
                if copy is not None:
                    dead += copy[1]
                    records.append(copy[0])
            if dead:
                self.ctx.topic_publisher.ensure(dlq_topic(ck.group), 1)
            if records:
                for answer in put_records(self.ring, self.ring_lock, records, "POP revive"):
                    error = refusal(answer, "POP revive")
                    if error is not None:
                        raise error
        except (ResponseError, ShmqError) as exc:
            log.warning(
                "POP revive of %s %s queue %d at %d: %s; again in %d ms",
                ck.group,
                ck.topic,
                ck.queue_id,
                ck.start,
                exc,
                RETRY_AFTER_MS,
            )
            self.pop.retry_later(ck, now_ms() + RETRY_AFTER_MS)
            return
        self.pop.revived(ck, len(records) - dead, dead)
        if dead:
            self.ctx.events.dead_lettered(ck.group, ck.topic, dead)
        if records:
            self.wake_pops()

    def _copy(
        self, ck: Checkpoint, offset: int, retry: str, max_times: int
    ) -> tuple[bytearray, int] | None:
        """The record to store for the message at ``offset`` of ``ck``'s queue, and 1 when
        it goes to the DLQ; None when the store no longer holds it."""
        store = self.ctx.store
        unit = store.unit_at(ck.topic, ck.queue_id, offset)
        if unit is None:
            return None
        with store.reading() as reader:
            batch = reader.record_at(unit[0])
            if batch is None:
                return None
            buf, row = batch.buf, batch.rows[0]
            s, n = int(row["props_start"]), int(row["props_len"])
            props = buf[s : s + n].tobytes()
            reconsume = int(row["reconsume_times"]) + 1
            add = {}
            if property_value(props, _RETRY_TOPIC) is None:
                add["RETRY_TOPIC"] = batch.topic(0)
            if property_value(props, _ORIGIN_ID) is None:
                host_at = int(row["store_host"])
                host_len = 20 if int(row["sysflag"]) & rec.SYSFLAG_STOREHOST_V6 else 8
                add["ORIGIN_MESSAGE_ID"] = offset_msg_id(
                    buf[host_at : host_at + host_len].tobytes(), unit[0]
                )
            if property_value(props, _FIRST_POP) is None:
                add["1ST_POP_TIME"] = str(ck.pop_time)
            props = edit_properties(props, remove=_DROP, add=add)
            dead = 0 <= max_times < reconsume
            target = dlq_topic(ck.group) if dead else retry
            return rebuild_record(buf, row, target.encode(), 0, props, reconsume), int(dead)
