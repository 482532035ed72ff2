"""The messages of one queue between pull and consume (RocketMQ's ``ProcessQueue``).

Messages go in ordered by queue offset and come out in any order, as consume threads finish.
The offset a consumer may commit is the smallest one still inside (or the largest pulled plus
one when it is empty): a crash then re-delivers what was in flight (at-least-once) and never
skips a message that was not consumed.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterable

from shmq.message import MessageBatch, MessageExt


class ProcessQueue:
    """Thread-safe: the pull thread puts, consume threads remove."""

    def __init__(self, next_offset: int) -> None:
        self.next_offset = next_offset  # where the next pull starts
        self.dropped = False
        self.paused = False
        self.last_pull = time.monotonic()
        self.last_consume = time.monotonic()
        self.next_pull_at = 0.0  # pull interval / flow-control back-off (monotonic)
        self.flow_controlled = False  # held back by a pull threshold since the last pull
        # first queue offset -> a message, or a whole MessageBatch of a bulk consumer
        self._msgs: dict[int, MessageExt | MessageBatch] = {}
        self._order: deque[int] = deque()  # offsets in put order, lazily trimmed
        self._max = -1
        # messages inside, and their bytes (their stored records: the body and at most a few
        # hundred bytes more; a bulk batch counts its bodies); plain attributes, read by the
        # pull loop for every queue on every pass, written under the lock
        self.count = 0
        self.size = 0
        self._lock = threading.Lock()
        # orderly consumption: the broker lock of the queue, held since locked_at
        # (monotonic), and the lock one consume thread holds while it processes a batch
        self.locked = False
        self.locked_at = 0.0
        self.consume_lock = threading.Lock()

    def put(self, msgs: list[MessageExt]) -> None:
        """Add a pulled batch (ascending offsets); a message already inside (a batch seen
        before, rare) is not added again. One loop: for one message, as a paced consumer
        puts, and for ``pull_batch_size`` of them it costs less than whole-batch list, dict
        and deque operations."""
        with self._lock:
            table, order = self._msgs, self._order
            count = size = 0
            top = -1
            for m in msgs:
                offset = m.queue_offset
                if offset not in table:
                    table[offset] = m
                    order.append(offset)
                    count += 1
                    size += m.store_size
                    top = offset if offset > top else top
            if count:
                self.count += count
                self.size += size
                if top > self._max:
                    self._max = top

    def put_batch(self, batch: MessageBatch) -> None:
        """Add a bulk consumer's batch as one entry (consumed, or not, as a whole)."""
        first = int(batch.queue_offsets[0])
        with self._lock:
            if first in self._msgs:
                return
            self._msgs[first] = batch
            self._order.append(first)
            self.count += len(batch)
            self.size += batch.bodies.nbytes
            self._max = max(self._max, int(batch.queue_offsets[-1]))

    def remove_batch(self, batch: MessageBatch) -> int:
        """Take a consumed batch out; returns the offset to commit now."""
        with self._lock:
            if self._msgs.pop(int(batch.queue_offsets[0]), None) is not None:
                self.count -= len(batch)
                self.size -= batch.bodies.nbytes
            return self._commit_offset()

    def remove(self, msgs: Iterable[MessageExt]) -> int:
        """Take consumed ``msgs`` out; returns the offset to commit now (-1 when nothing
        was ever put)."""
        with self._lock:
            pop = self._msgs.pop
            count = size = 0
            for m in msgs:
                gone = pop(m.queue_offset, None)
                if gone is not None:
                    count += 1
                    size += gone.store_size
            self.count -= count
            self.size -= size
            return self._commit_offset()

    def take(self, n: int) -> list[MessageExt]:
        """The first ``n`` messages inside, in offset order (an orderly consumer's next
        batch; they stay inside until ``remove``)."""
        with self._lock:
            msgs = self._msgs
            out = []
            for offset in self._order:  # put order: ascending offsets
                msg = msgs.get(offset)
                if msg is not None:
                    out.append(msg)
                    if len(out) == n:
                        break
            return out

    def _commit_offset(self) -> int:
        order = self._order
        if not self._msgs:
            order.clear()
        while order and order[0] not in self._msgs:
            order.popleft()
        if order:
            return order[0]
        return self._max + 1 if self._max >= 0 else -1

    def commit_offset(self) -> int:
        with self._lock:
            return self._commit_offset()

    def clear(self) -> None:
        with self._lock:
            self._msgs.clear()
            self._order.clear()
            self.count = 0
            self.size = 0

    def span(self) -> int:
        """Largest minus smallest offset inside (``consumeConcurrentlyMaxSpan`` checks it)."""
        with self._lock:
            if not self._msgs:
                return 0
            order = self._order
            while order[-1] not in self._msgs:
                order.pop()
            last = self._msgs[order[-1]]
            top = last.queue_offset if isinstance(last, MessageExt) else int(last.queue_offsets[-1])
            return top - self._commit_offset()

    def stats(self) -> dict[str, int | bool]:
        with self._lock:
            return {
                "msgCount": self.count,
                "msgSize": self.size,
                "maxOffset": self._max,
                "commitOffset": self._commit_offset(),
                "nextOffset": self.next_offset,
                "dropped": self.dropped,
                "paused": self.paused,
            }
