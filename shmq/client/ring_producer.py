"""The producer's side of its ring: encode records in place, publish, wait for answers.

A single record is written with one ``struct.pack_into`` (``codec.record_pack``), a batch
with the store's numba kernel (``encode_batch``), a whole batch per call. The writer
computes the CRC it stores; the producer computes one only for a broker that checks it
(``checkProducerCrc``).
Waiting spins briefly and then parks on the producer's semaphore, counted in ``PARKED`` of
its registry line (``shmq.ipc.parking``), so the writer (or the flush agent) posts it once
per parked thread, and only when one sleeps.
"""

from __future__ import annotations

import os
import threading
import time
import zlib

import numpy as np

from shmq.client.gc_freeze import freeze_startup_objects
from shmq.codec import record as rec
from shmq.errors import SendError, SendTimeoutError
from shmq.ipc import counters as cn
from shmq.ipc import registry as rg
from shmq.ipc import ring
from shmq.ipc.parking import Parking
from shmq.ipc.segment import FENCE_LOCK, Segment, open_semaphore, post

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
    """A producer's ring: records go in at ``tail`` (one struct per record, or a numba batch),
    answers come back in the completion area. Callers serialise appends (the link's lock);
    waiting for answers may happen in any thread."""

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
        self.mask = self.capacity - 1
        self.data = ring.data(self.segment.buf, self.capacity)
        self.completions = ring.completions(self.segment.buf, self.capacity, self.slots)
        # word access from Python without numpy scalars: the hot path reads and publishes
        # these words once per message
        self.w = memoryview(self.segment.mm).cast("q")
        self.answer_word = (ring.DATA + self.capacity) // 8
        self.counter_w = memoryview(counters.mm).cast("q")
        self.reg_w = memoryview(registry.mm).cast("q")
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
        self.head, self.seq_head = ring.load_head(self.words)  # as last seen
        self._posted_park = -1  # the writer's park (WRITER_PARKS) this producer last posted
        self.max_body = int(info["maxMessageSize"])
        # the writer computes stored CRCs; the producer's are only read when it checks them
        self.check_crc = bool(info.get("checkProducerCrc", True))
        warm_up()
        freeze_startup_objects()

    # -- sending ----------------------------------------------------------------------------

    def append_one(self, one: tuple, queue_id: int, born_host: int, deadline: float) -> int:
        """Write one record (``send_records.one_record``) at the tail and publish it;
        returns its sequence number. Blocks while the ring is full."""
        record, size, magic, flag, born_ts, body, tail, _ = one
        t = self.tail
        local = t & self.mask
        if local + size + rec.MIN_BLANK > self.capacity:
            t, local = self._close_lap(size, deadline), 0
        if t + size - self.head > self.capacity or self.seq - self.seq_head >= self.slots:
            self._wait_room(t, size, deadline)
        crc = zlib.crc32(body) & 0x7FFFFFFF if self.check_crc else 0
        record.pack_into(
            self.segment.mm, ring.DATA + local, size, magic, crc, queue_id, flag, 0, t, 0,
            born_ts, born_host, 0, 0, 0, 0, len(body), body, tail,
        )  # fmt: skip
        seq = self.seq
        self.seq = seq + 1
        self.tail = t + size
        w = self.w
        w[ring.SEQ_TAIL] = seq + 1
        w[ring.TAIL] = t + size
        self._wake_writer()
        return seq

    def _wake_writer(self) -> None:
        """After publishing: post the writer if it parked, once per park (it counts its
        parks in WRITER_PARKS; a post per record while it sleeps costs ~10 µs each)."""
        FENCE_LOCK.acquire()  # a full barrier before reading the writer's parked flag
        FENCE_LOCK.release()
        cw = self.counter_w
        if cw[cn.WRITER_PARKED] and cw[cn.WRITER_PARKS] != self._posted_park:
            self._posted_park = cw[cn.WRITER_PARKS]
            post(self.writer_sem)

    def stopped(self) -> bool:
        """Whether the broker stops or stopped reading this ring (cheap: three words; the
        reason comes from ``fence_reason`` and the link's ``gone_reason``)."""
        return (
            self.counter_w[cn.STATE] == cn.STATE_STOPPING
            or self.w[ring.FENCED] != 0
            or self.reg_w[self.reg_base + rg.STATE] == rg.FENCED
        )

    def _close_lap(self, size: int, deadline: float) -> int:
        """End the lap with a blank record once the writer left room for it; the record
        then starts the next lap. Returns the new tail."""
        if size + rec.MIN_BLANK > self.capacity:
            raise SendError(
                f"a record of {size} bytes does not fit the producer ring of "
                f"{self.capacity} bytes (ringSize)"
            )
        t = self.tail
        rest = self.capacity - (t & self.mask)
        if t + rest - self.head > self.capacity:
            self._wait_room(t, rest, deadline, records=0)
        rec.write_blank(self.data, t & self.mask, rest)
        self.tail = t + rest
        ring.publish_tail(self.words, self.tail, self.seq)
        return self.tail

    def _wait_room(self, t: int, size: int, deadline: float, records: int = 1) -> None:
        """Until the writer has consumed enough for ``size`` more bytes and ``records``
        more completion slots."""

        def room() -> bool:
            w = self.w
            self.seq_head = w[ring.SEQ_HEAD]
            self.head = w[ring.HEAD]
            return (
                t + size - self.head <= self.capacity
                and self.seq + records - self.seq_head <= self.slots
            )

        if not room():
            self._wait_writer(room, deadline)

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
        fields[:, rec.F_BODY_CRC] = -1 if self.check_crc else 0
        first_seq = self.seq
        shared = props_offs.shape[0] == 2
        cap = self.capacity
        i = 0
        while i < n:
            head, seq_head = ring.load_head(self.words)
            self.head, self.seq_head = head, seq_head
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
            self._wake_writer()
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
        return self.w[ring.SEQ_HEAD] > seq

    def answer(self, seq: int) -> Answer:
        return Answer(self.completions[seq & (self.slots - 1)])

    def answer_words(self, seq: int) -> tuple[int, int, int]:
        """``(status | reason << 16 | queue id << 32, queue offset, physical offset)`` of an
        answered record."""
        w, k = self.w, self.answer_word + 4 * (seq & (self.slots - 1))
        return w[k], w[k + 1], w[k + 2]

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
        self.w.release()
        self.counter_w.release()
        self.reg_w.release()
        self.data = self.completions = self.words = None
        self.segment.close()


_scratch = [np.empty(1024, dtype=np.int64)]


def _scratch_offsets(n: int) -> np.ndarray:
    """A reusable output array for ``place_batch`` (its offsets are not needed here)."""
    if _scratch[0].shape[0] < n:
        _scratch[0] = np.empty(n, dtype=np.int64)
    return _scratch[0]
