"""The producer's side of its ring: encode records in place, publish, wait for answers.

A single record is written with one ``struct.pack_into`` (``codec.record_pack``), a batch
with the store's numba kernel (``encode_batch``), a whole batch per call. The writer
computes the CRC it stores; the producer computes one only for a broker that checks it
(``checkProducerCrc``).
Publishing, waking the writer and waiting for answers are the ring's (``ipc.ring_appender``);
a SYNC_FLUSH wait parks the same way, posted by the flush agent.
"""

from __future__ import annotations

import zlib

import numpy as np

from shmq.client.gc_freeze import freeze_startup_objects
from shmq.codec import record as rec
from shmq.errors import SendError
from shmq.ipc import registry as rg
from shmq.ipc import ring
from shmq.ipc.counters import WRITER_PARKED
from shmq.ipc.ring_appender import DEFAULT_SPIN_US, RingAppender
from shmq.ipc.segment import Segment
from shmq.properties import MAX_DELAY_LEVEL


class RingProducer(RingAppender):
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
        super().__init__(info, counters, registry, spin_us)
        # what an auto-created topic gets (the send header's defaultTopicQueueNums)
        self.registry[self.reg_base + rg.DEFAULT_QUEUE_NUMS] = default_queue_nums
        self.max_body = int(info["maxMessageSize"])
        # the writer computes stored CRCs; the producer's are only read when it checks them
        self.check_crc = bool(info.get("checkProducerCrc", True))
        self.delay_levels = int(info.get("delayLevels", MAX_DELAY_LEVEL))
        self.max_delay_ms = int(info.get("timerMaxDelaySec", 3 * 86_400)) * 1000
        rec.warm_up_encode(np.zeros(4096, dtype=np.uint8))
        freeze_startup_objects()

    # -- sending ----------------------------------------------------------------------------

    def append_one(
        self, one: tuple, queue_id: int, born_host: int, deadline: float, reconsume: int = 0
    ) -> int:
        """Write one record (``send_records.one_record``) at the tail and publish it;
        returns its sequence number. Blocks while the ring is full. The caller wakes the
        writer (``wake_writer``) after releasing the lock it appended under."""
        record, size, magic, flag, born_ts, body, tail, sysflag, _ = one
        t = self.tail
        local = t & self.mask
        if (
            local + size + rec.MIN_BLANK > self.capacity
            or t + size - self.head > self.capacity
            or self.seq - self.seq_head >= self.slots
        ):  # the lap ends, or no room as last seen: the slow path
            t, local = self._reserve(size, deadline)
        crc = zlib.crc32(body) & 0x7FFFFFFF if self.check_crc else 0
        record.pack_into(
            self.mm, ring.DATA + local, size, magic, crc, queue_id, flag, 0, t, sysflag,
            born_ts, born_host, 0, 0, reconsume, 0, len(body), body, tail,
        )  # fmt: skip
        seq = self.seq
        self.seq = seq + 1
        self.tail = t + size
        ring.publish_tail(self.w, t + size, seq + 1)
        return seq

    def wake_writer(self) -> None:
        """Post the writer if it parked, after ``append_one``: call it after a full memory
        barrier that follows the append, such as the release of the lock the append was
        made under (a lock's release is an atomic read-modify-write, as ``fence`` is), so
        the writer either sees the record or is posted."""
        if self.counter_w[WRITER_PARKED]:
            self.writer.wake()

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
        fields["body_crc"] = -1 if self.check_crc else 0
        shared = props_offs.shape[0] == 2

        def encode(i: int, count: int, local: int) -> None:
            rec.encode_batch(
                self.data, local, self.tail - local, topic, bodies,
                body_offs[i : i + count + 1], props,
                props_offs if shared else props_offs[i : i + count + 1],
                fields[i : i + count],
            )  # fmt: skip

        return self._append_runs(sizes, encode, deadline), sizes
