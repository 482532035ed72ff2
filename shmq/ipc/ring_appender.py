"""The appending side of a producer ring (``ipc.ring``): publish records, wake the writer,
wait for its answers.

Producers (``client.ring_producer``) build on it with their encoders; the broker's own
senders (the schedule agent's deliveries, consumers' send-backs, sends that arrive over
TCP) append records rebuilt from stored ones with ``append_raws`` or encoded ones with
``append_many``, and a sender waits for the flush and the slave with ``wait_durable``.
Waiting spins briefly and then parks on the ring's semaphore, counted in ``PARKED`` of the
ring's registry line (``ipc.parking``), so the writer (or the flush agent) posts once per
parked thread, and only when one sleeps.
"""

from __future__ import annotations

import os
import struct
import threading
import time
from collections.abc import Sequence

import numpy as np

from shmq.codec import record as rec
from shmq.codec.record_rebuild import PHYSICAL_OFFSET_POS, stamp_positions
from shmq.errors import SendError, SendTimeoutError
from shmq.ipc import counters as cn
from shmq.ipc import registry as rg
from shmq.ipc import ring
from shmq.ipc.idle import spare_cpus
from shmq.ipc.parking import ParkedAgent, Parking
from shmq.ipc.segment import FENCE_LOCK, Segment, open_semaphore

DEFAULT_SPIN_US = 50  # spin this long on an answer before parking (see perf-notes)
# A park ends at a post; the timeout only bounds how long a lost post (a dead broker) is
# noticed late, and the caller's liveness checks come first.
PARK_S = 0.2
_PHYSICAL_OFFSET = struct.Struct(">q")  # PHYSICALOFFSET: the ring position, for the writer


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


class RingAppender:
    """One ring, attached by its registration ``info`` (ring, sem, writerSem, slot): records
    go in at ``tail``, answers come back in the completion area. Callers serialise appends;
    waiting for answers may happen in any thread."""

    def __init__(
        self, info: dict, counters: Segment, registry: Segment, spin_us: int = DEFAULT_SPIN_US
    ) -> None:
        self.spin_s = spin_us / 1e6
        # below 4 CPUs the spin yields: the writer that answers and the consumers it wakes
        # need the cores (sync sends with a consumer running: 55 µs of the sender's CPU per
        # send spinning, 22 yielding)
        self.spin_yields = not spare_cpus()
        self.segment = Segment.attach(info["ring"])
        self.mm = self.segment.mm
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
        self.parking = Parking(self.registry, self.reg_base + rg.PARKED, self.sem)
        self.tail, self.seq = ring.load_tail(self.words)
        self.head, self.seq_head = ring.load_head(self.words)  # as last seen
        self.writer = ParkedAgent(self.counter_w, cn.WRITER_PARKED, cn.WRITER_PARKS,
                                  self.writer_sem)  # fmt: skip
        self._flush_wants: dict[int, int] = {}  # offset -> threads waiting for its flush
        self._flush_lock = threading.Lock()

    def append_raws(self, records: Sequence[bytes | bytearray], deadline: float) -> int:
        """Publish whole records (each one's PHYSICALOFFSET set to its ring position)
        together: one publish, one wake-up of the writer, when the ring has room for all;
        returns the first one's sequence number. Blocks while the ring is full, with what
        was written so far published (a timeout leaves those appended)."""
        first = self.seq
        mm = self.segment.mm
        for record in records:
            size = len(record)
            t, local = self._reserve(size, deadline)
            start = ring.DATA + local
            mm[start : start + size] = record
            _PHYSICAL_OFFSET.pack_into(mm, start + PHYSICAL_OFFSET_POS, t)
            self.tail = t + size
            self.seq += 1
        self._publish_written()
        return first

    def append_many(self, data: np.ndarray, ends: np.ndarray, deadline: float) -> int:
        """Publish whole records laid out one after another in ``data`` (record ``k`` from
        ``ends[k]`` to ``ends[k + 1]``); returns the first one's sequence number."""

        def copy(i: int, count: int, local: int) -> None:
            start, used = int(ends[i]), int(ends[i + count] - ends[i])
            self.data[local : local + used] = data[start : start + used]
            stamp_positions(self.data, local, ends, i, count, self.tail)

        sizes = np.diff(ends)
        if sizes.size and int(sizes.max()) + rec.MIN_BLANK > self.capacity:
            raise SendError(
                f"a record of {int(sizes.max())} bytes does not fit the ring of "
                f"{self.capacity} bytes (ringSize)"
            )
        return self._append_runs(sizes, copy, deadline)

    def _append_runs(self, sizes: np.ndarray, write, deadline: float) -> int:
        """Publish records of ``sizes`` in runs: as many as fit before the ring's end (and
        in its free completion slots) are written by ``write(first, count, index in
        data)`` and published together; a lap is closed with a blank record when the next
        record does not fit before the end. Returns the first record's sequence number."""
        first_seq = self.seq
        n, i, cap = sizes.shape[0], 0, self.capacity
        while i < n:
            head, seq_head = ring.load_head(self.words)
            self.head, self.seq_head = head, seq_head
            free = cap - (self.tail - head)
            local = self.tail & self.mask
            room = min(cap - local, free)
            slots = self.slots - (self.seq - seq_head)
            count, used = rec.place_batch(sizes[: i + slots], i, room, 0, scratch_offsets(n))
            if count == 0:
                if free >= cap - local and cap - local < sizes[i] + rec.MIN_BLANK:
                    rec.write_blank(self.data, local, cap - local)  # close the lap
                    self.tail += cap - local
                    ring.publish_tail(self.words, self.tail, self.seq)
                    continue
                seen = (head, seq_head)
                self._wait_writer(lambda seen=seen: ring.load_head(self.words) != seen, deadline)
                continue
            write(i, count, local)
            self.tail += used
            self.seq += count
            ring.publish_tail(self.words, self.tail, self.seq)
            self._wake_writer()
            i += count
        return first_seq

    def answered_words(self, first_seq: int, count: int) -> np.ndarray:
        """The packed STATUS | REASON << 16 | QUEUE_ID << 32 words of answered records
        ``first_seq .. first_seq + count - 1``, in order."""
        idx = (np.arange(first_seq, first_seq + count) & (self.slots - 1)).astype(np.int64)
        return self.completions[idx, 0].copy()

    def _reserve(self, size: int, deadline: float) -> tuple[int, int]:
        """Room for one record of ``size`` bytes at the tail (a lap closed first when the
        record would not fit before the ring's end): ``(ring position, index in data)``.
        Records written but not published yet are published before it waits."""
        t = self.tail
        local = t & self.mask
        if local + size + rec.MIN_BLANK > self.capacity:
            t, local = self._close_lap(size, deadline), 0
        if t + size - self.head > self.capacity or self.seq - self.seq_head >= self.slots:
            self._publish_written()
            self._wait_room(t, size, deadline)
        return t, local

    def _publish_written(self) -> None:
        """Publish the records written up to ``tail`` / ``seq``."""
        ring.publish_tail(self.w, self.tail, self.seq)
        self._wake_writer()

    def _wake_writer(self) -> None:
        """After publishing: post the writer if it parked, once per park (a post per record
        while it sleeps costs ~10 µs each)."""
        FENCE_LOCK.acquire()  # a full barrier before reading the writer's parked flag
        FENCE_LOCK.release()
        self.writer.wake()

    def stopped(self) -> bool:
        """Whether the broker stops or stopped reading this ring (cheap: three words; the
        reason comes from ``fence_reason``)."""
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
            self._publish_written()
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

    # -- answers ----------------------------------------------------------------------------

    def fence_reason(self) -> str | None:
        """Why the broker stopped reading this ring (the writer's FENCED word, or the
        supervisor's fence of this registry slot), or None."""
        if int(self.registry[self.reg_base + rg.STATE]) == rg.FENCED:
            return ring.FENCES[ring.FENCE_CRASH]
        return ring.load_fence(self.words)

    def publish_answer_waiters(self, count: int) -> None:
        """How many threads of this producer wait for answers (sync sends): the writer
        stays awake a while after answering them (``ipc.idle``'s linger)."""
        self.reg_w[self.reg_base + rg.ANSWER_WAITERS] = count

    def answered(self, seq: int) -> bool:
        return self.w[ring.SEQ_HEAD] > seq

    def answer(self, seq: int) -> Answer:
        return Answer(self.completions[seq & (self.slots - 1)])

    def answer_words(self, seq: int) -> tuple[int, int, int]:
        """``(status | reason << 16 | queue id << 32, queue offset, physical offset)`` of an
        answered record."""
        w, k = self.w, self.answer_word + 4 * (seq & (self.slots - 1))
        return w[k], w[k + 1], w[k + 2]

    def answer_run(self, first: int, count: int) -> list[list[int]]:
        """``answer_words`` of the ``count`` answered records from sequence ``first``, as
        Python ints, in one copy (about 0.04 µs an answer, against 0.15 µs read one by one)."""
        lo = first & (self.slots - 1)
        hi = lo + count
        comp = self.completions
        if hi <= self.slots:
            return comp[lo:hi, :3].tolist()
        return comp[lo:, :3].tolist() + comp[: hi - self.slots, :3].tolist()

    def wait_answer(self, seq: int, deadline: float) -> Answer:
        if not self.answered(seq):
            self._wait_writer(lambda: self.answered(seq), deadline)
        return self.answer(seq)

    def wait_durable(
        self, end_offset: int, deadline: float, sync_flush: bool, sync_master: bool
    ) -> bool:
        """Wait until the CommitLog is flushed (``sync_flush``) and acknowledged by a slave
        (``sync_master``) past ``end_offset``; False on timeout. A flush failure raises
        ``SendError``."""
        errors = int(self.counters[cn.FLUSH_ERRORS])

        def durable() -> bool:
            if self.counters[cn.FLUSH_FAILED] or int(self.counters[cn.FLUSH_ERRORS]) != errors:
                raise SendError("the broker failed to flush the CommitLog (fsync error)")
            return cn.durable_offset(self.counters, sync_flush, sync_master) >= end_offset

        if durable():
            return True
        self._want_flush(end_offset, 1)
        try:
            self._wait_writer(durable, deadline)
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
        """Spin for ``spin_s`` (yielding the CPU to any other runnable thread meanwhile, on
        a small host), then park until ``done()`` or the deadline."""
        spin_end = time.perf_counter() + self.spin_s
        yields = self.spin_yields
        while time.perf_counter() < spin_end:
            if done():
                return
            if yields:
                os.sched_yield()
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


_scratch_out = [np.empty(1024, dtype=np.int64)]


def scratch_offsets(n: int) -> np.ndarray:
    """A reusable output array for ``place_batch`` (its offsets are not needed here)."""
    if _scratch_out[0].shape[0] < n:
        _scratch_out[0] = np.empty(n, dtype=np.int64)
    return _scratch_out[0]
