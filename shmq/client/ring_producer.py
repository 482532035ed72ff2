"""The producer's side of its ring: encode records in place, publish, wait for answers.

Encoding uses the same numba kernel as the store (``encode_batch``), a whole batch per call;
the body CRC is computed here, where the body is produced, so the writer only verifies it.
Waiting spins briefly and then parks on the producer's semaphore, counted in ``PARKED`` of
its registry line (``shmq.ipc.parking``), so the writer (or the flush agent) posts it once
per parked thread, and only when one sleeps.
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np

from shmq.codec import record as rec
from shmq.errors import SendError, SendTimeoutError
from shmq.ipc import counters as cn
from shmq.ipc import registry as rg
from shmq.ipc import ring
from shmq.ipc.parking import Parking
from shmq.ipc.segment import Segment, fence, open_semaphore, post

DEFAULT_SPIN_US = 50  # spin this long on an answer before parking (see perf-notes)
# A park ends at a post; the timeout only bounds how long a lost post (a dead broker) is
# noticed late, and the caller's liveness checks come first.
PARK_S = 0.2


def warm_up(data: np.ndarray | None = None) -> None:
    """Compile (or load from numba's cache) the encode kernels with the argument types a
    send uses, encoding one record at the start of ``data`` (a scratch buffer)."""
    data = np.zeros(4096, dtype=np.uint8) if data is None else data
    topic = np.frombuffer(b"WarmUp", dtype=np.uint8)
    bodies = np.frombuffer(b"x", dtype=np.uint8)
    body_offs = np.array([0, 1], dtype=np.int64)
    props = np.frombuffer(b"TAGS\x01a\x02", dtype=np.uint8)
    props_offs = np.array([0, props.shape[0]], dtype=np.int64)
    fields = np.zeros((1, rec.N_FIELDS), dtype=np.int64)
    fields[:, rec.F_BODY_CRC] = -1
    sizes = np.empty(1, dtype=np.int64)
    rec.batch_sizes(body_offs, topic.shape[0], props_offs, 1 << 20, sizes)
    rec.place_batch(sizes[:1], 0, data.shape[0], 0, _scratch_offsets(1))
    rec.encode_batch(data, 0, 0, topic, bodies, body_offs[0:2], props, props_offs, fields[0:1])
    rec.write_blank(np.zeros(16, dtype=np.uint8), 0, 8)


class Answer:
    """One record's outcome, read from the completion area."""

    __slots__ = ("physical_offset", "queue_id", "queue_offset", "reason", "status", "store_ts")

    def __init__(self, row: np.ndarray) -> None:
        (
            self.status,
            self.reason,
            self.queue_id,
            self.queue_offset,
            self.physical_offset,
            self.store_ts,
        ) = ring.unpack_completion(row)


class RingProducer:
    def __init__(
        self,
        info: dict,
        counters: Segment,
        registry: Segment,
        spin_us: int = DEFAULT_SPIN_US,
        default_queue_nums: int = 4,
    ) -> None:
        self.spin_s = spin_us / 1e6
        self.segment = Segment.attach(info["ring"])
        self.words = self.segment.words
        self.capacity, self.slots = ring.geometry(self.words)
        self.data = ring.data(self.segment.buf, self.capacity)
        self.completions = ring.completions(self.segment.buf, self.capacity, self.slots)
        self.sem = open_semaphore(info["sem"])
        self.writer_sem = open_semaphore(info["writerSem"])
        self.counters = counters.words
        self.registry = registry.words
        self.reg_base = rg.producer_base(info["slot"])
        # what an auto-created topic gets (the send header's defaultTopicQueueNums)
        self.registry[self.reg_base + rg.DEFAULT_QUEUE_NUMS] = default_queue_nums
        self.parking = Parking(self.registry, self.reg_base + rg.PARKED, self.sem)
        self._flush_wants: dict[int, int] = {}  # offset -> threads waiting for its flush
        self._flush_lock = threading.Lock()
        self.tail, self.seq = ring.load_tail(self.words)
        self.max_body = int(info["maxMessageSize"])
        warm_up()

    # -- sending ----------------------------------------------------------------------------

    def append(
        self,
        topic: np.ndarray,
        bodies: np.ndarray,
        body_offs: np.ndarray,
        props: np.ndarray,
        props_offs: np.ndarray,
        fields: np.ndarray,
        deadline: float,
    ) -> tuple[int, np.ndarray]:
        """Encode and publish records; returns the first one's sequence number and sizes."""
        n = fields.shape[0]
        sizes = np.empty(n, dtype=np.int64)
        bad = rec.batch_sizes(body_offs, topic.shape[0], props_offs, self.max_body, sizes)
        if bad >= 0:
            raise SendError(
                f"message {bad}: body of {int(body_offs[bad + 1] - body_offs[bad])} bytes; "
                f"bodies must be 1..{self.max_body} bytes (maxMessageSize)"
            )
        if int(sizes.max()) + rec.MIN_BLANK > self.capacity:
            raise SendError(
                f"a record of {int(sizes.max())} bytes does not fit the producer ring of "
                f"{self.capacity} bytes (ringSize)"
            )
        first_seq = self.seq
        shared = props_offs.shape[0] == 2
        cap = self.capacity
        i = 0
        while i < n:
            head, seq_head = ring.load_head(self.words)
            free = cap - (self.tail - head)
            slots_free = self.slots - (self.seq - seq_head)
            local = self.tail & (cap - 1)
            room = min(cap - local, free)
            count, used = rec.place_batch(sizes[: i + slots_free], i, room, 0, _scratch_offsets(n))
            if count == 0:
                if free >= cap - local and cap - local < sizes[i] + rec.MIN_BLANK:
                    rec.write_blank(self.data, local, cap - local)  # close the lap
                    self.tail += cap - local
                    ring.publish_tail(self.words, self.tail, self.seq)
                    continue
                seen = (head, seq_head)
                self._wait_writer(lambda seen=seen: ring.load_head(self.words) != seen, deadline)
                continue
            rec.encode_batch(
                self.data, local, self.tail - local, topic, bodies,
                body_offs[i : i + count + 1], props,
                props_offs if shared else props_offs[i : i + count + 1],
                fields[i : i + count],
            )  # fmt: skip
            self.tail += used
            self.seq += count
            ring.publish_tail(self.words, self.tail, self.seq)
            fence()
            if self.counters[cn.WRITER_PARKED]:
                post(self.writer_sem)
            i += count
        return first_seq, sizes

    # -- answers ----------------------------------------------------------------------------

    def fence_reason(self) -> str | None:
        """Why the broker stopped reading this ring (the writer's FENCED word, or the
        supervisor's fence of this registry slot), or None."""
        if int(self.registry[self.reg_base + rg.STATE]) == rg.FENCED:
            return ring.FENCES[ring.FENCE_CRASH]
        return ring.load_fence(self.words)

    def answered(self, seq: int) -> bool:
        return ring.load_seq_head(self.words) > seq

    def answer(self, seq: int) -> Answer:
        return Answer(self.completions[seq & (self.slots - 1)])

    def wait_answer(self, seq: int, deadline: float) -> Answer:
        if not self.answered(seq):
            self._wait_writer(lambda: self.answered(seq), deadline)
        return self.answer(seq)

    def wait_flushed(self, end_offset: int, deadline: float) -> bool:
        """SYNC_FLUSH: wait until the CommitLog is flushed past ``end_offset``; False on
        timeout. A flush failure raises ``SendError``."""
        errors = int(self.counters[cn.FLUSH_ERRORS])

        def flushed() -> bool:
            if self.counters[cn.FLUSH_FAILED] or int(self.counters[cn.FLUSH_ERRORS]) != errors:
                raise SendError("the broker failed to flush the CommitLog (fsync error)")
            return int(self.counters[cn.FLUSHED_OFFSET]) >= end_offset

        if flushed():
            return True
        self._want_flush(end_offset, 1)
        try:
            self._wait_writer(flushed, deadline)
        except SendTimeoutError:
            return False
        finally:
            self._want_flush(end_offset, -1)
        return True

    def _want_flush(self, offset: int, delta: int) -> None:
        """Count a thread in or out of waiting for ``offset`` to be flushed, and publish
        the smallest offset waited for: the flush agent posts once it is reached."""
        with self._flush_lock:
            wants = self._flush_wants
            left = wants.get(offset, 0) + delta
            if left > 0:
                wants[offset] = left
            else:
                wants.pop(offset, None)
            self.registry[self.reg_base + rg.WAIT_FLUSH_OFFSET] = min(wants, default=0)

    def _wait_writer(self, done, deadline: float) -> None:
        """Spin for ``spin_s``, then park until ``done()`` or the deadline."""
        spin_end = time.perf_counter() + self.spin_s
        while time.perf_counter() < spin_end:
            if done():
                return
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                if done():
                    return
                raise SendTimeoutError(
                    f"no answer from the broker's writer within the send timeout "
                    f"(producer pid {os.getpid()})"
                )
            if self.parking.park(done, min(left, PARK_S)):
                return

    def close(self) -> None:
        self.sem.close()
        self.writer_sem.close()
        self.data = self.completions = self.words = None
        self.segment.close()


_scratch = [np.empty(1024, dtype=np.int64)]


def _scratch_offsets(n: int) -> np.ndarray:
    """A reusable output array for ``place_batch`` (its offsets are not needed here)."""
    if _scratch[0].shape[0] < n:
        _scratch[0] = np.empty(n, dtype=np.int64)
    return _scratch[0]
