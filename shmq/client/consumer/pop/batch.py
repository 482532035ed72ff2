"""The bulk form of a POP's messages (``SimpleConsumer.receive_batch``): columns instead
of a ``MessageExt`` and a receipt-handle string per message.

A pop names its handles once (its header: pop time, invisible time, revive queue, each
queue's checkpoint start) and each message only by its queue and offset, so a batch keeps
just that and acks all of it in one BATCH_ACK_MESSAGE; a handle string is built only when
asked for (``receipt_handle``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from shmq.client.consumer.pop.receipt import AckKey, PopHeader
from shmq.message import MessageBatch


class PopBatch(MessageBatch):
    """The messages one POP returned as a ``MessageBatch`` over several queues
    (``queue_id`` −1, as the POP asked): besides its columns, each message's
    ``queue_ids`` and ``retry_flags`` (0: the topic, 1 or 2: the group's POP retry topic,
    whose offsets ``queue_offsets`` then are), the broker and the pop's ``header``.

    Example::

        batch = consumer.receive_batch(32)
        for body in batch:
            handle(body)
        consumer.ack_batch(batch)
    """

    __slots__ = ("_runs", "broker_name", "header", "queue_ids", "retry_flags")

    def __init__(
        self,
        topic: str,
        broker_name: str,
        header: PopHeader | None,
        parts: Sequence[tuple[str, int, MessageBatch]],
    ) -> None:
        """One batch of ``parts``: ``(retry flag, queue id, that queue's messages)``
        (``header`` None: an empty batch, nothing popped)."""
        sizes = [len(b) for _, _, b in parts]
        body_offs = np.zeros(sum(sizes) + 1, dtype=np.int64)
        at = base = 0
        for _, _, batch in parts:
            n = len(batch)
            body_offs[at + 1 : at + n + 1] = batch.body_offsets[1:] - batch.body_offsets[0] + base
            base = int(body_offs[at + n])
            at += n

        def joined(column: str) -> np.ndarray:
            return np.concatenate([getattr(b, column) for _, _, b in parts] or [np.empty(0)])

        bodies = np.concatenate(
            [b.bodies[b.body_offsets[0] : b.body_offsets[-1]] for _, _, b in parts]
            or [np.empty(0, np.uint8)]
        )
        super().__init__(topic, -1, bodies, body_offs, joined("queue_offsets").astype(np.int64),
                         joined("store_timestamps").astype(np.int64))  # fmt: skip
        self.broker_name = broker_name
        self.header = header
        self.queue_ids = np.repeat(np.array([q for _, q, _ in parts], dtype=np.int64), sizes)
        self.retry_flags = np.repeat(np.array([int(f) for f, _, _ in parts], dtype=np.int8), sizes)
        ends = np.cumsum(sizes).tolist()
        # each queue's run of messages: (retry flag, queue id, first index, end index)
        self._runs = [(f, q, e - n, e) for (f, q, _), n, e in zip(parts, sizes, ends, strict=True)]

    def receipt_handle(self, i: int) -> str:
        """Message ``i``'s receipt handle, as ``MessageExt.receipt_handle`` would hold it."""
        flag = str(int(self.retry_flags[i]))
        assert self.header is not None  # an empty batch has no message i
        receipt = self.header.receipt(self.broker_name, flag, int(self.queue_ids[i]),
                                      int(self.queue_offsets[i]))  # fmt: skip
        return receipt.encode()

    def left_out(self) -> dict[AckKey, np.ndarray]:
        """The offsets the pop took that the batch does not hold (their tag string did not
        match, or cleanup removed their record), by checkpoint: acked at once, as the
        proxy acks what does not match, or they would come back after the invisible time."""
        out: dict[AckKey, np.ndarray] = {}
        if self.header is None:
            return out
        held = {(f, q): self.queue_offsets[i:j] for f, q, i, j in self._runs}
        for (flag, qid), offsets in self.header.msg_offsets.items():
            taken = np.asarray(offsets, dtype=np.int64)
            missing = taken[~np.isin(taken, held.get((flag, qid), taken[:0]))]
            if missing.size:
                out[self.header.ack_key(self.topic, flag, qid)] = missing
        return out

    def acks(self) -> dict[AckKey, np.ndarray]:
        """Every message's offset by checkpoint, for one BATCH_ACK_MESSAGE (one entry per
        queue run: no Python per message)."""
        header = self.header
        if header is None:
            return {}
        return {
            header.ack_key(self.topic, flag, qid): self.queue_offsets[i:j]
            for flag, qid, i, j in self._runs
            if j > i
        }
